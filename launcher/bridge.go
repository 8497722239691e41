package launcher

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// Tools gives a program tools to call (code mode): the mcptools module in the sandbox
// sends each call to the server in a C frame, and Serve's answer goes back over the
// sandbox's stdin in a Y frame. Nothing travels over a network.
//
// The bridge protocol (docs/code-mode.md): the header is
// "MCPEXEC3 <code> <files> <tools> <stdin>\n" (with " javascript" before the newline
// for a JavaScript program), then the code, the files, the tools blob (u32 length of
// the mcptools module's source, the source, the catalog JSON) and
// exactly <stdin> bytes of the program's stdin, which the bootstrap hands the program
// as its own stdin; the stream that follows carries only replies, on a descriptor the
// program's stdin never shares. A call is u32 length, u32 id, JSON, written by the
// child to a pipe that the bootstrap relays, in chunks, as C frames; a reply is a Y
// frame of u32 id then JSON.
type Tools struct {
	// Catalog is the JSON the mcptools module builds its functions from. It travels
	// with the code, never in the environment.
	Catalog []byte
	// MaxRequest caps one call's JSON in bytes; larger calls are not buffered, and
	// Serve gets a nil request with their size. 0 is 1 MiB.
	MaxRequest int
	// Serve answers one call. ctx ends when the exec ends (result, timeout,
	// cancellation) and has the exec's deadline. It must return quickly once ctx ends.
	Serve func(ctx context.Context, req []byte, size int) []byte
}

// mcptoolsSource is the sandbox's mcptools module, sent with each exec that has Tools;
// mcptoolsJS is JavaScript's, to which toolsBlob adds the servers' named exports.
var (
	//go:embed mcptools.py
	mcptoolsSource string
	//go:embed mcptools.mjs
	mcptoolsJS string
)

// Bounds on what one program can make the server hold: calls served at once (more
// wait, and with them the program's output stream), and messages in all.
const (
	maxCallsInFlight = 16
	maxCallMessages  = 4096
)

// toolsBlob is the tools part of the MCPEXEC3 stream: the module of the job's language
// and the catalog.
func toolsBlob(job Job) []byte {
	if job.javaScript() {
		return wire.ToolsBlob(mcptoolsJS+jsExports(job.Tools.Catalog), job.Tools.Catalog)
	}
	return wire.ToolsBlob(mcptoolsSource, job.Tools.Catalog)
}

// jsExports are the named exports of mcptools.mjs, one per server (its "module", an
// identifier), besides the default export that holds them all. A name the module
// exports already is left to the default export.
func jsExports(catalog []byte) string {
	var c struct {
		Servers []struct {
			Module string `json:"module"`
		} `json:"servers"`
	}
	if json.Unmarshal(catalog, &c) != nil {
		return ""
	}
	taken := map[string]bool{}
	var b strings.Builder
	for i, s := range c.Servers {
		if taken[s.Module] || !JSNamedExport(s.Module) {
			continue
		}
		taken[s.Module] = true
		fmt.Fprintf(&b, "const _s%d = servers[%q];\nexport { _s%d as %s };\n", i, s.Module, i, s.Module)
	}
	return b.String()
}

// mcptoolsOwn are the names mcptools.mjs exports itself.
var mcptoolsOwn = map[string]bool{"default": true, "search": true, "describe": true, "ToolError": true, "ToolDenied": true,
	"ToolBudgetExceeded": true, "ToolTimeout": true, "ToolUnavailable": true, "Image": true, "Resource": true, "_rebind": true}

// JSNamedExport reports whether a server's module name is a named export of
// JavaScript's mcptools (import { name } from "mcptools"): an identifier the module
// does not export itself. Any other is on the default export only.
func JSNamedExport(module string) bool {
	return !mcptoolsOwn[module] && jsIdentifier.MatchString(module)
}

var jsIdentifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// header is the code header of a job: MCPEXEC2 without tools (naming the language
// when it is not Python), MCPEXEC3 with (naming it too).
func header(job Job, files, tools []byte) string {
	if job.Tools == nil {
		if !job.python() {
			return wire.ExecLanguageHeader(job.Language, len(job.Code), len(files))
		}
		return wire.ExecHeader(len(job.Code), len(files))
	}
	if !job.python() {
		return wire.ToolsLanguageHeader(job.Language, len(job.Code), len(files), len(tools), len(job.Stdin))
	}
	return wire.ToolsHeader(len(job.Code), len(files), len(tools), len(job.Stdin))
}

// bridge serves one exec's calls: it reassembles call messages from C frames, runs
// each on a goroutine of its own under ctx, and queues the replies for the writer.
type bridge struct {
	ctx     context.Context
	tools   *Tools
	calls   *wire.Calls // the decoder's goroutine feeds it; it calls message
	replies chan []byte // whole Y frames
	sem     chan struct{}
	wg      sync.WaitGroup

	messages int // only the decoder's goroutine touches it
}

func newBridge(ctx context.Context, t *Tools) *bridge {
	if t.MaxRequest <= 0 {
		t.MaxRequest = MiB
	}
	b := &bridge{ctx: ctx, tools: t, replies: make(chan []byte, 16), sem: make(chan struct{}, maxCallsInFlight)}
	b.calls = wire.NewCalls(t.MaxRequest, b.message)
	return b
}

// message dispatches one call: a request too large to keep comes as nil, with its size.
func (b *bridge) message(id uint32, body []byte, size int) {
	b.messages++
	if b.messages > maxCallMessages || b.ctx.Err() != nil {
		return // a program that floods calls gets no more answers
	}
	select {
	case b.sem <- struct{}{}:
	case <-b.ctx.Done():
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.sem }()
		f := wire.ReplyFrame(id, b.tools.Serve(b.ctx, body, size))
		select {
		case b.replies <- f:
		case <-b.ctx.Done():
		}
	}()
}

// writeReplies writes replies to w until the program ends (done) or ctx ends, then
// half-closes the stream (closeWrite, nil in a session, whose stream goes on) so that
// the bootstrap's last read sees its end.
func (b *bridge) writeReplies(w io.Writer, done <-chan struct{}, closeWrite func() error) {
	for {
		select {
		case f := <-b.replies:
			if _, err := w.Write(f); err != nil {
				return
			}
		case <-done:
			if closeWrite != nil {
				_ = closeWrite()
			}
			return
		case <-b.ctx.Done():
			return
		}
	}
}

// callContext is the context of an exec's calls: it ends when the exec returns, and
// at the latest when its timeout would.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, timeout)
}
