package mcpserver

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// maxProgressLine is how much of the program's last output line a progress
// message quotes, in characters.
const maxProgressLine = 200

// While the runner has not reported yet (the call waits for a free sandbox, or
// the sandbox is starting), the reporter sends a notification of its own every
// waitInterval once waitGrace has passed, so that a client that resets its
// timeout on progress keeps waiting through the queue too. The grace is longer
// than the runner's first report takes when a sandbox is free (about 1.0 s
// after the code is delivered), so a call that runs at once never reads
// "waiting".
const (
	waitInterval = time.Second
	waitGrace    = 1500 * time.Millisecond
)

// progressReporter sends notifications/progress for one call whose request
// carried a progress token. The runner's reports are handed to a goroutine of
// its own through a one-slot mailbox, so that a slow client never holds up the
// runner (and with it the timeout); a report that finds the mailbox full is
// dropped, the next one comes a second later.
//
// Progress is the time in seconds since the call arrived, strictly
// increasing; total is left unset. The message quotes the program's output, so
// it is never logged.
type progressReporter struct {
	ctx   context.Context // the call's: notifications go on the call's stream
	ss    *mcp.ServerSession
	token any
	start time.Time // when the call arrived
	ch    chan launcher.Progress
	quit  chan struct{} // closed by stop
	done  chan struct{} // closed when loop has returned
}

// startProgress returns a reporter for req, or nil when the client asked for
// no progress.
func startProgress(ctx context.Context, req *mcp.CallToolRequest) *progressReporter {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	p := &progressReporter{ctx: ctx, ss: req.Session, token: token, start: time.Now(),
		ch: make(chan launcher.Progress, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

// report is launcher.Job.Progress. It never blocks, and is harmless after stop. A
// report that finds the last one still waiting replaces it: the newer one says more
// (keeping the older one lost the newer, and with it the notification a client waits
// for, when two reports came before the loop ran).
func (p *progressReporter) report(pr launcher.Progress) {
	for {
		select {
		case p.ch <- pr:
			return
		default:
		}
		select {
		case <-p.ch:
		default:
		}
	}
}

// stop ends the reporter and waits until it has sent its last notification,
// so that none follows the call's result.
func (p *progressReporter) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
}

func (p *progressReporter) loop() {
	defer close(p.done)
	wait := time.NewTicker(waitInterval)
	defer wait.Stop()
	waitC := wait.C
	last := 0.0
	started := false
	// offset turns the runner's elapsed time (from the code's delivery) into
	// time since the call arrived: the queue wait and the sandbox's start.
	var offset time.Duration
	for {
		var elapsed time.Duration
		var msg string
		select {
		case pr := <-p.ch:
			if !started {
				started, waitC = true, nil
				offset = max(0, time.Since(p.start)-pr.Elapsed)
			}
			elapsed, msg = offset+pr.Elapsed, progressMessage(pr)
		case <-waitC:
			if elapsed = time.Since(p.start); elapsed < waitGrace {
				continue
			}
			msg = fmt.Sprintf("waiting for a sandbox (%d s)", int64(elapsed/time.Second))
		case <-p.quit:
			return
		}
		// Milliseconds are plenty, and keep the numbers readable on the wire.
		progress := math.Round(elapsed.Seconds()*1000) / 1000
		if progress <= last || p.ctx.Err() != nil {
			continue
		}
		last = progress
		// Errors (the client went away, the call ended) are not worth a log
		// line: the result, or the cancellation, says all there is.
		_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
			ProgressToken: p.token,
			Progress:      progress,
			Message:       msg,
		})
	}
}

// progressMessage reads like "running 5 s, 1234 bytes of output; last: <line>".
func progressMessage(pr launcher.Progress) string {
	msg := fmt.Sprintf("running %d s, %d bytes of output", int64(pr.Elapsed/time.Second), pr.OutputBytes)
	if line := lastLine(pr.Tail); line != "" {
		msg += "; last: " + line
	}
	return msg
}

// lastLine is the last non-blank line of tail as a terminal would show it
// (after the last carriage return), control characters replaced by spaces, cut
// to maxProgressLine characters.
func lastLine(tail string) string {
	tail = strings.TrimRightFunc(tail, unicode.IsSpace)
	if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	if i := strings.LastIndexByte(tail, '\r'); i >= 0 {
		tail = tail[i+1:]
	}
	tail = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(tail, "\uFFFD"))
	tail = strings.TrimSpace(tail)
	if utf8.RuneCountInString(tail) <= maxProgressLine {
		return tail
	}
	n := 0
	for i := range tail {
		if n == maxProgressLine-1 {
			return tail[:i] + "…"
		}
		n++
	}
	return tail
}
