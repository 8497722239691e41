// Package e2e holds the end-to-end tests: the real mcp-exec binary, started as a user
// starts it, driven by independent clients (the TypeScript SDK and the MCP Inspector's
// CLI from scripts/e2e, the Go SDK's client, raw HTTP), against the real engine and
// sandbox image (the standalone image, the test cluster) — and its one harness, which
// cmd/mcp-exec's few live tests of package-internal bounds use too.
//
// The harness builds the binary once per test process (Build), starts it on a free
// loopback port and waits until it answers (Serve; a failed start-up check skips
// outside CI and fails in it, CI=true), and at the end stops it with SIGTERM and checks
// a clean exit, no sandbox left behind (AssertNoContainers) and no token in its log. It
// connects the Go SDK's client (Server.Connect), runs the Node clients (RunClient,
// RunNode: npm ci when node_modules is stale), and passes the engine, image, runtime
// and backend selection of the test's environment on to the server (Env, BackendEnv),
// nothing else. Main (from TestMain) removes the binary and fails a run that leaves a
// goroutine behind.
//
// A test that needs a package-main internal (a limit derived from the defaults, the
// launcher built in-process) stays in cmd/mcp-exec. Which tests run on which engines,
// runtimes and the test cluster: scripts/test.sh and docs/testing.md.
package e2e
