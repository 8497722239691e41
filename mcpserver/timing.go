package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Per-call timing, at debug level only: one "exec timing" line per tools/call that
// ran, with where the call's time went from the moment the SDK handed the decoded
// request over to the moment the result went back to it. Metadata only (durations and
// the exec id), like every other line. The two instants are CLOCK_MONOTONIC
// nanoseconds, the clock a client on the same host reads too (Node's
// process.hrtime), so that it can tell its own part (encoding, the pipe, decoding)
// from the server's; cmd/mcp-exec-bench/client.sh does.

// callTiming collects one call's instants; the handler fills it in.
type callTiming struct {
	in, handlerStart, runStart, runEnd, handlerEnd int64 // monotonic ns
	id                                             string
	res                                            launcher.Result
	ran                                            bool
}

type timingKey struct{}

// monoNow reads CLOCK_MONOTONIC, in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// timingOf returns the call's timing record, nil when debug logging is off.
func timingOf(ctx context.Context) *callTiming {
	ct, _ := ctx.Value(timingKey{}).(*callTiming)
	return ct
}

// timingMiddleware times tools/call requests when the logger logs at debug level.
func (h *handler) timingMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" || h.log.Debug() == nil {
			return next(ctx, method, req)
		}
		ct := &callTiming{in: monoNow()}
		res, err := next(context.WithValue(ctx, timingKey{}, ct), method, req)
		out := monoNow()
		if !ct.ran {
			return res, err
		}
		us := func(d time.Duration) int64 { return d.Microseconds() }
		span := func(a, b int64) int64 { return (b - a) / 1e3 }
		t := ct.res.Timing
		h.log.Debug().Str("exec_id", ct.id).
			Int64("t_in_mono_ns", ct.in).Int64("t_out_mono_ns", out).
			Int64("sdk_in_us", span(ct.in, ct.handlerStart)).
			Int64("check_us", span(ct.handlerStart, ct.runStart)).
			Int64("run_us", span(ct.runStart, ct.runEnd)).
			Int64("queue_us", us(ct.res.QueueWait)).
			Bool("warm", t.Warm).Int64("take_us", us(t.Take)).
			Int64("create_us", us(t.Create)).Int64("start_us", us(t.Start)).
			Int64("deliver_us", us(t.Deliver)).Int64("sandbox_us", us(ct.res.Duration)).
			Int64("result_us", span(ct.runEnd, ct.handlerEnd)).
			Int64("sdk_out_us", span(ct.handlerEnd, out)).
			Msg("exec timing")
		return res, err
	}
}
