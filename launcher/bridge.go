package launcher

import (
	"context"
	_ "embed"
	"encoding/binary"
	"io"
	"strconv"
	"sync"
	"time"
)

// Tools gives a program tools to call (code mode): the mcptools module in the sandbox
// sends each call to the server in a C frame, and Serve's answer goes back over the
// sandbox's stdin in a Y frame. Nothing travels over a network.
//
// The bridge protocol (docs/code-mode.md): the header is
// "MCPEXEC3 <code> <files> <tools> <stdin>\n", then the code, the files, the tools
// blob (u32 length of the mcptools module's source, the source, the catalog JSON) and
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

// mcptoolsSource is the sandbox's mcptools module, sent with each exec that has Tools.
//
//go:embed mcptools.py
var mcptoolsSource string

// Bounds on what one program can make the server hold: calls served at once (more
// wait, and with them the program's output stream), and messages in all.
const (
	maxCallsInFlight = 16
	maxCallMessages  = 4096
)

// toolsBlob is the tools part of the MCPEXEC3 stream.
func toolsBlob(t *Tools) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(mcptoolsSource)))
	b = append(b, mcptoolsSource...)
	return append(b, t.Catalog...)
}

// header is the code header of a job: MCPEXEC2 without tools, MCPEXEC3 with.
func header(job Job, files, tools []byte) string {
	if job.Tools == nil {
		return "MCPEXEC2 " + strconv.Itoa(len(job.Code)) + " " + strconv.Itoa(len(files)) + "\n"
	}
	return "MCPEXEC3 " + strconv.Itoa(len(job.Code)) + " " + strconv.Itoa(len(files)) + " " +
		strconv.Itoa(len(tools)) + " " + strconv.Itoa(len(job.Stdin)) + "\n"
}

// bridge serves one exec's calls: it reassembles call messages from C frames, runs
// each on a goroutine of its own under ctx, and queues the replies for the writer.
type bridge struct {
	ctx     context.Context
	tools   *Tools
	replies chan []byte // whole Y frames
	sem     chan struct{}
	wg      sync.WaitGroup

	// The reassembly state; only the decoder's goroutine touches it.
	hdr      [8]byte
	hdrLen   int
	size     uint32
	id       uint32
	got      uint32
	body     []byte
	skip     bool
	messages int
}

func newBridge(ctx context.Context, t *Tools) *bridge {
	if t.MaxRequest <= 0 {
		t.MaxRequest = MiB
	}
	return &bridge{ctx: ctx, tools: t, replies: make(chan []byte, 16), sem: make(chan struct{}, maxCallsInFlight)}
}

// add takes a chunk of the call stream (a C frame's payload).
func (b *bridge) add(p []byte) {
	for len(p) > 0 {
		if b.hdrLen < len(b.hdr) {
			c := copy(b.hdr[b.hdrLen:], p)
			b.hdrLen += c
			p = p[c:]
			if b.hdrLen == len(b.hdr) {
				b.size = binary.BigEndian.Uint32(b.hdr[:4])
				b.id = binary.BigEndian.Uint32(b.hdr[4:])
				b.got, b.skip, b.body = 0, int64(b.size) > int64(b.tools.MaxRequest), []byte{}
				if b.size == 0 {
					b.message()
				}
			}
			continue
		}
		c := min(uint32(len(p)), b.size-b.got)
		if !b.skip {
			b.body = append(b.body, p[:c]...)
		}
		b.got += c
		p = p[c:]
		if b.got == b.size {
			b.message()
		}
	}
}

// message dispatches the complete message in the reassembly state: a request too
// large to keep goes to Serve as nil, with its size.
func (b *bridge) message() {
	id, body, size := b.id, b.body, int(b.size)
	if b.skip {
		body = nil
	}
	b.hdrLen, b.body, b.skip = 0, nil, false
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
		reply := b.tools.Serve(b.ctx, body, size)
		f := make([]byte, 0, 9+len(reply))
		f = append(f, frameReply)
		f = binary.BigEndian.AppendUint32(f, uint32(4+len(reply)))
		f = binary.BigEndian.AppendUint32(f, id)
		f = append(f, reply...)
		select {
		case b.replies <- f:
		case <-b.ctx.Done():
		}
	}()
}

// frameReply is the kind of a reply frame, server to sandbox, on stdin.
const frameReply = 'Y'

// writeReplies writes replies to w until the program ends (done) or ctx ends, then
// half-closes the stream so that the bootstrap's last read sees its end.
func (b *bridge) writeReplies(w io.Writer, done <-chan struct{}, closeWrite func() error) {
	for {
		select {
		case f := <-b.replies:
			if _, err := w.Write(f); err != nil {
				return
			}
		case <-done:
			_ = closeWrite()
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
