package e2e_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestMetricsAfterWorkload scrapes /metrics after a mixed workload and compares every
// counter with the calls made.
func TestMetricsAfterWorkload(t *testing.T) {
	bin := e2e.Build(t)
	s := e2e.Serve(t, bin, e2e.Env("MCP_EXEC_POOL_SIZE=1", "MCP_EXEC_MEMORY=64m"), "http", "test-metrics", "")
	base := s.Base
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("server never ready")
		}
	}

	session := s.Connect(t, nil, nil)
	calls := []map[string]any{
		{"code": "print('a')"},
		{"code": "print('b')"},
		{"code": "import sys; sys.exit(3)"},
		{"code": "while True: pass", "timeout_s": 1},
		{"code": "x = bytearray(200 * 1024 * 1024)"},
		{"code": "import sys\nfor _ in range(20000): print('y' * 100)"},
		{"code": ""}, // invalid: never reaches the launcher
	}
	for _, args := range calls {
		if _, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "exec", Arguments: args}); err != nil {
			t.Fatal(err)
		}
	}

	// A session: its sandbox comes from the session pool (size 1 by default), filled
	// since the start.
	if res, err := session.CallTool(t.Context(), &mcp.CallToolParams{Name: "session_create", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("session_create: %v, %+v", err, res)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	value := func(series string) float64 {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`)
		m := re.FindSubmatch(body)
		if m == nil {
			t.Errorf("series %s missing from /metrics", series)
			return -1
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	for series, want := range map[string]float64{
		`mcp_exec_executions_total{outcome="ok"}`:        3, // 2 prints and the flood
		`mcp_exec_executions_total{outcome="non_zero"}`:  1,
		`mcp_exec_executions_total{outcome="timeout"}`:   1,
		`mcp_exec_executions_total{outcome="oom"}`:       1,
		`mcp_exec_executions_total{outcome="error"}`:     0,
		`mcp_exec_executions_total{outcome="cancelled"}`: 0,
		`mcp_exec_truncations_total`:                     1,
		`mcp_exec_execution_duration_seconds_count`:      6,
		`mcp_exec_queue_wait_seconds_count`:              6,
		`mcp_exec_pool_size`:                             1,
		`mcp_exec_cleanup_failures_total`:                0,
		`mcp_exec_session_pool_size`:                     1,
		`mcp_exec_sessions_opened_total{source="pool"}`:  1,
		`mcp_exec_sessions_opened_total{source="cold"}`:  0,
	} {
		if got := value(series); got != want {
			t.Errorf("%s: got %v, want %v", series, got, want)
		}
	}
	// Start-up runs one sandbox to verify the limits, so created >= 6 + 1.
	if got := value("mcp_exec_containers_created_total"); got < 7 {
		t.Errorf("containers created: got %v, want at least 7", got)
	}
	if got := value("mcp_exec_output_bytes_total"); got < 1<<20 {
		t.Errorf("output bytes: got %v, want at least the 1 MiB cap from the flood", got)
	}
	if strings.Contains(string(body), "print(") {
		t.Errorf("/metrics contains caller code")
	}
}
