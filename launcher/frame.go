package launcher

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// Frame kinds written by the bootstrap (boot.py) on the container's stdout.
const (
	frameReady  = 'R'
	frameStdout = 'O'
	frameStderr = 'E'
	frameExit   = 'X'
	frameFatal  = 'F'
	frameFile   = 'D'
	frameCall   = 'C' // a chunk of the program's tool calls (bridge.go)
)

// maxControlFrame bounds the frames the decoder buffers (R, X, F); output frames are
// streamed into the capture and never buffered whole.
const maxControlFrame = 4096

// exitStatus is the payload of an X frame.
type exitStatus struct {
	Exit    int  `json:"exit"`
	Signal  int  `json:"signal"`
	OOM     bool `json:"oom"`
	Dropped bool `json:"dropped"` // the bootstrap dropped output past the cap
	// State is a session's: kept, rolled_back or lost (session.go); "" in one-shot.
	State string `json:"state"`
}

// decoder parses the bootstrap's frames from the demultiplexed stdout stream. It is an
// io.Writer that never fails, so the stream is always drained; after the end (an X or
// F frame, or a protocol violation) it discards everything.
type decoder struct {
	out     *capture
	maxFile int          // largest file content a D frame may carry
	files   []OutputFile // from D frames; read only after done
	// calls receives C frames; nil (no tools for this exec) drops them.
	calls atomic.Pointer[bridge]

	hdr     [5]byte
	hdrLen  int
	kind    byte
	remain  uint32
	control []byte

	readyOnce sync.Once
	ready     chan struct{} // closed at the R frame
	doneOnce  sync.Once
	done      chan struct{} // closed at the end; then exit, fatal or err is set
	exit      *exitStatus
	fatal     string
	err       error
}

func newDecoder(out *capture, maxFile int) *decoder {
	return &decoder{out: out, maxFile: maxFile, ready: make(chan struct{}), done: make(chan struct{})}
}

func (d *decoder) Write(p []byte) (int, error) {
	d.feed(p)
	return len(p), nil
}

// feed decodes p up to the end of the stream's last frame (X or F) and returns how
// many bytes it took: a session's stream goes on with the next call's frames.
func (d *decoder) feed(p []byte) int {
	n := len(p)
	for len(p) > 0 && !d.finished() {
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

func (d *decoder) finished() bool { return closed(d.done) }

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (d *decoder) startFrame() {
	d.kind = d.hdr[0]
	d.remain = binary.BigEndian.Uint32(d.hdr[1:])
	switch d.kind {
	case frameStdout, frameStderr, frameCall:
	case frameReady, frameExit, frameFatal:
		if d.remain > maxControlFrame {
			d.finish(nil, "", fmt.Errorf("control frame %q of %d bytes", d.kind, d.remain))
			return
		}
	case frameFile:
		if int64(d.remain) > int64(d.maxFile)+maxControlFrame {
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

func (d *decoder) payload(p []byte) {
	switch d.kind {
	case frameStdout, frameStderr:
		d.out.add(d.kind == frameStderr, p)
	case frameCall:
		if b := d.calls.Load(); b != nil {
			b.add(p)
		}
	default:
		d.control = append(d.control, p...)
	}
}

func (d *decoder) endFrame() {
	kind, body := d.kind, d.control
	d.hdrLen, d.control = 0, nil
	switch kind {
	case frameReady:
		d.readyOnce.Do(func() { close(d.ready) })
	case frameExit:
		var st exitStatus
		if err := json.Unmarshal(body, &st); err != nil {
			d.finish(nil, "", fmt.Errorf("decoding exit frame: %w", err))
			return
		}
		d.finish(&st, "", nil)
	case frameFatal:
		msg := string(body)
		if msg == "" {
			msg = "(no message)" // an empty fatal frame must still end the run as a failure
		}
		d.finish(nil, msg, nil)
	case frameCall:
	case frameFile:
		f, err := decodeFile(body)
		if err != nil {
			d.finish(nil, "", err)
			return
		}
		d.files = append(d.files, f)
	}
}

func (d *decoder) finish(st *exitStatus, fatal string, err error) {
	d.doneOnce.Do(func() {
		d.exit, d.fatal, d.err = st, fatal, err
		close(d.done)
	})
}

// decodeFile parses a D frame: u32 header length, JSON header, content.
func decodeFile(body []byte) (OutputFile, error) {
	if len(body) < 4 {
		return OutputFile{}, fmt.Errorf("file frame of %d bytes", len(body))
	}
	n := binary.BigEndian.Uint32(body)
	if uint64(n) > uint64(len(body)-4) || n > maxControlFrame {
		return OutputFile{}, fmt.Errorf("file frame header of %d bytes", n)
	}
	var h struct {
		Name    string `json:"name"`
		Size    int64  `json:"size"`
		Skipped string `json:"skipped"`
	}
	if err := json.Unmarshal(body[4:4+n], &h); err != nil {
		return OutputFile{}, fmt.Errorf("decoding file frame header: %w", err)
	}
	f := OutputFile{Name: h.Name, Size: h.Size, Skipped: h.Skipped}
	if h.Skipped == "" {
		f.Data = body[4+n:]
		f.Size = int64(len(f.Data))
	}
	return f, nil
}
