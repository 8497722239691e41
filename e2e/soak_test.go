//go:build enginefault

// The soak of background runs stops and starts an engine, so it is built with the
// engine-restart test (go test -tags enginefault) and runs against an engine of its
// own (MCP_EXEC_TEST_FAULT_HOST, _DOWN, _UP: restart_test.go says how).

package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
)

// TestBackgroundSoak: background runs on the real binary over HTTP, started at an
// even pace for MCP_EXEC_SOAK (a duration; default 60 s, 40 runs; 10m: 200 runs, `make
// soak`), each by a client of its own, under the faults a deployment meets: clients
// killed (a client process SIGKILLed, connections cut mid-request) and a new client
// fetching the result by handle; runs cancelled, timed out, their sandbox killed from
// outside; results fetched again after the TTL; one SIGKILL of the server (then a new
// server on the same instance) and one restart of the engine. Every run must end in
// its one right answer, bounded in time:
//
//   - a result, holding the value derived from its own input (its stdout and its
//     returned file), or the timeout, the cancellation, the killed sandbox it met;
//   - a run in flight at the engine's restart: its right result (the call ran again
//     in a new sandbox), the engine error naming MCP_EXEC_ENGINE_WAIT_S, or its
//     sandbox killed (dockerd stops containers before its API goes away);
//   - a run the killed server had and had not handed out: "not found" on the new
//     server (a restart keeps nothing), and its sandbox removed by the new server's
//     reaper.
//
// At the end no sandbox of the instance is left on the engine, and after the TTL the
// server keeps no run: it takes exactly --max-background-runs new ones.
func TestBackgroundSoak(t *testing.T) {
	host := os.Getenv("MCP_EXEC_TEST_FAULT_HOST")
	down, up := os.Getenv("MCP_EXEC_TEST_FAULT_DOWN"), os.Getenv("MCP_EXEC_TEST_FAULT_UP")
	if host == "" || down == "" || up == "" {
		t.Fatal("MCP_EXEC_TEST_FAULT_HOST, MCP_EXEC_TEST_FAULT_DOWN and MCP_EXEC_TEST_FAULT_UP must name an engine of this test's own and how to stop and start it (scripts/test.sh sets them)")
	}
	length, runs := 60*time.Second, 40
	if v := os.Getenv("MCP_EXEC_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 30*time.Second {
			t.Fatalf("MCP_EXEC_SOAK=%q: want a duration of at least 30s (e.g. 10m)", v)
		}
		length, runs = d, max(40, int(d/(3*time.Second))) // 10m: 200
	}
	t.Setenv("DOCKER_HOST", host) // e2e.Containers and the server's stop check look at it
	t.Cleanup(func() { _ = exec.Command("bash", "-c", up).Run() })

	bin := e2e.Build(t)
	const (
		ttl        = 20 * time.Second
		maxRuns    = 24
		engineWait = 60 * time.Second
	)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DOCKER_HOST=" + host,
		"MCP_EXEC_POOL_SIZE=2", "MCP_EXEC_MAX_CONCURRENT=3", "MCP_EXEC_MAX_SESSIONS=0", "MCP_EXEC_MEMORY=64m",
		"MCP_EXEC_ENGINE_WAIT_S=60", "MCP_EXEC_RUN_TTL_S=" + strconv.Itoa(int(ttl/time.Second)),
		"MCP_EXEC_MAX_BACKGROUND_RUNS=" + strconv.Itoa(maxRuns), "MCP_EXEC_LOG_FORMAT=json",
		// Room for every run's result at the default caps (2 × 1 MiB + 16 MiB + 64 KiB),
		// so that --max-background-runs is the bound the last check meets; the byte
		// budget's own bound is mcpserver's TestRunResultsMaxBytes.
		"MCP_EXEC_RUN_RESULTS_MAX_BYTES=" + strconv.Itoa(maxRuns*(2<<20+16<<20+64<<10))}
	if v := os.Getenv("MCP_EXEC_IMAGE"); v != "" {
		env = append(env, "MCP_EXEC_IMAGE="+v)
	}
	instance := "soak-" + strconv.Itoa(os.Getpid())
	token := e2e.Random()
	sv := &soakServers{t: t, bin: bin, env: env, instance: instance, token: token}
	if err := sv.start(); err != nil {
		t.Fatal(err)
	}

	cli, err := engine.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	kinds := []string{"wait", "wait", "wait", "drop", "kill", "wait", "cancel", "timeout", "sandbox", "expire"}
	all := make([]*soakRun, runs)
	every := length / time.Duration(runs)
	for i := range all {
		all[i] = &soakRun{i: i, kind: kinds[i%len(kinds)], seed: rng.IntN(1 << 30), ticks: 1 + rng.IntN(8), killAfter: time.Duration(500+rng.IntN(3000)) * time.Millisecond}
	}
	rng.Shuffle(len(all), func(a, b int) { all[a].kind, all[b].kind = all[b].kind, all[a].kind })

	ctx := t.Context()
	t0 := time.Now()
	var wg sync.WaitGroup
	serverKill, engineRestart := t0.Add(length*4/10), t0.Add(length*7/10)
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		time.Sleep(time.Until(serverKill))
		sv.kill(cli)
		time.Sleep(time.Until(engineRestart))
		sv.restartEngine(down, up)
	}()
	for i, r := range all {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * every)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(ctx, sv, cli, ttl, engineWait)
		}()
	}
	<-faults
	wg.Wait()
	t.Logf("all %d runs ended %s after the first began", runs, time.Since(t0).Round(time.Second))

	// The tally, and what was wrong.
	count := map[string]int{}
	var kept, lost int
	for _, r := range all {
		if r.clientHung {
			r.outcome += " (the cut call waited for its deadline in the client)"
		}
		count[r.kind+": "+r.outcome]++
		if r.wrong != "" {
			t.Errorf("run %d (%s, started %s): %s", r.i, r.kind, r.startedAt.Sub(t0).Round(time.Millisecond), r.wrong)
		}
		if strings.HasPrefix(r.outcome, "lost") {
			lost++
		} else {
			kept++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%3d  %s", count[k], k)
	}
	t.Logf("%d runs answered right (or as their fault said), %d lost with the killed server; server SIGKILLed at %s, engine down %s at %s",
		kept, lost, serverKill.Sub(t0).Round(time.Second), sv.engineDown.Round(time.Millisecond), engineRestart.Sub(t0).Round(time.Second))
	if sv.reaped == "" {
		t.Error("the killed server's sandboxes: not checked")
	} else {
		t.Log(sv.reaped)
	}
	if sv.reapWrong != "" {
		t.Error(sv.reapWrong)
	}

	// Nothing on the engine once the runs have ended (a removal may trail its run).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		n, err := e2e.Containers(instance)
		if err == nil && n <= 2 { // the warm pool's two
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d containers of %s 30 s after the last run ended (%v), want the pool's 2 at most", n, instance, err)
			break
		}
	}

	// After the TTL the server keeps no run: it takes exactly maxRuns new ones (each
	// ended at once: run_cancel; a cancelled run is kept until the TTL like any).
	time.Sleep(ttl + 2*time.Second)
	cs, _, err := sv.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var ids []string
	for i, bad := 0, false; i <= maxRuns && !bad; i++ {
		o, text, isErr, err := bgTry(ctx, cs, "exec", map[string]any{"code": "import time\ntime.sleep(60)", "background": true, "timeout_s": 120})
		switch {
		case err != nil:
			t.Fatalf("exec background %d after the TTL: %v", i, err)
		case i < maxRuns && (isErr || o.RunID == ""):
			bad = true
			t.Errorf("exec background %d of %d after the TTL: %s; the server still keeps %d runs", i+1, maxRuns, text, maxRuns-i)
		case i == maxRuns && (!isErr || !strings.Contains(text, "max-background-runs")):
			bad = true
			t.Errorf("exec background %d, over --max-background-runs %d: %q, want the refusal naming the setting", i+1, maxRuns, text)
		}
		if o.RunID != "" {
			ids = append(ids, o.RunID)
		}
	}
	for _, id := range ids {
		if _, text, isErr, err := bgTry(ctx, cs, "run_cancel", map[string]any{"run_id": id}); err != nil || isErr {
			t.Errorf("run_cancel: %v %s", err, text)
		}
	}
	cs.Close()

	logs := sv.logs()
	for _, r := range all {
		if r.id != "" && strings.Contains(logs, r.id[4:20]) {
			t.Errorf("a server's log holds run %d's handle", r.i)
			break
		}
	}
	waited := strings.Count(logs, "engine back: running the call in a new sandbox")
	t.Logf("server logs: %d warnings, %d errors, %d calls waited for the engine",
		strings.Count(logs, `"level":"warn"`), strings.Count(logs, `"level":"error"`), waited)
	if waited == 0 {
		t.Error("no call waited for the engine: its restart met no run, and proved nothing")
	}
	sv.stop()
	// Each server's stop checks that no container of the instance is left.
}

// soakServers is the server of the soak: one, then after its SIGKILL a new one on the
// same instance.
type soakServers struct {
	t                    *testing.T
	bin, instance, token string
	env                  []string
	mu                   sync.Mutex
	all                  []*e2e.Server
	cur                  *e2e.Server
	gen                  int       // the server's generation: 1, then 2 after the kill
	killedAt             time.Time // set before the kill, under mu
	engineDown           time.Duration
	engineFrom, engineTo time.Time // the engine's outage, with a margin after it
	reaped, reapWrong    string
}

func (sv *soakServers) start() error {
	srv, err := e2e.StartServer(sv.t, sv.bin, sv.env, "http", sv.instance, sv.token)
	if err != nil {
		return err
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.all = append(sv.all, srv)
	sv.cur = srv
	sv.gen++
	return nil
}

func (sv *soakServers) current() (*e2e.Server, int) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.cur, sv.gen
}

// kill SIGKILLs the server, starts a new one on the same instance and checks that
// its start-up reaper removes every container the old one left.
func (sv *soakServers) kill(cli *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old, _ := sv.current()
	// A witness: a run surely running at the kill, whatever the soak's runs do then.
	witness, err := sv.witness(ctx)
	if err != nil {
		sv.reapWrong = "the witness run: " + err.Error()
		return
	}
	before, err := soakContainerIDs(cli, sv.instance)
	sv.mu.Lock()
	sv.killedAt = time.Now()
	sv.mu.Unlock()
	old.Cmd.Process.Signal(syscall.SIGKILL)
	<-old.Done()
	if err != nil {
		sv.reapWrong = "listing the killed server's containers: " + err.Error()
	}
	after, _ := soakContainerIDs(cli, sv.instance)
	left := 0
	for id := range before {
		if after[id] {
			left++
		}
	}
	t0 := time.Now()
	if err := sv.start(); err != nil {
		sv.reapWrong = "starting a new server after the kill: " + err.Error()
		return
	}
	for {
		now, err := soakContainerIDs(cli, sv.instance)
		n := 0
		for id := range before {
			if now[id] {
				n++
			}
		}
		if err == nil && n == 0 {
			if msg := sv.witnessGone(ctx, witness); msg != "" {
				sv.reapWrong = msg
				return
			}
			sv.reaped = fmt.Sprintf("the killed server left %d containers (%d before the kill); all removed %s after the new server's start began; its running witness: not found on the new server",
				left, len(before), time.Since(t0).Round(time.Millisecond))
			return
		}
		if time.Since(t0) > 90*time.Second {
			sv.reapWrong = fmt.Sprintf("%d of the killed server's containers still there 90 s after the new server's start began (%v)", n, err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// witness starts a run that sleeps, and returns its handle once it runs.
func (sv *soakServers) witness(ctx context.Context) (string, error) {
	cs, conns, err := sv.connect(ctx)
	if err != nil {
		return "", err
	}
	defer func() { cs.Close(); conns.cut() }()
	o, text, isErr, err := bgTry(ctx, cs, "exec", map[string]any{"code": "import time\nprint('w', flush=True)\ntime.sleep(120)", "timeout_s": 300, "background": true})
	if err != nil || isErr {
		return "", fmt.Errorf("exec: %v %s", err, text)
	}
	for {
		w, text, isErr, err := bgTry(ctx, cs, "run_wait", map[string]any{"run_id": o.RunID, "timeout_s": 1})
		switch {
		case err != nil || isErr || w.Status != "running":
			return "", fmt.Errorf("run_wait: %v %s", err, text)
		case w.StdoutTail == "w\n":
			return o.RunID, nil
		}
	}
}

// witnessGone checks that the new server answers "not found" for the witness: a
// restart keeps nothing.
func (sv *soakServers) witnessGone(ctx context.Context, id string) string {
	cs, conns, err := sv.connect(ctx)
	if err != nil {
		return "connecting to the new server: " + err.Error()
	}
	defer func() { cs.Close(); conns.cut() }()
	_, text, isErr, err := bgTry(ctx, cs, "run_wait", map[string]any{"run_id": id, "timeout_s": 0})
	if err != nil || !isErr || !strings.Contains(text, "not found") {
		return fmt.Sprintf("the new server's run_wait of a run the killed one had: %v %q, want not found", err, text)
	}
	return ""
}

func (sv *soakServers) restartEngine(down, up string) {
	sv.mu.Lock()
	sv.engineFrom = time.Now()
	sv.mu.Unlock()
	t0 := time.Now()
	if out, err := exec.Command("bash", "-c", down).CombinedOutput(); err != nil {
		sv.t.Errorf("stopping the engine: %v\n%s", err, out)
	}
	time.Sleep(3 * time.Second)
	if out, err := exec.Command("bash", "-c", up).CombinedOutput(); err != nil {
		sv.t.Errorf("starting the engine: %v\n%s", err, out)
	}
	sv.mu.Lock()
	sv.engineDown = time.Since(t0)
	sv.engineTo = time.Now().Add(5 * time.Second)
	sv.mu.Unlock()
}

// engineFault reports whether a run started at from may have met the engine's
// outage: the outage had begun, and the run started before it was over.
func (sv *soakServers) engineFault(from time.Time) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return !sv.engineFrom.IsZero() && (sv.engineTo.IsZero() || from.Before(sv.engineTo))
}

// stop stops the servers, the newest first: each stop checks that no container of
// the instance is left.
func (sv *soakServers) stop() {
	for i := len(sv.all) - 1; i >= 0; i-- {
		sv.all[i].Stop(sv.t)
	}
}

func (sv *soakServers) logs() string {
	var b strings.Builder
	for _, s := range sv.all {
		b.WriteString(s.Logs.String())
	}
	return b.String()
}

// connect is a new client (its own connections) of the current server.
func (sv *soakServers) connect(ctx context.Context) (*mcp.ClientSession, *soakConns, error) {
	srv, _ := sv.current()
	conns := &soakConns{}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.Endpoint, HTTPClient: &http.Client{Transport: conns.transport(sv.token)}}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil).Connect(cctx, tr, nil)
	if err != nil {
		conns.cut()
		return nil, nil, err
	}
	return cs, conns, nil
}

// soakConns keeps a client's connections, so that the test can cut them.
type soakConns struct {
	mu    sync.Mutex
	conns []net.Conn
	tr    *http.Transport
}

type tokenTransport struct {
	token string
	base  http.RoundTripper
}

func (h tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(e2e.AuthHeader, h.token)
	return h.base.RoundTrip(r)
}

func (c *soakConns) transport(token string) http.RoundTripper {
	var d net.Dialer
	c.tr = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
		}
		return conn, err
	}}
	return tokenTransport{token: token, base: c.tr}
}

// cut closes every connection the client made, as a dropped network does to it.
func (c *soakConns) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.tr.CloseIdleConnections()
}

// soakRun is one run of the soak and how it ended.
type soakRun struct {
	i, seed, ticks int
	kind           string
	killAfter      time.Duration // kill, drop: how long the client lives

	id        string
	cid       string // its container, as the program printed it
	gen       int    // the server that started it
	startedAt time.Time
	outcome   string // what it answered, as counted
	wrong     string // why that was wrong

	clientHung bool // drop: the call cut off waited for its deadline in the client
}

const (
	lostNotFound = "lost with the killed server (then not found)"
	lostNoAnswer = "lost with the killed server (no answer)"
)

// soakCode prints a value derived from its input, the seed on stdin, after ticks
// seconds, and returns it as a file. It first prints its container's id (from its
// mounts), for the sandbox kind.
const soakCode = `import hashlib, re, sys, time
n = int(sys.stdin.read())
m = re.search(r'/containers/([0-9a-f]{64})/', open('/proc/self/mountinfo').read())
print('cid', m.group(1) if m else 'none', flush=True)
for k in range(TICKS):
    print('tick', k, flush=True)
    time.sleep(1)
v = hashlib.sha256(str(n).encode()).hexdigest()[:16]
print('value', v)
open('outputs/v.txt', 'w').write(v)
`

func (r *soakRun) args() map[string]any {
	ticks, timeout := r.ticks, 60
	switch r.kind {
	case "timeout":
		ticks, timeout = 30, 2
	case "cancel", "sandbox":
		ticks, timeout = 60, 120
	}
	return map[string]any{"code": strings.Replace(soakCode, "TICKS", strconv.Itoa(ticks), 1), "stdin": strconv.Itoa(r.seed),
		"timeout_s": timeout, "background": true}
}

func (r *soakRun) value() string {
	h := sha256.Sum256([]byte(strconv.Itoa(r.seed)))
	return hex.EncodeToString(h[:])[:16]
}

// fail records what was wrong, once.
func (r *soakRun) fail(format string, args ...any) {
	if r.wrong == "" {
		r.wrong = fmt.Sprintf(format, args...)
	}
	r.outcome = "wrong"
}

var cidLine = regexp.MustCompile(`cid ([0-9a-f]{64}|none)\n`)

// run starts the run, drives it as its kind says, and checks how it ended.
func (r *soakRun) run(ctx context.Context, sv *soakServers, cli *client.Client, ttl, engineWait time.Duration) {
	// The whole run is bounded: a run that hangs fails here rather than at the
	// test's timeout.
	bound := 60*time.Second + engineWait + 3*time.Minute
	if r.kind == "expire" {
		bound += ttl
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	defer func() {
		if ctx.Err() != nil && r.wrong == "" && !strings.HasPrefix(r.outcome, "lost") {
			r.fail("no answer within %s (hung; it answered %q so far)", bound, r.outcome)
		}
	}()
	if !r.start(ctx, sv) {
		return
	}
	for ctx.Err() == nil {
		cs, conns, err := sv.connect(ctx)
		if err != nil {
			time.Sleep(time.Second) // the server may be starting again
			continue
		}
		done := r.fetchOn(ctx, sv, cli, cs, ttl)
		cs.Close()
		conns.cut()
		if done || r.wrong != "" {
			return
		}
	}
}

// start starts the run as its kind says, the client then killed or its connections cut
// for kill and drop; false when it is over (lost, or wrong).
func (r *soakRun) start(ctx context.Context, sv *soakServers) bool {
	var (
		cs    *mcp.ClientSession
		conns *soakConns
		err   error
	)
	// A client whose server is down (killed, not yet started again) tries again.
	for {
		var srv *e2e.Server
		srv, r.gen = sv.current()
		r.startedAt = time.Now()
		if r.kind == "kill" {
			p, err := bgStartInProcess(ctx, srv.Endpoint, sv.token, r.args())
			if err == nil {
				r.id = p.ID
				time.Sleep(r.killAfter)
				p.Kill()
				return true
			}
		} else if cs, conns, err = sv.connect(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			r.fail("starting: %v", err)
			return false
		}
		time.Sleep(time.Second)
	}
	defer func() { cs.Close(); conns.cut() }()
	o, text, isErr, err := bgTry(ctx, cs, "exec", r.args())
	switch {
	case err != nil:
		r.serverGone(sv, err)
		return false
	case isErr || o.RunID == "":
		r.fail("exec background: %s", text)
		return false
	}
	r.id = o.RunID
	switch r.kind {
	case "drop":
		// The client's connections are cut in the middle of a run_wait. The call is
		// given a deadline, as an agent's would be: go-sdk v1.8.0 does not fail a call
		// whose response stream broke before its first event (nothing to resume from;
		// streamableClientConn.handleSSE), it waits for the call's context.
		time.AfterFunc(r.killAfter, conns.cut)
		for {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, _, _, err := bgTry(cctx, cs, "run_wait", map[string]any{"run_id": r.id, "timeout_s": 2})
			cancel()
			if err != nil {
				r.clientHung = cctx.Err() != nil && ctx.Err() == nil
				return true
			}
		}
	case "cancel", "sandbox":
		// Its fault is made once it runs: run_wait until the tail has its first tick.
		for {
			o, text, isErr, err := bgTry(ctx, cs, "run_wait", map[string]any{"run_id": r.id, "timeout_s": 1})
			switch {
			case err != nil:
				r.serverGone(sv, err)
				return false
			case isErr || o.Status != "running":
				if sv.engineFault(r.startedAt) {
					r.outcome = "met the engine restart before its fault: " + r.classify(o, text, isErr)
					return false
				}
				r.fail("run_wait while it runs: %s", text)
				return false
			case strings.Contains(o.StdoutTail, "tick 0\n"):
				if m := cidLine.FindStringSubmatch(o.StdoutTail); m != nil {
					r.cid = m[1]
				}
				return true
			}
		}
	}
	return true
}

// serverGone classifies err, met talking to the server: only a run of the killed
// server may meet one.
func (r *soakRun) serverGone(sv *soakServers, err error) {
	sv.mu.Lock()
	killed := sv.killedAt
	sv.mu.Unlock()
	if !killed.IsZero() && r.gen == 1 {
		r.outcome = lostNoAnswer
		return
	}
	r.fail("%v", err)
}

// fetchOn drives the run on a new client until it has its answer (true), or the
// client lost its server (false: connect again).
func (r *soakRun) fetchOn(ctx context.Context, sv *soakServers, cli *client.Client, cs *mcp.ClientSession, ttl time.Duration) bool {
	_, gen := sv.current()
	// Each call has a deadline far past what the server may take (run_wait waits 5 s
	// at most): past it, the server hangs, unless it was killed meanwhile.
	hung := false
	bgTry := func(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) (bgOut, string, bool, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		o, text, isErr, err := bgTry(cctx, cs, tool, args)
		if _, g := sv.current(); err != nil && cctx.Err() != nil && ctx.Err() == nil && g == gen {
			hung = true
			r.fail("%s did not answer within a minute (the server hung)", tool)
		}
		return o, text, isErr, err
	}
	defer func() {
		if hung {
			r.outcome = "wrong"
		}
	}()
	switch {
	case r.kind == "cancel" && r.outcome == "":
		o, text, isErr, err := bgTry(ctx, cs, "run_cancel", map[string]any{"run_id": r.id})
		if err != nil {
			return false
		}
		if isErr {
			return r.answer(sv, gen, o, text, isErr)
		}
		r.outcome = "cancel asked"
		if !strings.Contains(text, "canceled: true") && !sv.engineFault(r.startedAt) {
			r.fail("run_cancel of a running run: %s", text)
			return true
		}
	case r.kind == "sandbox" && r.outcome == "":
		if r.cid == "none" || r.cid == "" {
			r.fail("the program found no container id in its mounts")
			return true
		}
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.ContainerKill(kctx, r.cid, client.ContainerKillOptions{Signal: "KILL"})
		cancel()
		r.outcome = "sandbox killed"
		if err != nil && !sv.engineFault(r.startedAt) {
			r.fail("killing the run's container: %v", err)
			return true
		}
	}
	for {
		o, text, isErr, err := bgTry(ctx, cs, "run_wait", map[string]any{"run_id": r.id, "timeout_s": 5})
		if err != nil {
			return false
		}
		if !isErr && o.Status == "running" {
			continue
		}
		r.answer(sv, gen, o, text, isErr)
		if r.kind != "expire" || r.wrong != "" || strings.HasPrefix(r.outcome, "lost") {
			return true
		}
		// Fetched again once the TTL has passed: "expired", naming the setting.
		time.Sleep(ttl + 2*time.Second)
		_, text, isErr, err = bgTry(ctx, cs, "run_wait", map[string]any{"run_id": r.id, "timeout_s": 0})
		if _, g := sv.current(); err != nil || g != gen {
			r.outcome = "result, then its server was killed"
			return true
		}
		if !isErr || !strings.Contains(text, "expired") || !strings.Contains(text, "run-ttl-s") {
			r.fail("run_wait after the TTL: isError %v %q, want expired naming run-ttl-s", isErr, text)
			return true
		}
		r.outcome = "result, then expired"
		return true
	}
}

// answer checks an ended run's answer from server gen.
func (r *soakRun) answer(sv *soakServers, gen int, o bgOut, text string, isErr bool) bool {
	if isErr && strings.Contains(text, "not found") {
		sv.mu.Lock()
		killed := sv.killedAt
		sv.mu.Unlock()
		if r.gen == 1 && gen == 2 && r.startedAt.Before(killed) {
			r.outcome = lostNotFound
			return true
		}
		r.fail("run_wait: %s", text)
		return true
	}
	got := r.classify(o, text, isErr)
	want := map[string]string{"wait": "value", "drop": "value", "kill": "value", "expire": "value",
		"timeout": "timed out", "cancel": "cancelled", "sandbox": "sandbox killed"}[r.kind]
	switch {
	case got == want:
	case (got == "engine error" || got == "sandbox killed") && sv.engineFault(r.startedAt):
		// The engine error past the wait's bound; or dockerd stopped the run's
		// container while shutting down, its API still answering: to the server, a
		// sandbox killed from outside, and the result says so.
	case got == "value" && (r.kind == "cancel" || r.kind == "sandbox") && sv.engineFault(r.startedAt):
		// its sandbox went with the engine, the call ran again, and the fault missed it
	default:
		r.fail("got %s, want %s: isError %v, %q, %+v", got, want, isErr, text, o)
		return true
	}
	r.outcome = got
	if sv.engineFault(r.startedAt) {
		r.outcome += " (met the engine restart)"
	}
	return true
}

// classify names an ended run's answer.
func (r *soakRun) classify(o bgOut, text string, isErr bool) string {
	switch {
	case isErr && strings.Contains(text, "cancelled"):
		return "cancelled"
	case isErr && strings.Contains(text, "MCP_EXEC_ENGINE_WAIT_S"):
		return "engine error"
	case isErr:
		return "tool error: " + text
	case o.Status != "completed" || o.RunID != r.id:
		return fmt.Sprintf("status %q, run_id right: %v", o.Status, o.RunID == r.id)
	case o.TimedOut && o.ExitCode == 137 && strings.HasPrefix(o.Stdout, "cid ") && strings.Contains(o.Stdout, "tick 0\n") && !strings.Contains(o.Stdout, "value"):
		return "timed out"
	case o.ExitCode == 137 && !o.TimedOut && strings.Contains(o.Stderr, "sandbox was stopped before the program reported its exit"):
		return "sandbox killed"
	case o.ExitCode == 0 && strings.HasSuffix(o.Stdout, "value "+r.value()+"\n") && len(o.Files) == 1 && o.Files[0].Name == "v.txt" && o.Files[0].Size == 16:
		return "value"
	}
	return "an unexpected result"
}

// soakContainerIDs lists the engine's containers of instance.
func soakContainerIDs(cli *client.Client, instance string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", launcher.LabelInstance+"="+instance)})
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, c := range list.Items {
		ids[c.ID] = true
	}
	return ids, nil
}
