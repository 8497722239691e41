// Command mcp-exec-bench measures, in one run on this machine, what an exec costs
// through mcp-exec (cold, warm, in a session; the MCP layer over in-memory transports)
// against a bare host subprocess and a hardened `docker run`, the sustained throughput
// against the engine's own container churn, sessions (csv.go, sessions.go) and code
// mode (codemode.go), and prints a markdown report on stdout; progress goes to stderr.
// docs/benchmarks.md says what each row's clock covers, and holds the figures.
//
// Every container it makes is labelled dev.mcp-exec.role=sandbox and
// dev.mcp-exec.instance=bench, and all are removed before it exits.
//
//	go run ./cmd/mcp-exec-bench            # the full run, several minutes
//	go run ./cmd/mcp-exec-bench -quick     # a smoke run
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

type snippet struct{ name, code, want string }

var snippets = []snippet{
	{"print(1)", "print(1)", "1\n"},
	{"pandas", `import pandas as pd; df = pd.DataFrame({"a": range(1000)}); print(df["a"].sum())`, "499500\n"},
}

type config struct {
	n, warmup   int
	duration    time.Duration
	ramp        time.Duration
	pool        int
	conc        []int
	image       string
	hostPython  string
	engineHost  string
	runtime     string
	compare     string
	quick, diag bool
	only        map[string]bool
	args        []string
}

var sections = []string{"host", "docker", "cold", "warm", "csv", "sessions", "throughput", "runtimes", "codemode"}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("mcp-exec-bench", flag.ContinueOnError)
	fs.IntVar(&c.n, "n", 20, "measured iterations per latency series (concurrency 1)")
	fs.IntVar(&c.warmup, "warmup", 2, "discarded warm-up iterations before each latency series")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "measurement window of each throughput run")
	fs.DurationVar(&c.ramp, "ramp", 3*time.Second, "load before each throughput window starts (not counted)")
	fs.IntVar(&c.pool, "pool", 2, "warm pool size (MCP_EXEC_POOL_SIZE) for the warm runs")
	conc := fs.String("concurrency", "1,2,4", "concurrencies of the throughput and churn runs")
	fs.StringVar(&c.image, "image", launcher.DefaultImage, "sandbox image")
	fs.StringVar(&c.hostPython, "host-python", "", "host interpreter for baseline (a); empty: python3 on PATH")
	fs.StringVar(&c.engineHost, "engine-host", "", "engine address; empty: DOCKER_HOST, then the default socket")
	fs.StringVar(&c.compare, "compare-runtime", "", "also run the runtimes section: the engine's default runtime against this one (e.g. runsc), cold, warm, idle memory and warm throughput, interleaved in one loop")
	fs.StringVar(&c.runtime, "runtime", "", "OCI runtime of mcp-exec's sandboxes in (c), (d) and the throughput runs, e.g. runsc; empty: the engine's default. (b) and the churn ceiling stay on the engine's default")
	fs.BoolVar(&c.quick, "quick", false, "a smoke run: -n 5 -warmup 1 -duration 5s -ramp 1s")
	fs.BoolVar(&c.diag, "diag", false, "also run the diagnostic rows (warm hit with the refill held until the call returns, with os._exit, docker run with one BLAS thread, churn of python3 -c pass)")
	only := fs.String("only", "", "comma-separated sections to run (default all): "+strings.Join(sections, ","))
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		if !set["n"] {
			c.n = 5
		}
		if !set["warmup"] {
			c.warmup = 1
		}
		if !set["duration"] {
			c.duration = 5 * time.Second
		}
		if !set["ramp"] {
			c.ramp = time.Second
		}
	}
	for _, s := range strings.Split(*conc, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 1 {
			return c, fmt.Errorf("-concurrency: %q is not a positive integer", s)
		}
		c.conc = append(c.conc, v)
	}
	if c.n < 1 || c.warmup < 0 || c.pool < 1 || c.duration <= 0 || c.ramp < 0 {
		return c, errors.New("-n and -pool must be at least 1, -warmup and -ramp not negative, -duration positive")
	}
	c.only = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(sections, s) {
			return c, fmt.Errorf("-only: unknown section %q (have %s)", s, strings.Join(sections, ","))
		}
		c.only[s] = true
	}
	c.args = args
	return c, nil
}

func (c config) runs(section string) bool { return len(c.only) == 0 || c.only[section] }

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-exec-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, cfg)
	stop()
	os.Exit(code)
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

// bench holds what a run needs and what it measured.
type bench struct {
	cfg     config
	cli     *client.Client
	profile string
	rep     *report
}

func run(ctx context.Context, cfg config) int {
	cli, err := engine.NewClient(cfg.engineHost)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-exec-bench:", err)
		return 1
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcp-exec-bench: the engine at %s does not answer: %v\n", cli.DaemonHost(), err)
		return 1
	}
	profile, err := docker.SeccompProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-exec-bench:", err)
		return 1
	}
	b := &bench{cfg: cfg, cli: cli, profile: profile, rep: &report{started: time.Now(), cfg: cfg}}
	if n, err := sweep(cli); err != nil {
		progress("removing leftovers of an earlier run: %v", err)
	} else if n > 0 {
		progress("removed %d leftover bench containers", n)
	}
	b.rep.env = environment(ctx, cli, cfg)
	b.rep.loadStart = loadavg()

	err = b.all(ctx)

	// Everything the bench made should be gone already; check, then make sure.
	b.rep.leftBeforeSweep = leftovers(cli)
	if _, serr := sweep(cli); serr != nil {
		b.rep.notes = append(b.rep.notes, "final sweep failed: "+serr.Error())
	}
	b.rep.loadEnd = loadavg()
	b.rep.finished = time.Now()
	b.rep.print(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-exec-bench:", err)
		return 1
	}
	return 0
}

func (b *bench) all(ctx context.Context) error {
	steps := []struct {
		section string
		f       func(context.Context) error
	}{
		{"host", b.host},
		{"docker", b.docker},
		{"cold", b.cold},
		{"warm", b.warm},
		{"csv", b.csv},
		{"sessions", b.sessions},
		{"throughput", b.throughput},
		{"runtimes", b.runtimes}, // only with -compare-runtime
		{"codemode", b.codemode},
	}
	for _, s := range steps {
		if !b.cfg.runs(s.section) {
			continue
		}
		if err := s.f(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.section, err)
		}
	}
	return nil
}

// series is one latency measurement: one path, one snippet, concurrency 1.
type series struct {
	key, path, snippet string
	lat                []time.Duration
	inside             []time.Duration // the program's duration as the tool reports it
	hits, calls        int             // back to back: calls that found an idle sandbox
	engine             map[string][]time.Duration
	err                error
}

// measure runs warmup+n iterations of once, timing each, and keeps the last n.
// prep runs before each iteration, untimed, and says whether the pool had an idle
// sandbox; after runs after each, untimed.
func (b *bench) measure(ctx context.Context, s *series, prep func() (bool, error), once func() (time.Duration, error), after func()) {
	progress("latency: %s, %s", s.path, s.snippet)
	for i := range b.cfg.warmup + b.cfg.n {
		if ctx.Err() != nil {
			s.err = ctx.Err()
			return
		}
		hit := false
		if prep != nil {
			var err error
			if hit, err = prep(); err != nil {
				s.err = err
				return
			}
		}
		t0 := time.Now()
		inside, err := once()
		d := time.Since(t0)
		if after != nil {
			after()
		}
		if err != nil {
			s.err = err
			return
		}
		if i < b.cfg.warmup {
			continue
		}
		s.lat = append(s.lat, d)
		if inside > 0 {
			s.inside = append(s.inside, inside)
		}
		s.calls++
		if hit {
			s.hits++
		}
	}
}

func (b *bench) add(s *series) { b.rep.latency = append(b.rep.latency, s) }

func (b *bench) host(ctx context.Context) error {
	h := findHostPython(ctx, b.cfg.hostPython)
	b.rep.host = h
	b.rep.notes = append(b.rep.notes, h.notes...)
	for _, sn := range snippets {
		py := h.path
		if sn.name == "pandas" {
			py = h.pandas
		}
		s := &series{key: "a", path: "(a) host `python3 -c`", snippet: sn.name}
		if py == "" {
			s.err = errSkipped
		} else {
			b.measure(ctx, s, nil, func() (time.Duration, error) { return 0, runHost(ctx, py, sn) }, nil)
		}
		b.add(s)
		if h.wrapper != "" && sn.name == "print(1)" {
			w := &series{key: "a-wrapper", path: "(a') host `python3 -c` through the PATH wrapper", snippet: sn.name}
			b.measure(ctx, w, nil, func() (time.Duration, error) { return 0, runHost(ctx, h.wrapper, sn) }, nil)
			b.add(w)
		}
	}
	return ctx.Err()
}

func (b *bench) docker(ctx context.Context) error {
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.rep.notes = append(b.rep.notes, "no docker CLI on PATH: (b) is skipped")
		for _, sn := range snippets {
			b.add(&series{key: "b", path: "(b) `docker run --rm -i`", snippet: sn.name, err: errSkipped})
		}
		return nil
	}
	file, err := writeProfile(b.profile)
	if err != nil {
		return err
	}
	defer os.Remove(file)
	args, unexpressed := dockerRunArgs(b.cfg.image, file)
	if len(unexpressed) > 0 {
		b.rep.notes = append(b.rep.notes, "(b) `docker run` has no flag for "+strings.Join(unexpressed, ", ")+
			" of the launcher's spec: its containers get the engine's defaults there")
	}
	if h := b.cfg.engineHost; h != "" {
		args = append([]string{"--host", h}, args...)
	}
	b.rep.dockerArgs = args
	for _, sn := range snippets {
		s := &series{key: "b", path: "(b) `docker run --rm -i`", snippet: sn.name}
		b.measure(ctx, s, nil, func() (time.Duration, error) { return 0, runDocker(ctx, docker, args, sn) }, nil)
		b.add(s)
	}
	if b.cfg.diag && ctx.Err() == nil {
		// Diagnostic: numpy starts one BLAS thread per host CPU, more than the
		// sandbox's CPU quota; one thread shows what that costs a cold pandas run.
		i := slices.Index(args, "--entrypoint")
		blas := slices.Concat(args[:i], []string{"-e", "OPENBLAS_NUM_THREADS=1"}, args[i:])
		sn := snippets[1]
		s := &series{key: "b-blas", path: "(diag) `docker run --rm -i` with OPENBLAS_NUM_THREADS=1", snippet: sn.name}
		b.measure(ctx, s, nil, func() (time.Duration, error) { return 0, runDocker(ctx, docker, blas, sn) }, nil)
		b.add(s)
	}
	return ctx.Err()
}

func (b *bench) cold(ctx context.Context) error {
	st, err := newStack(ctx, b.cli, b.cfg.image, b.cfg.runtime, launcher.Options{})
	if err != nil {
		return err
	}
	for _, sn := range snippets {
		s := &series{key: "c", path: "(c) mcp-exec cold, via MCP", snippet: sn.name}
		b.viaStack(ctx, st, s, sn, nil, nil)
	}
	return errors.Join(st.close(), ctx.Err())
}

// viaStack measures s: snippet sn called through st's MCP session (prep and after as
// for measure), with the engine calls of its iterations, and adds it to the report.
// It returns the series' error.
func (b *bench) viaStack(ctx context.Context, st *stack, s *series, sn snippet, prep func() (bool, error), after func()) error {
	st.eng.snapshot()
	b.measure(ctx, s, prep, func() (time.Duration, error) { return st.call(ctx, sn) }, after)
	s.engine = st.eng.snapshot()
	b.add(s)
	return s.err
}

// sessionSettle is the pause before each call of the settled session row: longer than
// the fork of a holder with pandas imported on a loaded machine.
const sessionSettle = 500 * time.Millisecond

// preloads are the two warm configurations.
var preloads = []string{"", "numpy,pandas"}

func preloadName(p string) string {
	if p == "" {
		return `Preload ""`
	}
	return "Preload " + p
}

func (b *bench) warm(ctx context.Context) error {
	for _, pre := range preloads {
		var pl []string
		if pre != "" {
			pl = strings.Split(pre, ",")
		}
		st, err := newStack(ctx, b.cli, b.cfg.image, b.cfg.runtime, launcher.Options{PoolSize: b.cfg.pool, Preload: pl})
		if err != nil {
			return err
		}
		err = b.warmRuns(ctx, st, pre)
		if cerr := st.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (b *bench) warmRuns(ctx context.Context, st *stack, pre string) error {
	name := preloadName(pre)
	tag := ""
	if pre != "" {
		tag = "+preload"
	}
	waitFull := func() (bool, error) { return true, st.waitFull(ctx) }

	// What an idle sandbox costs, and whether the bench's copy of the hardening matches.
	if err := st.waitFull(ctx); err != nil {
		return err
	}
	time.Sleep(time.Second) // let the last one settle
	mem, cpu, err := idleUsage(ctx, b.cli)
	if err != nil {
		b.rep.notes = append(b.rep.notes, "reading idle sandbox stats: "+err.Error())
	}
	b.rep.idle = append(b.rep.idle, idleCost{preload: name, mem: mem, cpu: cpu})
	if b.rep.specChecked == "" {
		b.rep.specChecked = b.checkSpec(ctx, st)
	}

	for _, sn := range snippets {
		s := &series{key: "d-wait" + tag, path: "(d) mcp-exec warm, " + name + ", pool refilled before each call", snippet: sn.name}
		if err := b.viaStack(ctx, st, s, sn, waitFull, nil); err != nil {
			return err
		}
	}
	for _, sn := range snippets {
		if err := st.waitFull(ctx); err != nil {
			return err
		}
		s := &series{key: "d-b2b" + tag, path: "(d) mcp-exec warm, " + name + ", back to back", snippet: sn.name}
		idle := func() (bool, error) { return st.l.PoolStats().Idle > 0, nil }
		if err := b.viaStack(ctx, st, s, sn, idle, nil); err != nil {
			return err
		}
	}
	// (e) the same calls in one live session (session_create once, then exec with its
	// session_id), against the warm one-shot rows above.
	if err := st.openSession(ctx); err != nil {
		return err
	}
	for _, sn := range snippets {
		s := &series{key: "e-session" + tag, path: "(e) mcp-exec session, " + name + ", one session, back to back", snippet: sn.name}
		if err := b.viaStack(ctx, st, s, sn, nil, nil); err != nil {
			st.session = ""
			return err
		}
	}
	// The same with a pause before each call, as the one-shot row whose pool refills
	// before each call: the session's holder forks the next cell when a call ends, and
	// back to back that fork (and the end of the old holder) competes with the next
	// call; an agent's calls come seconds apart.
	settled := func() (bool, error) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(sessionSettle):
			return true, nil
		}
	}
	for _, sn := range snippets {
		s := &series{key: "e-settled" + tag, path: "(e) mcp-exec session, " + name + ", one session, " + sessionSettle.String() + " between calls", snippet: sn.name}
		if err := b.viaStack(ctx, st, s, sn, settled, nil); err != nil {
			st.session = ""
			return err
		}
	}
	st.session = ""
	if !b.cfg.diag {
		return nil
	}
	// Diagnostic: the same warm hit, but the refill that the hit triggers may not
	// create its container until the call has returned, so the call does not share
	// the CPU with a container start. The difference is what the refill costs a hit.
	for _, sn := range snippets {
		s := &series{key: "diag" + tag, path: "(diag) warm, " + name + ", refill held until the call returns", snippet: sn.name}
		var release func()
		prep := func() (bool, error) {
			ok, err := waitFull()
			if err == nil {
				release = st.eng.hold()
			}
			return ok, err
		}
		if err := b.viaStack(ctx, st, s, sn, prep, func() { release() }); err != nil {
			return err
		}
	}
	// Diagnostic: the same warm hit, but the program ends with os._exit(0) after
	// flushing, skipping even the end the bootstrap itself runs (thread join, atexit,
	// release of the program's globals, final garbage collection). The difference is
	// what that end costs each call: the exit frame follows the child's exit.
	for _, sn := range snippets {
		sn := snippet{sn.name, sn.code + "\nimport os, sys; sys.stdout.flush(); os._exit(0)", sn.want}
		s := &series{key: "diag-exit" + tag, path: "(diag) warm, " + name + ", program ends in os._exit(0)", snippet: sn.name}
		if err := b.viaStack(ctx, st, s, sn, waitFull, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkSpec compares an idle pool container's configuration, as the engine reports
// it, with the spec the launcher made it from.
func (b *bench) checkSpec(ctx context.Context, st *stack) string {
	f := benchFilter()
	f.Add("status", "running")
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil || len(list.Items) == 0 {
		return "not checked (no running pool container found)"
	}
	info, err := b.cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil || info.Container.HostConfig == nil || info.Container.Config == nil {
		return fmt.Sprintf("not checked (inspect: %v)", err)
	}
	cfg, host := docker.ContainerSpec(launcher.SpecOf(st.l.Options()), b.profile)
	if d := slices.Concat(specDiff(cfg, info.Container.Config), specDiff(host, info.Container.HostConfig)); len(d) > 0 {
		return "DIFFERS from docker.ContainerSpec in: " + strings.Join(d, ", ")
	}
	return "match docker.ContainerSpec in every field it sets (and have none of the weakening ones)"
}
