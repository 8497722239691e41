// Package upstream is code mode's server side: the upstreams file (Load, Parse), the
// go-sdk client sessions with the upstream MCP servers (Manager), and the bridge of one
// exec (Exec), whose Tools the launcher carries to the sandbox's mcptools module.
//
// Invariants (docs/code-mode.md has each in full, with the tests that hold it):
//
//   - Only the tools a server's allowlist names are called; there is no allow-all.
//   - A call is read into one canonical value (canonical.go), and those bytes go
//     upstream: the bytes a human approves for a tool on the approve list (Approver);
//     any doubt (declined, no client to ask, over MaxApprovalArgs) is a denial.
//   - Each exec has a budget (calls, bytes of one call's arguments, bytes of all its
//     results) and each call a deadline within the exec's; the exec's end cancels
//     every call in flight.
//   - Secrets stay in the server: never in the sandbox, a log, an error or a Status.
//   - One identity's calls never use another's upstream session unless the server is
//     shared; what is read of one upstream message is bounded before decoding
//     (limit.go); an HTTP upstream's headers go to its URL's origin only.
//   - Records, logs and Status carry metadata only, names as configured or listed
//     (else Unknown), at most one record per call the budget counted.
package upstream
