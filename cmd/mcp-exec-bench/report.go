package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

type idleCost struct {
	preload  string
	mem, cpu []float64 // per idle container: MiB, CPU ms since start
}

type report struct {
	cfg                config
	started, finished  time.Time
	env                [][2]string
	loadStart, loadEnd string
	host               hostPython
	dockerArgs         []string
	latency            []*series
	idle               []idleCost
	specChecked        string
	tput, churn        []tput
	churnPy            []tput // diagnostic: the churn loop running an interpreter
	rt                 []*rtRow
	code               *codeRows
	csv                *csvRows
	sessionCreate      []*series // (g): cold, then from the session pool
	leftBeforeSweep    int
	notes              []string
}

func environment(ctx context.Context, cli *client.Client, cfg config) [][2]string {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	env := [][2]string{
		{"CPUs (Go runtime.NumCPU)", strconv.Itoa(runtime.NumCPU())},
		{"CPU model", cpuModel()},
		{"memory", memTotal()},
		{"kernel", readTrim("/proc/sys/kernel/osrelease")},
		{"Go", runtime.Version()},
	}
	if v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{}); err == nil {
		env = append(env, [2]string{"engine", strings.TrimSpace(fmt.Sprintf("%s %s (API %s)", v.Platform.Name, v.Version, v.APIVersion))})
	}
	if i, err := cli.Info(ctx, client.InfoOptions{}); err == nil {
		in := i.Info
		env = append(env,
			[2]string{"engine host", fmt.Sprintf("%s, %d CPUs, kernel %s", in.OperatingSystem, in.NCPU, in.KernelVersion)},
			[2]string{"runtime, cgroups", fmt.Sprintf("%s; cgroup %s (%s driver); storage %s", in.DefaultRuntime, in.CgroupVersion, in.CgroupDriver, in.Driver)},
			[2]string{"mcp-exec's sandboxes run under", cmp.Or(cfg.runtime, in.DefaultRuntime+" (the engine's default)")},
			[2]string{"containers running at start", fmt.Sprintf("%d (of %d), other sessions' tests included", in.ContainersRunning, in.Containers)},
		)
	}
	img := cfg.image
	if ii, err := cli.ImageInspect(ctx, cfg.image); err == nil {
		img = fmt.Sprintf("%s (%s, created %s)", cfg.image, shortImageID(ii.ID), ii.Created)
	}
	env = append(env, [2]string{"sandbox image", img})
	return env
}

func shortImageID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	return id[:min(len(id), 12)]
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "n/a"
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	v, ok := procField("/proc/cpuinfo", "model name")
	if !ok {
		return "n/a"
	}
	return v
}

func memTotal() string {
	v, ok := procField("/proc/meminfo", "MemTotal")
	if !ok {
		return "n/a"
	}
	kb, _ := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64)
	return fmt.Sprintf("%.1f GiB", kb/(1<<20))
}

// procField is the value of the first "key: value" line of a /proc file whose key,
// trimmed, is key.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// find returns the series with key and snippet, or nil.
func (r *report) find(key, sn string) *series {
	for _, s := range r.latency {
		if s.key == key && s.snippet == sn && s.err == nil && len(s.lat) > 0 {
			return s
		}
	}
	return nil
}

func (r *report) p50(key, sn string) time.Duration {
	if s := r.find(key, sn); s != nil {
		return percentile(s.lat, 0.5)
	}
	return 0
}

func (r *report) churnAt(c int) float64 {
	for _, t := range r.churn {
		if t.c == c {
			return t.rate
		}
	}
	return 0
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func (r *report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## mcp-exec-bench")
	p("")
	p("Run %s, %s. Flags: `%s` (n=%d measured + %d warm-up per latency series; throughput windows %s after %s of ramp; warm pool %d).",
		r.started.Format("2006-01-02 15:04 MST"), r.finished.Sub(r.started).Round(time.Second),
		strings.Join(append([]string{"mcp-exec-bench"}, r.cfg.args...), " "),
		r.cfg.n, r.cfg.warmup, r.cfg.duration, r.cfg.ramp, r.cfg.pool)
	p("")
	p("### Environment")
	p("")
	p("| | |")
	p("|---|---|")
	for _, kv := range r.env {
		p("| %s | %s |", kv[0], kv[1])
	}
	p("| load average (1/5/15 min) at start | %s |", r.loadStart)
	p("| load average at end | %s |", r.loadEnd)
	if r.host.path != "" {
		p("| host python (a) | `%s` %s |", r.host.path, r.host.version)
	}
	p("")

	if len(r.latency) > 0 {
		table(p, "Latency, concurrency 1", "Wall time per exec as the caller sees it: (a) and (b) until the process exits; (c) and (d) the MCP `tools/call` round trip. *in sandbox* is the tool's own `duration_ms` (code delivered → exit frame, whole ms). *idle at call* is the share of calls that found a ready sandbox.", "path", "snippet", "n", "p50", "p90", "p50 vs (a)", "p50 vs (b)", "in sandbox p50", "idle at call")
		for _, s := range r.latency {
			if s.err != nil {
				reason := s.err.Error()
				if s.err == errSkipped {
					reason = "skipped"
				}
				p("| %s | %s | – | %s | | | | | |", s.path, s.snippet, reason)
				continue
			}
			p50 := percentile(s.lat, 0.5)
			vsA, vsB := "", ""
			if s.key != "a" {
				vsA = durRatio(p50, r.p50("a", s.snippet))
			}
			if s.key != "b" {
				vsB = durRatio(p50, r.p50("b", s.snippet))
			}
			inside, idle := "", ""
			if len(s.inside) > 0 {
				inside = ms(percentile(s.inside, 0.5))
			}
			if strings.HasPrefix(s.key, "d-b2b") {
				idle = fmt.Sprintf("%d/%d", s.hits, s.calls)
			} else if strings.HasPrefix(s.key, "d-wait") || strings.HasPrefix(s.key, "diag") {
				idle = "all"
			}
			p("| %s | %s | %d | %s | %s | %s | %s | %s | %s |", s.path, s.snippet, len(s.lat), ms(p50), ms(percentile(s.lat, 0.9)), vsA, vsB, inside, idle)
		}
		p("")
		r.printEngineCalls(p)
	}

	if len(r.idle) > 0 {
		table(p, "What an idle warm sandbox costs", "Measured on the full pool with the engine's stats: memory in use (without inactive page cache) and CPU time the container used to get ready (interpreter start, bootstrap, preload), which every refill spends again.", "configuration", "idle sandboxes", "memory each (mean)", "CPU to get ready (mean)")
		for _, c := range r.idle {
			p("| %s | %d | %.1f MiB | %.0f ms |", c.preload, len(c.mem), mean(c.mem), mean(c.cpu))
		}
		p("")
	}

	if len(r.churn) > 0 {
		table(p, "Engine churn: create + start + wait + remove of a hardened container", "With `true`: the ceiling of any one-container-per-exec design on this machine. With `python3 -I -c pass` (diagnostic): the same with the least a Python sandbox must run. Phases are p50s.", "command", "concurrency", "containers/s", "errors", "create", "start", "wait (exit)", "remove", "cycle p50", "host CPU busy")
		for _, c := range slices.Concat(r.churn, r.churnPy) {
			cmd := strings.TrimSuffix(strings.TrimPrefix(c.mode, "engine churn ("), ")")
			p("| %s | %d | %.2f | %d | %s | %s | %s | %s | %s | %s |", cmd, c.c, c.rate, c.errs,
				ms(percentile(c.phases["create"], 0.5)), ms(percentile(c.phases["start"], 0.5)),
				ms(percentile(c.phases["wait"], 0.5)), ms(percentile(c.phases["remove"], 0.5)), ms(c.p50), c.busy)
		}
		p("")
	}
	if len(r.tput) > 0 {
		table(p, "Sustained throughput, `print(1)` through MCP (MaxConcurrent = concurrency)", "*creates/exec* counts the containers the launcher created in the window per exec completed: above 1.00 means containers started and thrown away.", "mode", "concurrency", "execs/s", "engine churn at same concurrency", "vs churn", "errors", "call p50", "creates/exec", "host CPU busy")
		for _, t := range r.tput {
			errs := strconv.Itoa(t.errs)
			if t.firstErr != nil {
				errs += " (" + tail(t.firstErr.Error(), 120) + ")"
			}
			p("| %s | %d | %.2f | %.2f | %s | %s | %s | %.2f | %s |", t.mode, t.c, t.rate, r.churnAt(t.c), ratio(t.rate, r.churnAt(t.c)), errs, ms(t.p50), t.createsPerExec, t.busy)
		}
		p("")
	}

	r.printCSV(p)
	r.printSessionCreate(p)
	r.printRuntimes(p)
	r.printCodeMode(p)
	r.printTargets(p)

	p("### Notes")
	p("")
	if r.specChecked != "" {
		p("- The launcher's containers, as the engine reports them, %s; (b) and the churn loop take their hardening from the same function.", r.specChecked)
	}
	if len(r.dockerArgs) > 0 {
		p("- (b) ran: `docker %s`", strings.Join(r.dockerArgs, " "))
	}
	for _, n := range r.notes {
		p("- %s", n)
	}
	switch r.leftBeforeSweep {
	case -1:
		p("- Could not list the bench's containers at the end; a final sweep removed any.")
	case 0:
		p("- Bench containers (label dev.mcp-exec.instance=bench) left at the end: 0.")
	default:
		p("- Bench containers left at the end: %d (removed by the final sweep).", r.leftBeforeSweep)
	}
}

// table starts a Markdown table: its section heading (none when title is empty),
// a paragraph (none when intro is empty), the header row and the separator.
func table(p func(string, ...any), title, intro string, cols ...string) {
	if title != "" {
		p("%s", "### "+title)
		p("")
	}
	if intro != "" {
		p("%s", intro)
		p("")
	}
	p("%s", "| "+strings.Join(cols, " | ")+" |")
	p("%s", "|"+strings.Repeat("---|", len(cols)))
}

func (r *report) printEngineCalls(p func(string, ...any)) {
	ops := []string{"create", "attach", "start", "kill", "remove"}
	have := false
	for _, s := range r.latency {
		if len(s.engine) > 0 {
			have = true
		}
	}
	if !have {
		return
	}
	table(p, "", "Engine API calls the launcher made during each MCP series (count, p50), warm-up included; in warm modes most run in the background refill:",
		append([]string{"path", "snippet"}, ops...)...)
	for _, s := range r.latency {
		if len(s.engine) == 0 {
			continue
		}
		cells := []string{s.path, s.snippet}
		for _, op := range ops {
			if d := s.engine[op]; len(d) > 0 {
				cells = append(cells, fmt.Sprintf("%d × %s", len(d), ms(percentile(d, 0.5))))
			} else {
				cells = append(cells, "–")
			}
		}
		p("| %s |", strings.Join(cells, " | "))
	}
	p("")
}

func (r *report) printTargets(p func(string, ...any)) {
	type row struct {
		name, got, limit string
		met              string
	}
	var rows []row
	lat := func(name, key, sn, base, baseSn string, k float64) {
		got, ref := r.p50(key, sn), r.p50(base, baseSn)
		if got == 0 || ref == 0 {
			rows = append(rows, row{name, ms(got), "n/a", "n/a"})
			return
		}
		limit := time.Duration(k * float64(ref))
		met := "no"
		if got <= limit {
			met = "**yes**"
		}
		rows = append(rows, row{name, fmt.Sprintf("%s (%s)", ms(got), durRatio(got, ref)),
			fmt.Sprintf("≤ %s (%.2fx of %s)", ms(limit), k, ms(ref)), met})
	}
	lat("warm `print(1)` p50 ≤ 0.5x (a)", "d-wait", "print(1)", "a", "print(1)", 0.5)
	lat("warm pandas p50 ≤ 0.05x (a), Preload numpy,pandas", "d-wait+preload", "pandas", "a", "pandas", 0.05)
	lat("cold `print(1)` p50 ≤ 0.8x (b)", "c", "print(1)", "b", "print(1)", 0.8)
	lat("cold pandas p50 ≤ 0.8x (b)", "c", "pandas", "b", "pandas", 0.8)
	lat("(also) warm `print(1)` back to back ≤ 0.5x (a)", "d-b2b", "print(1)", "a", "print(1)", 0.5)
	lat("(also) warm `print(1)` with Preload numpy,pandas ≤ 0.5x (a)", "d-wait+preload", "print(1)", "a", "print(1)", 0.5)
	lat("(also) session `print(1)` ≤ 1x warm (d, refilled)", "e-session", "print(1)", "d-wait", "print(1)", 1)
	lat("(also) session pandas ≤ 1x warm (d, refilled), Preload numpy,pandas", "e-session+preload", "pandas", "d-wait+preload", "pandas", 1)
	lat("(also) session `print(1)`, calls apart, ≤ 1x warm (d, refilled)", "e-settled", "print(1)", "d-wait", "print(1)", 1)
	lat("(also) session `print(1)`, calls apart, ≤ 1x warm (d, refilled), Preload numpy,pandas", "e-settled+preload", "print(1)", "d-wait+preload", "print(1)", 1)
	lat("(also) session pandas, calls apart, ≤ 1x warm (d, refilled), Preload numpy,pandas", "e-settled+preload", "pandas", "d-wait+preload", "pandas", 1)
	for _, t := range r.tput {
		ch := r.churnAt(t.c)
		met := "n/a"
		if ch > 0 {
			met = "no"
			if t.rate >= 0.9*ch {
				met = "**yes**"
			}
		}
		rows = append(rows, row{fmt.Sprintf("throughput ≥ 0.9x churn: %s, concurrency %d", t.mode, t.c),
			fmt.Sprintf("%.2f/s (%s)", t.rate, ratio(t.rate, ch)), fmt.Sprintf("≥ %.2f/s", 0.9*ch), met})
	}
	if len(rows) == 0 {
		return
	}
	table(p, "Targets", "", "target", "measured", "limit", "met")
	for _, x := range rows {
		p("| %s | %s | %s | %s |", x.name, x.got, x.limit, x.met)
	}
	met := 0
	for _, x := range rows {
		if x.met == "**yes**" {
			met++
		}
	}
	p("")
	p("%d of %d rows met.", met, len(rows))
	p("")
}
