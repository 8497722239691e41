package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

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
func requestLimit(cfg Config) int64 {
	const perFile = 4 + 6*mcpserver.MaxFileNameBytes + 64 // padding, escaped name, framing
	files := (cfg.MaxFilesBytes+2)/3*4 + int64(cfg.MaxFiles)*perFile
	return 6*(cfg.MaxCodeBytes+cfg.MaxStdinBytes) + files + 64<<10
}

// Body budget: bodies above smallBody share budgetFactor × the request limit, so that
// however many large requests arrive at once, the memory they hold stays bounded.
const (
	smallBody     = 1 << 20 // bodies up to this size pass without the budget
	budgetFactor  = 2       // the budget holds this many requests at the limit
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

// acquire takes n bytes from the budget, waiting until ctx ends; it returns the
// function that gives them back, or false when ctx ended first (nothing is kept).
func (b *bodyBudget) acquire(ctx context.Context, n int64) (func(), bool) {
	units := int((n + budgetUnit - 1) / budgetUnit)
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

// limitBody refuses a request body larger than max with 413: at once, before reading
// anything, when its Content-Length says so, and as soon as the body read passes max
// otherwise (chunked or HTTP/2), through http.MaxBytesReader (the SDK's handlers
// answer 413 to the *http.MaxBytesError it returns). A body above smallBody then
// waits for its size (max when unknown) in budget, and holds it until next returns,
// that is, in streamable HTTP until the call's answer is written; past budgetWaitMax
// it gets 503. It sits behind the authentication handler, so that a request without
// credentials is refused before it can read or wait for anything.
func limitBody(max int64, budget *bodyBudget, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, max),
				http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		size := r.ContentLength
		if size < 0 {
			size = max
		}
		if size > smallBody {
			ctx, cancel := context.WithTimeout(r.Context(), budgetWaitMax)
			release, ok := budget.acquire(ctx, size)
			cancel()
			if !ok {
				w.Header().Set("Retry-After", strconv.Itoa(5))
				w.Header().Set("Connection", "close")
				http.Error(w, "too many large requests at once; try again shortly", http.StatusServiceUnavailable)
				return
			}
			defer release()
		}
		next.ServeHTTP(w, r)
	})
}
