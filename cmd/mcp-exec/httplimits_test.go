package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/e2e"
)

func testLimits(max int64, requests int, bodyTimeout time.Duration) httpLimits {
	return httpLimits{max: max, budget: newBodyBudget(budgetFactor * max),
		slots: make(chan struct{}, requests), bodyTimeout: bodyTimeout}
}

// TestRequestCap: past the cap on requests in flight, a request (with a body or
// without, such as a stream's GET) gets 503 with Retry-After at once; a freed slot
// takes the next.
func TestRequestCap(t *testing.T) {
	release := make(chan struct{})
	var in atomic.Int64
	h := limitBody(testLimits(1<<20, 2, time.Minute), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.Add(1)
		io.Copy(io.Discard, r.Body)
		<-release
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(method, srv.URL, strings.NewReader("{}"))
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for in.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader("{}"))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "MCP_EXEC_HTTP_MAX_REQUESTS") {
			t.Errorf("%s beyond the cap: HTTP %d, Retry-After %q, %q; want 503 with Retry-After naming the setting",
				method, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	close(release)
	wg.Wait()
	resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("after the slots were freed: HTTP %d, want 200", resp.StatusCode)
	}
}

// TestBodyTimeout: a body that trickles is answered 408 once the body timeout has
// passed, and the connection closed; a body that arrived in time leaves the handler
// as long as it needs (a long exec, its progress stream) with its request alive.
func TestBodyTimeout(t *testing.T) {
	const timeout = time.Second
	var ctxErr atomic.Value
	h := limitBody(testLimits(1<<20, 8, timeout), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "failed to read body", http.StatusBadRequest) // as the SDK does
			return
		}
		w.WriteHeader(200)
		http.NewResponseController(w).Flush()
		for range 3 { // three timeouts long, writing as a progress stream does
			time.Sleep(timeout)
			fmt.Fprintln(w, "progress")
			http.NewResponseController(w).Flush()
		}
		ctxErr.Store(fmt.Sprint(r.Context().Err()))
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte a second, never the end
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				if _, err := fmt.Fprintf(c, "1\r\n \r\n"); err != nil {
					return
				}
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickling body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "MCP_EXEC_HTTP_BODY_TIMEOUT_S") {
		t.Errorf("trickling body: HTTP %d %q, want 408 naming the setting", resp.StatusCode, b)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the 408 the connection is still open (read: %v), want it closed", err)
	}

	resp, err = srv.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Count(string(b), "progress") != 3 || ctxErr.Load() != "<nil>" {
		t.Errorf("a reply three body timeouts long: HTTP %d %q, request context %v; want 200, 3 progress lines, the context alive",
			resp.StatusCode, b, ctxErr.Load())
	}
}

// TestSlowBodiesLive sends 300 authenticated tools/calls of 1 MiB at once to the real
// binary, each trickled in 16 pieces 100 ms apart, and reads the server's peak
// resident memory (VmHWM): with the cap on requests in flight set to 100, the 100
// admitted are answered (code over its cap: a tool error, no sandbox) and the
// others, about 200, get 503 with Retry-After; the bodies the budget lets in at once keep the
// peak under the stated bound (checkPeak). First, a body that trickles a byte at a time
// gets 408 once the body timeout has passed.
func TestSlowBodiesLive(t *testing.T) {
	const (
		calls    = 300
		maxReqs  = 100
		timeoutS = 30 // generous: 300 trickled calls on a loaded 2-core machine
	)
	bin := e2e.Build(t)
	token := e2e.Random()
	env := e2e.Env("MCP_EXEC_MAX_CODE_BYTES=512k", fmt.Sprintf("MCP_EXEC_HTTP_MAX_REQUESTS=%d", maxReqs),
		fmt.Sprintf("MCP_EXEC_HTTP_BODY_TIMEOUT_S=%d", timeoutS))
	s := e2e.Serve(t, bin, env, "http", "test-slow-bodies", token)
	cfg := config.Defaults()
	cfg.MaxCodeBytes = 512 << 10
	soft := memoryLimit(requestLimit(cfg))
	pid := s.Cmd.Process.Pid
	t.Logf("soft memory limit %d KiB; peak RSS after start %d KiB", soft>>10, vmKiB(t, pid, "VmHWM"))

	// A trickle: a byte every 500 ms, never the end.
	c, err := net.Dial("tcp", strings.TrimPrefix(s.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\n%s: %s\r\nTransfer-Encoding: chunked\r\n\r\n", e2e.AuthHeader, token)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				if _, err := fmt.Fprintf(c, "1\r\n \r\n"); err != nil {
					return
				}
			}
		}
	}()
	t0 := time.Now()
	c.SetReadDeadline(time.Now().Add(3 * timeoutS * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	close(stop)
	c.Close()
	if err != nil {
		t.Errorf("a trickling body got no answer: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a trickling body: HTTP %d %q, want 408", resp.StatusCode, b)
		}
		t.Logf("a trickling body: HTTP %d after %s (body timeout %d s)", resp.StatusCode, time.Since(t0).Round(100*time.Millisecond), timeoutS)
	}

	sid := openSession(t, s, token)
	call := underLimitCall(1<<20, "")
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: calls}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	// Every call writes its first piece, or has its answer, before any goes on.
	var started sync.WaitGroup
	started.Add(calls)
	trickle := make(chan struct{})
	codes := make(chan string, calls)
	t1 := time.Now()
	for n := range calls {
		call := strings.Replace(call, `"id":7,`, fmt.Sprintf(`"id":%d,`, 1000+n), 1) // ids in flight must differ
		go func() {
			var once sync.Once
			begin := func() { once.Do(started.Done) }
			defer begin()
			pr, pw := io.Pipe()
			go func() {
				const pieces = 16
				piece := (len(call) + pieces - 1) / pieces
				for i := 0; i < len(call); i += piece {
					if _, err := pw.Write([]byte(call[i:min(i+piece, len(call))])); err != nil {
						return
					}
					if i == 0 {
						begin()
						<-trickle
					}
					time.Sleep(100 * time.Millisecond)
				}
				pw.Close()
			}()
			req, _ := http.NewRequest(http.MethodPost, s.Endpoint, pr)
			req.ContentLength = int64(len(call))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			req.Header.Set(e2e.AuthHeader, token)
			resp, err := client.Do(req)
			begin()
			if err != nil {
				pr.CloseWithError(err)
				if strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe") {
					codes <- "closed" // refused and closed while the client was still sending
				} else {
					codes <- "error: " + err.Error()
				}
				return
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			pr.CloseWithError(io.ErrClosedPipe)
			switch {
			case resp.StatusCode == 200 && strings.Contains(string(b), "code is"):
				codes <- "200"
			case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
				codes <- "503"
			case resp.StatusCode == 408:
				codes <- "408"
			default:
				codes <- fmt.Sprintf("HTTP %d %.200q", resp.StatusCode, b)
			}
		}()
	}
	started.Wait()
	close(trickle)
	got := map[string]int{}
	for range calls {
		got[<-codes]++
	}
	hwm := vmKiB(t, pid, "VmHWM")
	t.Logf("%d trickled 1 MiB calls: %v in %s; peak RSS %d KiB (soft limit %d KiB)",
		calls, got, time.Since(t1).Round(100*time.Millisecond), hwm, soft>>10)
	// The 100 admitted cannot finish before every call has started, so about 200 are
	// refused. An admitted call whose client is starved (a loaded machine) may get 408.
	if got["200"] == 0 || got["503"] == 0 || got["200"]+got["503"]+got["408"]+got["closed"] != calls {
		t.Errorf("answers %v, want 200 (a tool error) for the admitted, 503 with Retry-After (or closed while sending) for the others, 408 at worst, nothing else", got)
	}
	checkPeak(t, hwm, requestLimit(cfg))
}
