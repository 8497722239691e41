package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// The csv section (f): a ~50 MB CSV loaded once in a session and queried 10 times,
// against 10 one-shot execs that each load it again. The CSV is made inside the
// sandbox, deterministically (a 10,000-row block from a seeded generator, repeated to
// ~50 MB in /tmp): passing it as an input file would need the per-file cap
// (--max-file-bytes, 8 MiB by default) raised past 50 MB and sends ~67 MB of base64
// per call. Both paths make it the same way, so each one-shot call pays the writing
// as well as the parse; the report shows the two apart (the program's own timings).

const csvQueries = 10

// csvMemory is the sandboxes' memory in this section, one-shot and session alike: the
// 50 MB file in /tmp (memory) and pandas parsing it do not fit the 256 MiB default.
const csvMemory = 512 * launcher.MiB

// csvLoad writes /tmp/data.csv and loads it into df; it prints its timings on stderr.
const csvLoad = `import os, sys, time as _t
_t0 = _t.perf_counter()
import numpy as np, pandas as pd
_rng = np.random.default_rng(22)
_n = 10_000
_blk = pd.DataFrame({"id": np.arange(_n), "region": _rng.integers(0, 16, _n),
    "a": _rng.random(_n) * 1000, "b": _rng.random(_n) * 1000, "c": _rng.standard_normal(_n) * 100,
}).to_csv(index=False, header=False, float_format="%.6f")
with open("/tmp/data.csv", "w") as _f:
    _f.write("id,region,a,b,c\n")
    for _ in range(-(-50_000_000 // len(_blk))):
        _f.write(_blk)
_t1 = _t.perf_counter()
df = pd.read_csv("/tmp/data.csv")
_t2 = _t.perf_counter()
print(f"bench-csv write_ms={(_t1 - _t0) * 1000:.0f} load_ms={(_t2 - _t1) * 1000:.0f} bytes={os.path.getsize('/tmp/data.csv')} rows={len(df)}", file=sys.stderr)
`

// csvQuery are the queries, one line of output each.
var csvQuery = [csvQueries]string{
	`print(len(df))`,
	`print(f"{df['a'].sum():.3f}")`,
	`print(df.groupby('region')['b'].mean().idxmax())`,
	`print(f"{df['c'].std():.4f}")`,
	`print(int((df['a'] > 500).sum()))`,
	`print(f"{df.loc[df['region'] == 3, 'c'].median():.4f}")`,
	`print(f"{df['a'].quantile(0.9):.4f}")`,
	`print(f"{(df['a'] * df['b']).max():.3f}")`,
	`print(int(df.groupby('region').size().max()))`,
	`print(f"{df[['a', 'b', 'c']].corr().loc['a', 'b']:.5f}")`,
}

// csvRows is what the section measured.
type csvRows struct {
	create, load time.Duration   // session_create; the session's load call
	queries      []time.Duration // the session's query calls
	oneShot      []time.Duration // the one-shot calls, each write + load + query
	loadStats    string          // the session's load call, as the program timed it
	oneShotStats []string        // the one-shot calls, likewise
	hits         int             // one-shot calls that found an idle pooled sandbox
	loadS, loadO string          // load average before the session's and the one-shots' calls
	bytes, rows  string
	sessionInMS  []int64 // duration_ms of the session's query calls
	oneShotInMS  []int64
	err          error
}

var csvStatsRE = regexp.MustCompile(`bench-csv write_ms=(\d+) load_ms=(\d+) bytes=(\d+) rows=(\d+)`)

// csvCall runs code through tools/call exec (in session sid, if set) and returns its
// stdout, stderr and duration_ms, failing unless it exited 0.
func csvCall(ctx context.Context, st *stack, sid, code string) (stdout, stderr string, inMS int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	args := map[string]any{"code": code, "timeout_s": 300}
	if sid != "" {
		args["session_id"] = sid
	}
	res, err := st.cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: args})
	if err != nil {
		return "", "", 0, err
	}
	if res.IsError {
		return "", "", 0, errors.New("tool error")
	}
	var out struct {
		Stdout     string `json:"stdout"`
		Stderr     string `json:"stderr"`
		ExitCode   int    `json:"exit_code"`
		DurationMS int64  `json:"duration_ms"`
		TimedOut   bool   `json:"timed_out"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		return "", "", 0, fmt.Errorf("decoding structured result: %w", err)
	}
	if out.ExitCode != 0 || out.TimedOut {
		return "", "", 0, fmt.Errorf("exit %d, timed out %t, stderr %q", out.ExitCode, out.TimedOut, tail(out.Stderr, 300))
	}
	return out.Stdout, out.Stderr, out.DurationMS, nil
}

func (b *bench) csv(ctx context.Context) error {
	st, err := newStack(ctx, b.cli, b.cfg.image, b.cfg.runtime,
		launcher.Options{PoolSize: b.cfg.pool, Preload: []string{"numpy", "pandas"}, Memory: csvMemory})
	if err != nil {
		return err
	}
	r := &csvRows{}
	b.rep.csv = r
	r.err = b.csvRuns(ctx, st, r)
	return errors.Join(r.err, st.close(), ctx.Err())
}

func (b *bench) csvRuns(ctx context.Context, st *stack, r *csvRows) error {
	if err := st.waitFull(ctx); err != nil {
		return err
	}
	// The session: create, load once, then the queries.
	progress("csv: a session loads the CSV once and runs %d queries", csvQueries)
	r.loadS = loadavg()
	t0 := time.Now()
	if err := st.openSession(ctx); err != nil {
		return err
	}
	sid := st.session
	st.session = ""
	defer st.closeSession(ctx, sid)
	r.create = time.Since(t0)
	t0 = time.Now()
	_, stderr, _, err := csvCall(ctx, st, sid, csvLoad)
	if err != nil {
		return fmt.Errorf("the session's load: %w", err)
	}
	r.load = time.Since(t0)
	r.loadStats = csvStats(stderr, r)
	answers := make([]string, csvQueries)
	for i, q := range csvQuery {
		t0 := time.Now()
		out, _, in, err := csvCall(ctx, st, sid, q)
		if err != nil {
			return fmt.Errorf("the session's query %d: %w", i, err)
		}
		r.queries = append(r.queries, time.Since(t0))
		r.sessionInMS = append(r.sessionInMS, in)
		answers[i] = out
	}
	st.closeSession(ctx, sid)

	// The one-shot calls, back to back: each writes and loads the CSV, then queries.
	progress("csv: %d one-shot execs, each loading the CSV", csvQueries)
	if err := st.waitFull(ctx); err != nil {
		return err
	}
	r.loadO = loadavg()
	for i, q := range csvQuery {
		if st.l.PoolStats().Idle > 0 {
			r.hits++
		}
		t0 := time.Now()
		out, stderr, in, err := csvCall(ctx, st, "", csvLoad+q+"\n")
		if err != nil {
			return fmt.Errorf("one-shot %d: %w", i, err)
		}
		r.oneShot = append(r.oneShot, time.Since(t0))
		r.oneShotInMS = append(r.oneShotInMS, in)
		r.oneShotStats = append(r.oneShotStats, csvStats(stderr, nil))
		if out != answers[i] {
			return fmt.Errorf("query %d: the one-shot exec printed %q, the session %q", i, out, answers[i])
		}
	}
	return nil
}

// csvStats is the program's timing line, as "write N ms, load M ms"; with r, it also
// records the file's size and rows.
func csvStats(stderr string, r *csvRows) string {
	m := csvStatsRE.FindStringSubmatch(stderr)
	if m == nil {
		return "?"
	}
	if r != nil {
		n, _ := strconv.ParseInt(m[3], 10, 64)
		r.bytes = fmt.Sprintf("%.1f MB, %s bytes", float64(n)/1e6, m[3])
		r.rows = m[4]
	}
	return fmt.Sprintf("write %s ms, load %s ms", m[1], m[2])
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func (r *report) printCSV(p func(string, ...any)) {
	c := r.csv
	if c == nil {
		return
	}
	if c.err != nil && len(c.oneShot) < csvQueries {
		p("### (f) A ~50 MB CSV: one session against one-shot execs")
		p("")
		p("Failed: %s", tail(c.err.Error(), 300))
		p("")
		return
	}
	sess := c.create + c.load + sum(c.queries)
	one := sum(c.oneShot)
	table(p, "(f) A ~50 MB CSV: loaded once in a session and queried 10 times, against 10 one-shot execs that each load it",
		fmt.Sprintf("The CSV (%s, %s rows, 5 columns) is written inside the sandbox by the same deterministic code on both paths (a seeded 10,000-row block repeated), then `pd.read_csv`; every query's answer is the same on both paths (checked). Warm pool of %d, Preload numpy,pandas, memory %s for one-shot and session sandboxes alike. Wall times as the MCP client sees them; *in the program* is what the code timed itself.",
			c.bytes, c.rows, r.cfg.pool, size(csvMemory)),
		"path", "calls", "total", "per call p50", "in the program", "load average before")
	p("| (f) one session: session_create | 1 | %s | | | %s |", ms(c.create), c.loadS)
	p("| (f) one session: the load call | 1 | %s | | %s | |", ms(c.load), c.loadStats)
	p("| (f) one session: %d queries | %d | %s | %s | duration_ms p50 %d | |", len(c.queries), len(c.queries), ms(sum(c.queries)), ms(percentile(c.queries, 0.5)), int64p50(c.sessionInMS))
	p("| **(f) one session, all of it** | %d | **%s** | | | |", len(c.queries)+2, ms(sess))
	p("| **(f) %d one-shot execs, each loading the CSV** (back to back; %d/%d found an idle sandbox) | %d | **%s** | %s | e.g. %s | %s |", len(c.oneShot), c.hits, len(c.oneShot), len(c.oneShot), ms(one), ms(percentile(c.oneShot, 0.5)), strings.Join(c.oneShotStats[:min(2, len(c.oneShotStats))], "; "), c.loadO)
	p("")
	p("Ratio, session total / one-shot total: **%s** (%s / %s).", durRatio(sess, one), ms(sess), ms(one))
	p("")
}

func int64p50(v []int64) int64 {
	ds := make([]time.Duration, len(v))
	for i, x := range v {
		ds[i] = time.Duration(x)
	}
	return int64(percentile(ds, 0.5))
}

// size formats a byte count in MiB.
func size(n int64) string { return fmt.Sprintf("%d MiB", n/launcher.MiB) }
