package mcpserver

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// bytesRunner has small output caps. A job whose code is "big" ends with a result that
// fills them (stdout and stderr to the output cap, files to the output files' cap, one
// an image), "slow" runs until its context ends, any other ends at once with a line.
type bytesRunner struct{ o launcher.Options }

func (b bytesRunner) Options() launcher.Options { return b.o }

func (b bytesRunner) Run(ctx context.Context, job launcher.Job) (launcher.Result, error) {
	switch job.Code {
	case "big":
		half := b.o.MaxOutputBytes / 2
		png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, b.o.MaxFileBytes-8)...)
		txt := strings.Repeat("t", b.o.MaxFilesBytes-len(png))
		return launcher.Result{Stdout: strings.Repeat("o", half), Stderr: strings.Repeat("e", b.o.MaxOutputBytes-half), Truncated: true,
			Files: []launcher.OutputFile{{Name: "a.png", Size: int64(len(png)), Data: png}, {Name: "b.txt", Size: int64(len(txt)), Data: []byte(txt)}}}, nil
	case "slow":
		<-ctx.Done()
		return launcher.Result{}, ctx.Err()
	}
	return launcher.Result{Stdout: "ok\n"}, nil
}

// TestRunResultsMaxBytes: under MaxBytes a running run holds the most its result can
// take (ResultCap of the runner's caps) and an ended one its result's size, which for a
// result that fills every cap is within ResultCap: so with room for two runs' caps, a run
// that filled them leaves room for one running run and no more (refused, naming the
// setting); once that one ends with a small result, another fits; an expired result
// frees its bytes.
func TestRunResultsMaxBytes(t *testing.T) {
	r := bytesRunner{launcher.Options{MaxOutputBytes: 4000, MaxFileBytes: 30000, MaxFilesBytes: 50000}}
	c := ResultCap(4000, 50000)
	clock := newClock()
	o := clock.opts(8)
	o.MaxBytes = 2 * c
	cs := clientOf(t, New(r, Options{Runs: o, Vars: testVars}))

	big := startRun(t, cs, map[string]any{"code": "big"})
	if w := runWait(t, cs, big, 5); w.IsError || w.StructuredContent.(map[string]any)["status"] != "completed" || len(w.Content) != 3 {
		t.Fatalf("the big run: %s", text(t, w))
	}
	slow := startRun(t, cs, map[string]any{"code": "slow"}) // fits only if the big result is within its cap
	refused := errText(t, callNamed(t, cs, toolName, map[string]any{"code": "x", "background": true}))
	for _, want := range []string{"--run-results-max-bytes", "MCP_EXEC_RUN_RESULTS_MAX_BYTES", approxSize(2 * c), approxSize(c)} {
		if !strings.Contains(refused, want) {
			t.Errorf("a run over the bytes: %q, want %q in it", refused, want)
		}
	}
	if res := callNamed(t, cs, toolName, map[string]any{"code": "x"}); res.IsError {
		t.Errorf("a foreground call over the bytes: %s", text(t, res))
	}
	if res := callNamed(t, cs, toolRunCancel, map[string]any{"run_id": slow}); res.IsError {
		t.Fatal(text(t, res))
	}
	small := startRun(t, cs, map[string]any{"code": "x"}) // the cancelled run holds its error's size
	runWait(t, cs, small, 5)
	slow = startRun(t, cs, map[string]any{"code": "slow"})
	errText(t, callNamed(t, cs, toolName, map[string]any{"code": "slow", "background": true}))

	clock.add(2 * time.Minute) // past the TTL: the ended runs' results expire
	last := startRun(t, cs, map[string]any{"code": "slow"})
	for _, id := range []string{slow, last} {
		callNamed(t, cs, toolRunCancel, map[string]any{"run_id": id})
	}
}
