// Package mcpserver exposes a [Runner] as an MCP server whose tool "exec" runs
// caller-supplied Python (or bash or JavaScript: Options.Languages) in a throwaway
// sandbox and returns its stdout, stderr, exit code and output files. Options add to it,
// the tool list fixed for a configuration:
// sessions (session_create, session_close), each kept in a [SessionStore] (this
// server's memory, or launcher/kube's, shared by every replica) with a sandbox held
// (launcher.Session) or attached per call (launcher.AttachedSession); code mode
// (Options.Upstreams, package upstream: programs call allowed upstream tools, and
// tools_search finds them); egress profiles a call may name (Options.Egress); background
// runs (Options.Runs: exec's "background", run_wait, run_cancel), kept in this server's
// memory by one registry (runs.go) within a count and a byte budget, which MCP tasks
// (tasks.go) see through the task methods; a run in a held session holds the session's
// claim until it ends.
//
// Every call ends in one of three channels, never mixed:
//
//   - Program failure (non-zero exit, timeout, OOM kill) is a normal result, isError
//     false: the program ran, and the model reads stderr to fix it.
//   - Invalid input is a tool error naming the field and the limit it broke; the
//     runner is not called.
//   - Infrastructure failure (no engine, missing image, a broken sandbox) is a tool
//     error written for the person who deploys the server.
//
// No caller data (code, stdin, output, file names or contents, progress messages) is
// logged, only metadata and a random exec_id. The tool's contract: README.md.
package mcpserver
