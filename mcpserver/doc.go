// Package mcpserver exposes a [Runner] as an MCP server whose tool "exec" runs
// caller-supplied Python in a throwaway sandbox and returns its stdout, stderr and
// exit code; with sessions, session_create and session_close join it.
//
// With Options.Upstreams (code mode), programs may call the allowed tools of other
// MCP servers through the sandbox's stream (package upstream); exec's description
// then carries their index, its result a tool_calls list (metadata only), and a
// second, read-only tool, tools_search, returns their Python signatures. The tool
// list is fixed for a given configuration either way.
//
// Every call ends in one of three channels, and they are never mixed:
//
//   - Program failure is a normal result. A non-zero exit code, a timeout or an
//     out-of-memory kill is reported in the structured result with isError
//     false: the program ran, and the model reads stderr to fix it.
//   - Invalid input is a tool error (isError true) whose text names the field
//     and the limit it broke, so the model can correct the call. The runner is
//     not called.
//   - Infrastructure failure (no container engine, missing image, a broken
//     sandbox) is a tool error whose text is written for the person who deploys
//     the server; retrying with different code will not help.
//
// Files travel both ways. Input files ("files") are checked (relative names
// only, no "." or ".." parts, caps on count and size) and written into the
// working directory before the program starts. What the program leaves in
// /tmp/outputs, and its open matplotlib figures, come back after the text
// block: PNG, JPEG, GIF and WebP files as image content, other files as
// embedded resources; the structured result lists every file, with the reason
// for each one not returned.
//
// A call whose request carries a progress token gets notifications/progress
// about once a second while the program runs, and while it waits for a sandbox
// (after a 1.5 s grace), so that a client that resets its request timeout on
// progress never gives up on a call that is alive. A call the client cancels
// (notifications/cancelled) has its context cancelled by the SDK, and the
// runner kills and removes its sandbox.
//
// The server never logs caller data: not the code, not stdin, not stdout or
// stderr, not file names or contents, not progress messages (they quote the
// output). Log lines carry metadata only (sizes, counts, durations, exit status
// and a random per-call exec_id), so logs can be kept without becoming a copy
// of what callers ran.
package mcpserver
