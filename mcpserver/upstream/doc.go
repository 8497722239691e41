// Package upstream is code mode's server side: the upstreams file (Load, Parse), the
// go-sdk client sessions with the upstream MCP servers (Manager), and the bridge of one
// exec (Exec), whose Tools the launcher carries to the sandbox's mcptools module.
//
// Invariants:
//
//   - A program reaches only the tools the file's allowlist names for a configured
//     server; any other call is refused before an upstream sees it. There is no
//     allow-all default.
//   - A call of a tool on the server's approve list runs only after the human accepts
//     it (the Approver, MCP elicitation); declined, canceled, or when the client
//     cannot be asked, it is denied before an upstream sees it.
//   - Each exec has a budget (calls, bytes of one call's arguments, bytes of all its
//     results) and each call a deadline, the smaller of the call timeout and what is
//     left of the exec's; the exec's end cancels every call in flight upstream.
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
//   - CallRecord, the logs and Status carry metadata only, never arguments or results.
package upstream
