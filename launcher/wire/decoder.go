package wire

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// MaxControlFrame bounds the frames the decoder buffers (R, X, F, and a D frame's
// header); output frames are streamed to the decoder's output and never buffered whole.
const MaxControlFrame = 4096

// Exit is the payload of an X frame.
type Exit struct {
	Exit    int  `json:"exit"`
	Signal  int  `json:"signal"`
	OOM     bool `json:"oom"`
	Dropped bool `json:"dropped"` // the bootstrap dropped output past the cap
	// State is a session's: kept, rolled_back or lost; "" in one-shot.
	State string `json:"state"`
	// Scope names the language whose state alone a lost session call lost
	// ("javascript": its node process); "" when the whole session was lost.
	Scope string `json:"scope"`
	// LostBefore, with Scope: that language's state was lost before the call (its
	// interpreter ended between calls), and the call ran in a fresh one.
	LostBefore bool `json:"lost_before"`
	// TimedOut and DurationMs are a kept call's: the bootstrap killed it at its
	// timeout; how long it ran.
	TimedOut   bool  `json:"timed_out"`
	DurationMs int64 `json:"duration_ms"`
	// Running: the stream ended with a P frame (a kept call still runs); OutputBytes is
	// its output so far, kept or not. No other field is set then.
	Running     bool  `json:"-"`
	OutputBytes int64 `json:"output_bytes"`
}

// File is a D frame: a file the program left in its output directory.
type File struct {
	Name    string // path relative to the output directory
	Size    int64
	Data    []byte // nil when Skipped
	Skipped string // why the bootstrap did not send the content
}

// Decoder parses the bootstrap's frames from the demultiplexed stdout stream. It is an
// io.Writer that never fails, so the stream is always drained; after the end (an X or
// F frame, or a protocol violation) it discards everything.
type Decoder struct {
	out     func(stderr bool, p []byte) // O and E payloads, in chunks
	maxFile int                         // largest file content a D frame may carry
	files   []File                      // from D frames; read only after done
	// calls receives C frames; nil (no tools for this exec) drops them.
	calls atomic.Pointer[Calls]

	hdr     [5]byte
	hdrLen  int
	kind    byte
	remain  uint32
	control []byte

	readyOnce sync.Once
	ready     chan struct{} // closed at the R frame
	doneOnce  sync.Once
	done      chan struct{} // closed at the end; then exit, fatal or err is set
	exit      *Exit
	fatal     string
	err       error
}

// NewDecoder returns a decoder that hands output frames' payloads to out (which must not
// keep p) and accepts D frames of up to maxFile bytes of content.
func NewDecoder(out func(stderr bool, p []byte), maxFile int) *Decoder {
	return &Decoder{out: out, maxFile: maxFile, ready: make(chan struct{}), done: make(chan struct{})}
}

func (d *Decoder) Write(p []byte) (int, error) {
	d.Feed(p)
	return len(p), nil
}

// Feed decodes p up to the end of the stream's last frame (X or F) and returns how
// many bytes it took: a session's stream goes on with the next call's frames.
func (d *Decoder) Feed(p []byte) int {
	n := len(p)
	for len(p) > 0 && !d.Finished() {
		if d.hdrLen < len(d.hdr) {
			c := copy(d.hdr[d.hdrLen:], p)
			d.hdrLen += c
			p = p[c:]
			if d.hdrLen == len(d.hdr) {
				d.startFrame()
			}
			continue
		}
		c := min(uint32(len(p)), d.remain)
		d.payload(p[:c])
		d.remain -= c
		p = p[c:]
		if d.remain == 0 {
			d.endFrame()
		}
	}
	return n - len(p)
}

// Ready is closed at the R frame.
func (d *Decoder) Ready() <-chan struct{} { return d.ready }

// Done is closed at the end of the stream's frames; then Outcome is set.
func (d *Decoder) Done() <-chan struct{} { return d.done }

// Finished reports whether Done is closed.
func (d *Decoder) Finished() bool { return closed(d.done) }

// Outcome is how the stream ended; read it once Done is closed. Exactly one of an X
// frame's status, an F frame's message (never empty) and a protocol error is set then,
// and none before.
func (d *Decoder) Outcome() (exit *Exit, fatal string, err error) {
	return d.exit, d.fatal, d.err
}

// Files are the D frames' files, in order; read them once Done is closed.
func (d *Decoder) Files() []File { return d.files }

// Buffered is how many bytes of a control or file frame the decoder holds: what a
// sandbox can make it keep, bounded by MaxControlFrame (plus maxFile for a D frame).
func (d *Decoder) Buffered() int { return len(d.control) }

// SetCalls directs the C frames that follow to c; nil drops them.
func (d *Decoder) SetCalls(c *Calls) { d.calls.Store(c) }

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (d *Decoder) startFrame() {
	d.kind = d.hdr[0]
	d.remain = binary.BigEndian.Uint32(d.hdr[1:])
	switch d.kind {
	case FrameStdout, FrameStderr, FrameCall:
	case FrameReady, FrameExit, FrameFatal, FrameProgress:
		if d.remain > MaxControlFrame {
			d.finish(nil, "", fmt.Errorf("control frame %q of %d bytes", d.kind, d.remain))
			return
		}
	case FrameFile:
		if int64(d.remain) > int64(d.maxFile)+MaxControlFrame {
			d.finish(nil, "", fmt.Errorf("file frame of %d bytes", d.remain))
			return
		}
	default:
		d.finish(nil, "", fmt.Errorf("unknown frame kind 0x%02x", d.kind))
		return
	}
	if d.remain == 0 {
		d.endFrame()
	}
}

func (d *Decoder) payload(p []byte) {
	switch d.kind {
	case FrameStdout, FrameStderr:
		d.out(d.kind == FrameStderr, p)
	case FrameCall:
		if b := d.calls.Load(); b != nil {
			b.Add(p)
		}
	default:
		d.control = append(d.control, p...)
	}
}

func (d *Decoder) endFrame() {
	kind, body := d.kind, d.control
	d.hdrLen, d.control = 0, nil
	switch kind {
	case FrameReady:
		d.readyOnce.Do(func() { close(d.ready) })
	case FrameExit, FrameProgress:
		var st Exit
		if err := json.Unmarshal(body, &st); err != nil {
			d.finish(nil, "", fmt.Errorf("decoding %q frame: %w", kind, err))
			return
		}
		st.Running = kind == FrameProgress
		d.finish(&st, "", nil)
	case FrameFatal:
		msg := string(body)
		if msg == "" {
			msg = "(no message)" // an empty fatal frame must still end the run as a failure
		}
		d.finish(nil, msg, nil)
	case FrameCall:
	case FrameFile:
		f, err := decodeFile(body)
		if err != nil {
			d.finish(nil, "", err)
			return
		}
		d.files = append(d.files, f)
	}
}

func (d *Decoder) finish(st *Exit, fatal string, err error) {
	d.doneOnce.Do(func() {
		d.exit, d.fatal, d.err = st, fatal, err
		close(d.done)
	})
}

// decodeFile parses a D frame: u32 header length, JSON header, content.
func decodeFile(body []byte) (File, error) {
	if len(body) < 4 {
		return File{}, fmt.Errorf("file frame of %d bytes", len(body))
	}
	n := binary.BigEndian.Uint32(body)
	if uint64(n) > uint64(len(body)-4) || n > MaxControlFrame {
		return File{}, fmt.Errorf("file frame header of %d bytes", n)
	}
	var h struct {
		Name    string `json:"name"`
		Size    int64  `json:"size"`
		Skipped string `json:"skipped"`
	}
	if err := json.Unmarshal(body[4:4+n], &h); err != nil {
		return File{}, fmt.Errorf("decoding file frame header: %w", err)
	}
	f := File{Name: h.Name, Size: h.Size, Skipped: h.Skipped}
	if h.Skipped == "" {
		f.Data = body[4+n:]
		f.Size = int64(len(f.Data))
	}
	return f, nil
}
