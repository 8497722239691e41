package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// funcRunner runs each job through a function of the test's.
type funcRunner func(ctx context.Context, job launcher.Job) (launcher.Result, error)

func (f funcRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	return f(ctx, job)
}

// Options: the launcher's defaults.
func (f funcRunner) Options() launcher.Options { return launcher.Options{} }

// progressClient connects a client that forwards every progress notification
// it receives to the returned channel.
func progressClient(t *testing.T, r Runner, opts Options) (*mcp.ClientSession, chan *mcp.ProgressNotificationParams) {
	t.Helper()
	got := make(chan *mcp.ProgressNotificationParams, 100)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(r, opts).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			got <- req.Params
		},
	})
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs, got
}

func TestProgressNotifications(t *testing.T) {
	// The reporter drops reports only when the client lags; this test is
	// about what arrives, so the runner never outpaces the client.
	//
	// The reports claim more time than the call can have taken, so that the
	// reporter's offset (time since the call arrived, less the runner's
	// elapsed) is 0 however slow this machine is; and the relay passes on only
	// the runner's reports, not the "waiting for a sandbox" notifications the
	// reporter sends of its own when the first report comes after waitGrace
	// (TestProgressWhileWaiting is about those). Before both, a loaded CI run
	// failed here: a waiting notification took the runner's place.
	reports := []launcher.Progress{
		{Elapsed: 100 * time.Second, OutputBytes: 0},
		{Elapsed: 101004 * time.Millisecond, OutputBytes: 6, Tail: "hello\n"},
		{Elapsed: 101004 * time.Millisecond, OutputBytes: 6, Tail: "hello\n"}, // not later: not sent
		{Elapsed: 102500 * time.Millisecond, OutputBytes: 1234, Tail: "a\nb\nstep 3 of 10\r" + strings.Repeat("é", 300) + "\n\n"},
	}
	// The runner reports, then waits until the client has the notification
	// (passed on through relay) before it reports again.
	var sawFunc bool
	relay := make(chan *mcp.ProgressNotificationParams, 100)
	var received []*mcp.ProgressNotificationParams
	var mu sync.Mutex
	r := funcRunner(func(ctx context.Context, job launcher.Job) (launcher.Result, error) {
		sawFunc = job.Progress != nil
		if job.Progress == nil {
			return launcher.Result{Stdout: "done\n"}, nil
		}
		for i, p := range reports {
			job.Progress(p)
			if i == 2 {
				continue
			}
			select {
			case n := <-relay:
				mu.Lock()
				received = append(received, n)
				mu.Unlock()
			case <-time.After(5 * time.Second):
				return launcher.Result{}, errors.New("no notification")
			}
		}
		return launcher.Result{Stdout: "done\n"}, nil
	})
	cs, got := progressClient(t, r, Options{})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case n := <-got:
				if !strings.HasPrefix(n.Message, "waiting for a sandbox") {
					relay <- n
				}
			case <-stop:
				return
			}
		}
	}()

	t.Run("with token", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(`{"code":"x"}`)}
		params.SetProgressToken("tok-1")
		res, err := cs.CallTool(t.Context(), params)
		if err != nil || res.IsError {
			t.Fatalf("CallTool: got (%v, %v), want a result", res, err)
		}
		if !sawFunc {
			t.Fatalf("job.Progress: got nil, want a func when the request has a progress token")
		}
		want := []*mcp.ProgressNotificationParams{
			{ProgressToken: "tok-1", Progress: 100, Message: "running 100 s, 0 bytes of output"},
			{ProgressToken: "tok-1", Progress: 101.004, Message: "running 101 s, 6 bytes of output; last: hello"},
			{ProgressToken: "tok-1", Progress: 102.5, Message: "running 102 s, 1234 bytes of output; last: " + strings.Repeat("é", 199) + "…"},
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff(want, received); diff != "" {
			t.Errorf("progress notifications (-want +got):\n%s", diff)
		}
		received = nil
	})

	t.Run("integer token", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(`{"code":"x"}`)}
		params.SetProgressToken(42)
		if res, err := cs.CallTool(t.Context(), params); err != nil || res.IsError {
			t.Fatalf("CallTool: got (%v, %v), want a result", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(received) != 3 {
			t.Fatalf("notifications: got %d, want 3", len(received))
		}
		for _, n := range received {
			if n.ProgressToken != 42.0 { // JSON numbers decode as float64
				t.Errorf("progress token: got %#v, want 42", n.ProgressToken)
			}
		}
		received = nil
	})

	t.Run("without token", func(t *testing.T) {
		res := call(t, t.Context(), cs, `{"code":"x"}`)
		if res.IsError {
			t.Fatalf("isError: got true, want false")
		}
		if sawFunc {
			t.Errorf("job.Progress: got a func, want nil without a progress token")
		}
		select {
		case n := <-relay:
			t.Errorf("got a progress notification %+v without a token, want none", n)
		case <-time.After(100 * time.Millisecond):
		}
	})
}

// TestProgressNeverBlocksRunner: a runner reporting faster than the client
// reads must not be held up by it.
func TestProgressNeverBlocksRunner(t *testing.T) {
	block := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(block) }) }
	defer unblock()
	st, ct := mcp.NewInMemoryTransports()
	r := funcRunner(func(ctx context.Context, job launcher.Job) (launcher.Result, error) {
		start := time.Now()
		for i := 1; i <= 1000; i++ {
			job.Progress(launcher.Progress{Elapsed: time.Duration(i) * time.Second})
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("1000 progress reports took %s, want them not to wait for the client", d)
		}
		unblock()
		return launcher.Result{}, nil
	})
	ss, err := New(r, Options{}).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var mu sync.Mutex
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			<-block // a slow client
			mu.Lock()
			n++
			mu.Unlock()
		},
	})
	cs, err := c.Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	params := &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(`{"code":"x"}`)}
	params.SetProgressToken("t")
	if res, err := cs.CallTool(t.Context(), params); err != nil || res.IsError {
		t.Fatalf("CallTool: got (%v, %v), want a result", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n >= 1000 {
		t.Errorf("notifications: got %d, want most of the 1000 reports dropped", n)
	}
}

func TestProgressMessage(t *testing.T) {
	tests := []struct {
		p    launcher.Progress
		want string
	}{
		{launcher.Progress{Elapsed: 999 * time.Millisecond}, "running 0 s, 0 bytes of output"},
		{launcher.Progress{Elapsed: 5 * time.Second, OutputBytes: 1234, Tail: "x\n  \n"}, "running 5 s, 1234 bytes of output; last: x"},
		{launcher.Progress{Elapsed: 5 * time.Second, Tail: "\n\n"}, "running 5 s, 0 bytes of output"},
		{launcher.Progress{Elapsed: 61 * time.Second, Tail: "a\tb\x1b[0mc\x00d"}, "running 61 s, 0 bytes of output; last: a b [0mc d"},
		{launcher.Progress{Elapsed: time.Second, Tail: "10%\r20%\r30%"}, "running 1 s, 0 bytes of output; last: 30%"},
		{launcher.Progress{Elapsed: time.Second, Tail: strings.Repeat("x", 200)}, "running 1 s, 0 bytes of output; last: " + strings.Repeat("x", 200)},
		{launcher.Progress{Elapsed: time.Second, Tail: strings.Repeat("x", 201)}, "running 1 s, 0 bytes of output; last: " + strings.Repeat("x", 199) + "…"},
	}
	for _, tt := range tests {
		got := progressMessage(tt.p)
		if got != tt.want {
			t.Errorf("progressMessage(%+v): got %q, want %q", tt.p, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("progressMessage(%+v): got invalid UTF-8 %q", tt.p, got)
		}
	}
}

// blockingRunner blocks every job until its context ends, and reports when
// it started and when it saw the end.
type blockingRunner struct {
	started chan struct{}
	ended   chan time.Time
}

func newBlockingRunner() *blockingRunner {
	return &blockingRunner{started: make(chan struct{}, 1), ended: make(chan time.Time, 1)}
}

func (b *blockingRunner) Options() launcher.Options { return launcher.Options{} }

func (b *blockingRunner) Run(ctx context.Context, _ launcher.Job) (launcher.Result, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- time.Now()
	return launcher.Result{}, ctx.Err()
}

// TestCancelStopsRunner checks that a client cancelling its call (the Go SDK
// sends notifications/cancelled when the call's context ends) cancels the
// runner's context, over the stdio code path (newline-delimited JSON over a
// byte stream) and over streamable HTTP.
func TestCancelStopsRunner(t *testing.T) {
	transports := []struct {
		name    string
		connect func(t *testing.T, r Runner) *mcp.ClientSession
	}{
		{"in-memory", func(t *testing.T, r Runner) *mcp.ClientSession {
			return connect(t, t.Context(), r, Options{})
		}},
		{"stdio (pipes)", func(t *testing.T, r Runner) *mcp.ClientSession {
			// What StdioTransport does with os.Stdin and os.Stdout.
			cr, sw := io.Pipe()
			sr, cw := io.Pipe()
			ss, err := New(r, Options{}).Connect(t.Context(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
				Connect(t.Context(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close(); ss.Close() })
			return cs
		}},
		{"streamable HTTP", func(t *testing.T, r Runner) *mcp.ClientSession {
			srv := New(r, Options{})
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			t.Cleanup(hs.Close)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
				Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			r := newBlockingRunner()
			cs := tr.connect(t, r)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(`{"code":"import time; time.sleep(60)"}`)})
				errc <- err
			}()
			select {
			case <-r.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the runner was not called")
			}
			cancelled := time.Now()
			cancel()
			select {
			case err := <-errc:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("CallTool after cancel: got %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("CallTool did not return after its context was cancelled")
			}
			select {
			case ended := <-r.ended:
				if d := ended.Sub(cancelled); d > 2*time.Second {
					t.Errorf("runner saw the cancellation %s after the client, want promptly", d)
				} else {
					t.Logf("runner saw the cancellation %s after the client", d.Round(time.Microsecond))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the runner's context was not cancelled within 5 s of the client cancelling")
			}
			// The session is still usable afterwards.
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil || len(res.Tools) != 1 {
				t.Errorf("ListTools after a cancelled call: got (%v, %v), want the tool", res, err)
			}
		})
	}
}

// TestProgressWhileWaiting: a call that waits for a sandbox (the runner has
// not reported yet: queued, or starting) still gets a notification every
// second after the grace, so a client that resets its timeout on progress
// keeps waiting; once the runner reports, progress goes on from there,
// counted from the call's arrival and still increasing.
func TestProgressWhileWaiting(t *testing.T) {
	const queued = 3200 * time.Millisecond
	r := funcRunner(func(ctx context.Context, job launcher.Job) (launcher.Result, error) {
		select { // waiting in the queue
		case <-time.After(queued):
		case <-ctx.Done():
			return launcher.Result{}, ctx.Err()
		}
		job.Progress(launcher.Progress{Elapsed: time.Second, OutputBytes: 2, Tail: "1\n"})
		time.Sleep(200 * time.Millisecond) // let it reach the client before the result
		return launcher.Result{Stdout: "1\n"}, nil
	})
	cs, got := progressClient(t, r, Options{})
	params := &mcp.CallToolParams{Name: "exec", Arguments: json.RawMessage(`{"code":"x"}`)}
	params.SetProgressToken("q")
	if res, err := cs.CallTool(t.Context(), params); err != nil || res.IsError {
		t.Fatalf("CallTool: got (%v, %v), want a result", res, err)
	}
	var ns []*mcp.ProgressNotificationParams
	for len(got) > 0 {
		ns = append(ns, <-got)
	}
	var waiting []float64
	for i, n := range ns {
		if i > 0 && n.Progress <= ns[i-1].Progress {
			t.Errorf("notification %d: progress %v after %v, want it increasing", i, n.Progress, ns[i-1].Progress)
		}
		if strings.HasPrefix(n.Message, "waiting for a sandbox (") {
			waiting = append(waiting, n.Progress)
		}
	}
	// Ticks at 1, 2 and 3 s; the first is inside the grace.
	if len(waiting) != 2 || waiting[0] < waitGrace.Seconds() {
		t.Errorf("waiting notifications at %v s, want 2, from %s on; all: %+v", waiting, waitGrace, ns)
	}
	last := ns[len(ns)-1]
	// The runner reported at 3.2 s after the call arrived (its run had begun
	// 1 s before): that is the progress.
	if last.Message != "running 1 s, 2 bytes of output; last: 1" || last.Progress < queued.Seconds() {
		t.Errorf("last notification %+v, want the runner's report at %s or more since the call arrived", last, queued)
	}
}

// TestProgressReportKeepsTheNewest: a report that finds the previous one still waiting
// for the loop replaces it (the old code dropped the newer one, and a client waited in
// vain for its notification: TestProgressNotifications failed so on a loaded CI run).
func TestProgressReportKeepsTheNewest(t *testing.T) {
	p := &progressReporter{ch: make(chan launcher.Progress, 1)}
	p.report(launcher.Progress{Elapsed: time.Second})
	p.report(launcher.Progress{Elapsed: 2 * time.Second})
	if got := <-p.ch; got.Elapsed != 2*time.Second {
		t.Fatalf("waiting report: elapsed %s, want the newer 2s", got.Elapsed)
	}
	select {
	case extra := <-p.ch:
		t.Fatalf("a second report waiting: %+v", extra)
	default:
	}
}
