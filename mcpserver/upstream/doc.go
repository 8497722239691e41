// Package upstream is code mode's server side: the upstreams file (Load, Parse), the
// go-sdk client sessions with the upstream MCP servers (Manager), and the bridge of one
// exec (Exec), whose Tools the launcher carries to the sandbox's mcptools module.
//
// Invariants:
//
//   - A program reaches only the tools the file's allowlist names for a configured
//     server; any other call is refused before an upstream sees it. There is no
//     allow-all default.
//   - A call message is read into one canonical value (no key twice at any depth),
//     and its arguments go upstream in the canonical encoding (canonical.go).
//   - A call of a tool on the server's approve list runs only after the human accepts
//     it (the Approver, MCP elicitation), shown the canonical arguments whole: the
//     bytes that go upstream. Declined, canceled, when the client cannot be asked, or
//     when the arguments do not fit the question (MaxApprovalArgs), it is denied
//     before an upstream sees it.
//   - Each exec has a budget (calls, which every call spends whatever becomes of it;
//     bytes of one call's arguments; bytes of all its results) and each call a
//     deadline, the smaller of the call timeout and what is left of the exec's; the
//     exec's end cancels every call in flight upstream.
//   - Secrets (env and header values, resolved from ${env:NAME} or ${file:/path}) stay
//     in the server: never in the sandbox, the logs, an error or a status. Stdio
//     upstreams run as children with PATH and their own env only.
//   - One identity's calls never go on another identity's session with an upstream,
//     unless the file says the server is shared; such sessions are bounded in number
//     and closed when idle.
//   - What is read of one message from an upstream is bounded before it is decoded
//     (limit.go); an answer over the bound fails its call only, not the session.
//   - An HTTP upstream's headers go to its URL's origin only; a redirect elsewhere is
//     refused.
//   - An upstream that is down does not stop the server: its calls fail as
//     unavailable while the Manager reconnects with backoff.
//   - CallRecord, the logs and Status carry metadata only, never arguments or results;
//     a record names a server as configured and a tool as listed, else Unknown, never
//     as a program wrote it, and an exec keeps at most a record per call its budget
//     counted.
package upstream
