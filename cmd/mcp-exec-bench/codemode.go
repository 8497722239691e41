package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// The code-mode section: an upstream MCP server (in this process, streamable HTTP on
// 127.0.0.1) with one tool returning docBytes of text, called N times (a) as N direct
// tools/call round trips from a client, as an agent without code mode makes them, and
// (b) inside one exec, through the bridge, by a program that prints a one-line
// summary. It reports the bytes of results that reach the client (a stand-in for the
// model's context) and, from a longer exec, each bridged call's time as the program
// sees it beside the direct round trip to the same upstream.

const (
	docBytes     = 2048
	overheadRuns = 200 // calls in the per-call timing exec, and direct calls beside it
	codeReps     = 3   // repetitions of each N; the report shows medians
)

var codeNs = []int{1, 10, 50}

type codeRow struct {
	n                      int
	directBytes, execBytes int
	directWall, execWall   []time.Duration
}

type codeRows struct {
	rows            []*codeRow
	direct, bridged []time.Duration // per call: direct round trip; in the sandbox
	served          []time.Duration // per bridged call listed in tool_calls: the server's part (whole ms)
	err             error
}

type docIn struct {
	I int `json:"i" jsonschema:"which document"`
}

func benchUpstream() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "doc", Description: "Return document i (2 KB of text)."}, func(ctx context.Context, req *mcp.CallToolRequest, in docIn) (*mcp.CallToolResult, any, error) {
		head := "document " + strconv.Itoa(in.I) + ": "
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: head + strings.Repeat("x", docBytes-len(head))}}}, nil, nil
	})
	return s
}

func (b *bench) codemode(ctx context.Context) error {
	rows := &codeRows{}
	b.rep.code = rows
	rows.err = b.codemodeRuns(ctx, rows)
	if rows.err != nil && ctx.Err() == nil {
		progress("codemode: %v", rows.err)
	}
	return ctx.Err()
}

func (b *bench) codemodeRuns(ctx context.Context, rows *codeRows) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return benchUpstream() }, nil), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String()

	cfg, err := upstream.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"bench": {"url": %q, "tools": ["doc"]}}, "limits": {"max_calls": 1000}}`, url)),
		upstream.Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := upstream.New(cfg, "bench", zerolog.Nop())
	m.Start(mctx, 10*time.Second)
	if st := m.Status(); len(st) != 1 || !st[0].Connected {
		return fmt.Errorf("the bench upstream is not connected: %+v", st)
	}
	dc, err := mcp.NewClient(&mcp.Implementation{Name: "mcp-exec-bench-direct", Version: "v0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		return fmt.Errorf("direct client: %w", err)
	}
	defer dc.Close()

	st, err := newStackUpstreams(ctx, b.cli, b.cfg.image, b.cfg.runtime, launcher.Options{PoolSize: b.cfg.pool}, m)
	if err != nil {
		return err
	}
	defer st.close()

	direct := func(k int) (int, time.Duration, error) {
		t0 := time.Now()
		res, err := dc.CallTool(ctx, &mcp.CallToolParams{Name: "doc", Arguments: map[string]any{"i": k}})
		d := time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		raw, _ := json.Marshal(res)
		return len(raw), d, nil
	}
	// Warm up both paths (connections, the interpreter's first import of mcptools).
	if _, _, err := direct(0); err != nil {
		return err
	}
	if _, _, err := b.codeExec(ctx, st, summaryProgram(1)); err != nil {
		return err
	}
	for _, n := range codeNs {
		progress("codemode: %d calls, direct and in one exec", n)
		row := &codeRow{n: n}
		rows.rows = append(rows.rows, row)
		for range codeReps {
			row.directBytes = 0
			t0 := time.Now()
			for k := range n {
				size, d, err := direct(k)
				if err != nil {
					return err
				}
				row.directBytes += size
				rows.direct = append(rows.direct, d)
			}
			row.directWall = append(row.directWall, time.Since(t0))
			if b.cfg.pool > 0 {
				if err := st.waitFull(ctx); err != nil {
					return err
				}
			}
			t0 = time.Now()
			size, out, err := b.codeExec(ctx, st, summaryProgram(n))
			if err != nil {
				return err
			}
			row.execWall = append(row.execWall, time.Since(t0))
			row.execBytes = size
			if want := fmt.Sprintf("%d calls, %d bytes of results", n, n*docBytes); !strings.HasPrefix(out, want) {
				return fmt.Errorf("the summary program printed %q, want it to begin with %q", out, want)
			}
		}
	}
	progress("codemode: %d bridged calls timed inside one exec, %d direct", overheadRuns, overheadRuns)
	rows.direct = rows.direct[:0]
	for k := range overheadRuns {
		_, d, err := direct(k)
		if err != nil {
			return err
		}
		rows.direct = append(rows.direct, d)
	}
	_, out, calls, err := b.codeExecCalls(ctx, st, timingProgram(overheadRuns))
	if err != nil {
		return err
	}
	for _, c := range calls {
		rows.served = append(rows.served, time.Duration(c.DurationMS)*time.Millisecond)
	}
	for _, f := range strings.Fields(out) {
		us, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("the timing program printed %q", tail(out, 200))
		}
		rows.bridged = append(rows.bridged, time.Duration(us)*time.Microsecond)
	}
	if len(rows.bridged) != overheadRuns {
		return fmt.Errorf("the timing program timed %d calls, want %d", len(rows.bridged), overheadRuns)
	}
	return nil
}

// summaryProgram calls the tool n times and prints one line, as an agent's program
// would: what reaches the client does not grow with n.
func summaryProgram(n int) string {
	return fmt.Sprintf(`from mcptools import bench
total = 0
for k in range(%d):
    r = bench.doc(i=k)
    total += len(r)
print(f"%d calls, {total} bytes of results, the last begins {r[:14]!r}")
`, n, n)
}

// timingProgram prints each call's time in microseconds as the program sees it.
func timingProgram(n int) string {
	return fmt.Sprintf(`import time
from mcptools import bench
ts = []
for k in range(%d):
    t0 = time.perf_counter()
    bench.doc(i=k)
    ts.append(time.perf_counter() - t0)
print(" ".join(str(int(t * 1e6)) for t in ts))
`, n)
}

// codeExec runs code through exec and returns the size of the result's JSON as the
// client receives it, and the program's stdout.
func (b *bench) codeExec(ctx context.Context, st *stack, code string) (int, string, error) {
	size, out, _, err := b.codeExecCalls(ctx, st, code)
	return size, out, err
}

// codeExecCalls is codeExec with the exec's tool_calls.
func (b *bench) codeExecCalls(ctx context.Context, st *stack, code string) (int, string, []upstream.CallRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := st.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": code}})
	if err != nil {
		return 0, "", nil, err
	}
	raw, _ := json.Marshal(res)
	var out struct {
		Stdout    string                `json:"stdout"`
		Stderr    string                `json:"stderr"`
		ExitCode  int                   `json:"exit_code"`
		ToolCalls []upstream.CallRecord `json:"tool_calls"`
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(sc, &out); err != nil {
		return 0, "", nil, fmt.Errorf("decoding the exec result: %w", err)
	}
	if res.IsError || out.ExitCode != 0 {
		return 0, "", nil, errors.New("exec failed: " + tail(out.Stderr, 300))
	}
	return len(raw), out.Stdout, out.ToolCalls, nil
}

func (r *report) printCodeMode(p func(string, ...any)) {
	c := r.code
	if c == nil {
		return
	}
	if c.err != nil && len(c.rows) == 0 {
		p("### Code mode")
		p("")
		p("Not measured: %s", c.err)
		p("")
		return
	}
	table(p, "Code mode: N calls of an upstream tool returning 2 KB",
		fmt.Sprintf("(a) N direct `tools/call` round trips from a client to the upstream (streamable HTTP on 127.0.0.1), as an agent without code mode makes them; (b) one `exec` whose program makes the N calls through the bridge and prints a one-line summary. *bytes to client* is the JSON of every result the client receives (a stand-in for the model's context). Walls are medians of %d; (b) includes the sandbox (warm pool %d).", codeReps, r.cfg.pool),
		"N", "(a) bytes to client", "(b) bytes to client", "(b) / (a) bytes", "(a) wall", "(b) wall", "(b) / (a) wall")
	for _, row := range c.rows {
		if len(row.execWall) == 0 {
			continue
		}
		da, db := percentile(row.directWall, 0.5), percentile(row.execWall, 0.5)
		p("| %d | %d | %d | %s | %s | %s | %s |", row.n, row.directBytes, row.execBytes,
			ratio(float64(row.execBytes), float64(row.directBytes)), ms(da), ms(db), durRatio(db, da))
	}
	p("")
	if len(c.bridged) > 0 {
		da, db := percentile(c.direct, 0.5), percentile(c.bridged, 0.5)
		p("Per call (%d each): a direct round trip to the upstream p50 %s, p90 %s; a bridged call as the program sees it (sandbox → bootstrap → server → the same upstream and back) p50 %s, p90 %s: %s the direct one, so the bridge adds about %s per call at p50 (target ≤ 2 ms).",
			len(c.direct), ms(da), ms(percentile(c.direct, 0.9)), ms(db), ms(percentile(c.bridged, 0.9)), durRatio(db, da), ms(db-da))
		p("")
		p("Of a bridged call, the server's own part (the call reassembled, checked and made upstream, as tool_calls' duration_ms has it for the %d calls it lists, whole ms) p50 %s, p90 %s; the rest is the way there and back: mcptools → the bootstrap's relay → the engine's attach stream → the server, and the reply on the sandbox's stdin.",
			len(c.served), wholeMS(percentile(c.served, 0.5)), wholeMS(percentile(c.served, 0.9)))
		p("")
	}
	if c.err != nil {
		p("Code mode stopped early: %s", c.err)
		p("")
	}
}

// wholeMS formats a duration counted in whole milliseconds.
func wholeMS(d time.Duration) string {
	if d < time.Millisecond {
		return "< 1 ms"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
}
