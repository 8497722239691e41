package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/mcpserver"
)

// requestLimit is the size of the largest body a legal call needs. Code and stdin
// count six times their caps: JSON may write any byte as a \u00XX escape, and
// encoders do so for control characters (Go's also for <, > and &). Input files
// count their total cap in base64 (4/3, plus padding), the encoding for content that
// would escape worse than that, and each file its name escaped and its JSON framing.
// 64 KiB more hold the JSON-RPC envelope and the other arguments. With the defaults
// (1 MiB code, 1 MiB stdin, 32 files, 16 MiB of files) it is 35,216,856 bytes
// (33.6 MiB).
func requestLimit(cfg config.Config) int64 {
	const perFile = 4 + 6*mcpserver.MaxFileNameBytes + 64 // padding, escaped name, framing
	files := (cfg.MaxFilesBytes+2)/3*4 + int64(cfg.MaxFiles)*perFile
	return 6*(cfg.MaxCodeBytes+cfg.MaxStdinBytes) + files + 64<<10
}

// Body budget: every request body takes its size (the limit when unknown, at least
// one budgetUnit) from a budget of budgetFactor × the request limit, so that however
// many requests arrive at once, the memory their bodies hold stays bounded.
const (
	budgetFactor  = 2 // the budget holds this many requests at the limit
	budgetWaitMax = 30 * time.Second
)

// memoryLimit is the Go runtime's soft memory limit for an HTTP server: 64 MiB plus
// three times the body budget. The SDK holds a body in up to three forms while it
// decodes it (the bytes read, the raw parameters, the arguments); without the limit
// the collector lets garbage grow the heap to twice what is live, so two bodies at
// the limit took 393 MiB of RSS, and with it 219 MiB (measured, TestLargeBodiesLive).
// The operator's GOMEMLIMIT, when set, wins.
func memoryLimit(limit int64) int64 {
	return 64<<20 + 3*budgetFactor*limit
}

// bodyBudget is a counting semaphore of request body bytes.
type bodyBudget struct {
	tokens chan struct{} // one per budgetUnit
}

const budgetUnit = 64 << 10

func newBodyBudget(bytes int64) *bodyBudget {
	return &bodyBudget{tokens: make(chan struct{}, (bytes+budgetUnit-1)/budgetUnit)}
}

// acquire takes n bytes (at least one unit) from the budget, waiting until ctx
// ends; it returns the function that gives them back, or false when ctx ended
// first (nothing is kept).
func (b *bodyBudget) acquire(ctx context.Context, n int64) (func(), bool) {
	units := int(max(1, (n+budgetUnit-1)/budgetUnit))
	units = min(units, cap(b.tokens))
	for i := range units {
		select {
		case b.tokens <- struct{}{}:
		case <-ctx.Done():
			b.give(i)
			return nil, false
		}
	}
	return func() { b.give(units) }, true
}

func (b *bodyBudget) give(units int) {
	for range units {
		<-b.tokens
	}
}

// httpLimits bound what the requests of the HTTP door hold at once.
type httpLimits struct {
	max         int64         // largest body (requestLimit)
	budget      *bodyBudget   // body bytes held at once
	slots       chan struct{} // one per request in flight; its capacity is the cap
	bodyTimeout time.Duration // to read a whole body, from the first byte asked for
}

func newHTTPLimits(cfg config.Config) httpLimits {
	limit := requestLimit(cfg)
	return httpLimits{
		max:         limit,
		budget:      newBodyBudget(budgetFactor * limit),
		slots:       make(chan struct{}, cfg.HTTPMaxRequests),
		bodyTimeout: cfg.HTTPBodyTimeout,
	}
}

// limitBody bounds a request's body and the requests in flight:
//
//   - A request beyond the cap on requests in flight (streams, such as an SSE
//     session's GET, count while they are open) gets 503 with Retry-After at once.
//   - A body larger than lim.max gets 413: at once, before reading anything, when
//     its Content-Length says so, and as soon as the body read passes max otherwise
//     (chunked or HTTP/2), through http.MaxBytesReader (the SDK's handlers answer
//     413 to the *http.MaxBytesError it returns).
//   - A body then waits for its size (max when unknown) in the budget, and holds it
//     until next returns, that is, in streamable HTTP until the call's answer is
//     written; past budgetWaitMax it gets 503 with Retry-After.
//   - The whole body must then arrive within lim.bodyTimeout (a read deadline on the
//     connection, cleared once the body has been read, so that a long exec and its
//     progress stream are never cut); a body that trickles gets 408 and the
//     connection is closed.
//
// It sits behind the authentication handler, so that a request without credentials
// is refused before it can read, wait for or hold anything.
func limitBody(lim httpLimits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > lim.max {
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, lim.max),
				http.StatusRequestEntityTooLarge)
			return
		}
		select {
		case lim.slots <- struct{}{}:
			defer func() { <-lim.slots }()
		default:
			busy(w, fmt.Sprintf("too many requests in flight (at most %d, %s); try again shortly",
				cap(lim.slots), config.Name("http-max-requests")))
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		size := r.ContentLength
		if size < 0 {
			size = lim.max
		}
		ctx, cancel := context.WithTimeout(r.Context(), budgetWaitMax)
		release, ok := lim.budget.acquire(ctx, size)
		cancel()
		if !ok {
			busy(w, "too many large requests at once; try again shortly")
			return
		}
		defer release()
		body := &timedBody{ReadCloser: http.MaxBytesReader(w, r.Body, lim.max), rc: http.NewResponseController(w)}
		tw := &timedWriter{ResponseWriter: w, body: body, timeout: lim.bodyTimeout}
		_ = body.rc.SetReadDeadline(time.Now().Add(lim.bodyTimeout)) // unsupported only off a real connection (tests)
		r.Body = body
		next.ServeHTTP(tw, r)
		if body.expired.Load() {
			tw.refuse() // in case next wrote nothing
		}
	})
}

func busy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(5))
	w.Header().Set("Connection", "close")
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// timedBody is a request body read under a deadline: when the body ends (or fails)
// the deadline is cleared, since it would otherwise fire during the handler's
// reply and, through net/http's background read, cancel the request.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	expired atomic.Bool // the deadline passed before the body ended
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			b.expired.Store(true)
		}
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// timedWriter answers 408 in place of whatever the handler writes once its body
// timed out (the SDK's handlers would answer 400 "failed to read body"). The SDK
// flushes through http.ResponseController, which finds the connection by Unwrap.
type timedWriter struct {
	http.ResponseWriter
	body    *timedBody
	timeout time.Duration
	once    sync.Once
}

func (w *timedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *timedWriter) WriteHeader(code int) {
	if w.body.expired.Load() {
		w.refuse()
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *timedWriter) Write(b []byte) (int, error) {
	if w.body.expired.Load() {
		w.refuse()
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *timedWriter) refuse() {
	w.once.Do(func() {
		w.ResponseWriter.Header().Set("Connection", "close")
		http.Error(w.ResponseWriter, fmt.Sprintf("request body not received within %s s (%s)",
			config.FormatSeconds(w.timeout), config.Name("http-body-timeout-s")), http.StatusRequestTimeout)
	})
}
