package launcher

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// frameOf builds one frame as boot.py writes it: kind, 4-byte big-endian length, payload.
func frameOf(kind byte, payload string) []byte {
	b := []byte{kind, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// frameHeader builds a header announcing n bytes, without the payload.
func frameHeader(kind byte, n uint32) []byte {
	b := []byte{kind, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

// frameTestMaxFile is the largest file content the tests' decoders accept in a D frame.
const frameTestMaxFile = 256

// frameFileOf builds a D frame: u32 header length, JSON header, content.
func frameFileOf(header, content string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(header)))
	return frameOf(wire.FrameFile, string(b)+header+content)
}

// frameStream concatenates frames.
func frameStream(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// frameState is everything observable about a decoder and its capture.
type frameState struct {
	Ready, Done    bool
	Exit           *wire.Exit
	Fatal, Err     string
	HasErr         bool
	Files          []OutputFile
	RawOut, RawErr string // what the capture kept, before repair
	Total          int64
	Truncated      bool
}

func frameSnapshot(d *decoder) frameState {
	exit, fatal, err := d.Outcome()
	s := frameState{
		Ready: closed(d.ready),
		Done:  closed(d.done),
		Exit:  exit,
		Fatal: fatal,
		Files: outputFiles(d.Files()),
	}
	if err != nil {
		s.HasErr, s.Err = true, err.Error()
	}
	d.out.mu.Lock()
	s.RawOut, s.RawErr, s.Total, s.Truncated = string(d.out.out), string(d.out.err), d.out.total, d.out.truncated
	d.out.mu.Unlock()
	return s
}

// frameWrite writes p in the given chunks and checks each Write's return values.
func frameWrite(t testing.TB, d *decoder, chunks ...[]byte) {
	t.Helper()
	for _, c := range chunks {
		n, err := d.Write(c)
		if n != len(c) || err != nil {
			t.Fatalf("Write(%d bytes): got (%d, %v), want (%d, nil)", len(c), n, err, len(c))
		}
	}
}

// frameDecode runs data through a fresh decoder with a capture of limit bytes.
func frameDecode(t testing.TB, limit int, chunks ...[]byte) (*decoder, frameState) {
	t.Helper()
	d := newDecoder(newCapture(limit), frameTestMaxFile)
	frameWrite(t, d, chunks...)
	return d, frameSnapshot(d)
}

// frameAssertOutcome checks the decoder's contract: once done, exactly one of exit,
// fatal and err is set; before, none.
func frameAssertOutcome(t testing.TB, s frameState) {
	t.Helper()
	set := 0
	if s.Exit != nil {
		set++
	}
	if s.Fatal != "" {
		set++
	}
	if s.HasErr {
		set++
	}
	if s.Done && set != 1 {
		t.Errorf("done with exit %+v, fatal %q, err %q: got %d of them set, want exactly 1", s.Exit, s.Fatal, s.Err, set)
	}
	if !s.Done && set != 0 {
		t.Errorf("not done with exit %+v, fatal %q, err %q: got %d of them set, want none", s.Exit, s.Fatal, s.Err, set)
	}
}

// frameHappyStream is a whole run: ready, output on both streams, exit.
func frameHappyStream() []byte {
	return frameStream(
		frameOf(wire.FrameReady, ""),
		frameOf(wire.FrameStdout, "hello "),
		frameOf(wire.FrameStderr, "warn: é\n"),
		frameOf(wire.FrameStdout, ""),
		frameOf(wire.FrameStdout, "world\n"),
		frameOf(wire.FrameExit, `{"exit": 3, "signal": 0, "oom": true, "dropped": false}`),
	)
}

func frameHappyWant() frameState {
	return frameState{
		Ready: true, Done: true,
		Exit:   &wire.Exit{Exit: 3, OOM: true},
		RawOut: "hello world\n", RawErr: "warn: é\n",
		Total: int64(len("hello world\n") + len("warn: é\n")),
	}
}

func TestDecoderSequence(t *testing.T) {
	d := newDecoder(newCapture(1<<10), frameTestMaxFile)
	if s := frameSnapshot(d); s.Ready || s.Done {
		t.Fatalf("fresh decoder: got ready %v, done %v, want neither", s.Ready, s.Done)
	}

	frameWrite(t, d, frameOf(wire.FrameReady, ""))
	if s := frameSnapshot(d); !s.Ready || s.Done {
		t.Fatalf("after R: got ready %v, done %v, want ready and not done", s.Ready, s.Done)
	}

	frameWrite(t, d, frameOf(wire.FrameStdout, "out"), frameOf(wire.FrameStderr, "err"))
	s := frameSnapshot(d)
	if s.Done || s.RawOut != "out" || s.RawErr != "err" {
		t.Fatalf("after O, E: got done %v, stdout %q, stderr %q, want not done, %q, %q", s.Done, s.RawOut, s.RawErr, "out", "err")
	}

	frameWrite(t, d, frameOf(wire.FrameExit, `{"exit":137,"signal":9,"oom":false,"dropped":true}`))
	s = frameSnapshot(d)
	want := frameState{Ready: true, Done: true, Exit: &wire.Exit{Exit: 137, Signal: 9, Dropped: true}, RawOut: "out", RawErr: "err", Total: 6}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("after X (-want +got):\n%s", diff)
	}
	o, e, trunc := d.out.result()
	if o != "out" || e != "err" || trunc {
		t.Errorf("result: got (%q, %q, %v), want (%q, %q, false)", o, e, trunc, "out", "err")
	}
}

// TestDecoderSplitWrites feeds the same stream cut at every possible place: the
// decoder must not depend on how the engine's stream is chunked.
func TestDecoderSplitWrites(t *testing.T) {
	streams := map[string]struct {
		data []byte
		want frameState
	}{
		"happy": {frameHappyStream(), frameHappyWant()},
		"fatal": {frameStream(frameOf(wire.FrameReady, ""), frameOf(wire.FrameStdout, "x"), frameOf(wire.FrameFatal, "boom")),
			frameState{Ready: true, Done: true, Fatal: "boom", RawOut: "x", Total: 1}},
		"unknown kind": {frameStream(frameOf(wire.FrameStdout, "ab"), frameOf('Z', "zz"), frameOf(wire.FrameStdout, "cd")),
			frameState{Done: true, HasErr: true, Err: "unknown frame kind 0x5a", RawOut: "ab", Total: 2}},
		"oversized control": {frameStream(frameOf(wire.FrameStderr, "e"), frameHeader(wire.FrameExit, wire.MaxControlFrame+1), []byte("{}")),
			frameState{Done: true, HasErr: true, Err: `control frame 'X' of 4097 bytes`, RawErr: "e", Total: 1}},
		"after exit": {frameStream(frameOf(wire.FrameExit, `{"exit":0}`), frameOf(wire.FrameStdout, "late")),
			frameState{Done: true, Exit: &wire.Exit{}}},
		"files": {frameStream(frameOf(wire.FrameReady, ""), frameFileOf(`{"name":"a.txt","size":2,"skipped":""}`, "hi"),
			frameFileOf(`{"name":"b","size":9999,"skipped":"too big"}`, ""), frameOf(wire.FrameExit, `{"exit":0}`)),
			frameState{Ready: true, Done: true, Exit: &wire.Exit{}, Files: []OutputFile{
				{Name: "a.txt", Size: 2, Data: []byte("hi")}, {Name: "b", Size: 9999, Skipped: "too big"}}}},
		"capped": {frameStream(frameOf(wire.FrameStdout, "0123456789abcdefghij"), frameOf(wire.FrameStderr, "ABC"), frameOf(wire.FrameExit, `{"exit":1}`)),
			frameState{Done: true, Exit: &wire.Exit{Exit: 1}, RawOut: "0123456789abcdefghij", RawErr: "AB", Total: 23, Truncated: true}},
	}
	for name, tc := range streams {
		t.Run(name, func(t *testing.T) {
			const limit = 22
			_, whole := frameDecode(t, limit, tc.data)
			if diff := cmp.Diff(tc.want, whole); diff != "" {
				t.Fatalf("one write (-want +got):\n%s", diff)
			}
			frameAssertOutcome(t, whole)

			var bytewise [][]byte
			for i := range tc.data {
				bytewise = append(bytewise, tc.data[i:i+1])
			}
			if _, got := frameDecode(t, limit, bytewise...); !cmp.Equal(whole, got) {
				t.Errorf("one byte per write (-whole +got):\n%s", cmp.Diff(whole, got))
			}
			for i := 0; i <= len(tc.data); i++ {
				for j := i; j <= len(tc.data); j++ {
					_, got := frameDecode(t, limit, tc.data[:i], tc.data[i:j], tc.data[j:])
					if !cmp.Equal(whole, got) {
						t.Fatalf("writes split at %d and %d (-whole +got):\n%s", i, j, cmp.Diff(whole, got))
					}
				}
			}
		})
	}
}

func TestDecoderFatal(t *testing.T) {
	d, s := frameDecode(t, 100, frameStream(frameOf(wire.FrameFatal, "prctl failed")))
	want := frameState{Done: true, Fatal: "prctl failed"}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	frameWrite(t, d, frameOf(wire.FrameStdout, "after"), frameOf(wire.FrameExit, `{"exit":0}`))
	if got := frameSnapshot(d); !cmp.Equal(s, got) {
		t.Errorf("frames after F changed the state (-before +after):\n%s", cmp.Diff(s, got))
	}
}

// TestDecoderEmptyFatalFrame: an F frame without a message still ends the stream, so
// one of exit, fatal and err must say how (sandbox.finished dereferences exit
// otherwise).
func TestDecoderEmptyFatalFrame(t *testing.T) {
	_, s := frameDecode(t, 100, frameOf(wire.FrameFatal, ""))
	if !s.Done {
		t.Fatalf("done: got false, want true")
	}
	frameAssertOutcome(t, s)
}

func TestDecoderUnknownKind(t *testing.T) {
	for _, kind := range []byte{0, 'o', 'x', 'Z', '{', 0x80, 0xff} {
		t.Run(strconv.Itoa(int(kind)), func(t *testing.T) {
			d, s := frameDecode(t, 100, frameOf(wire.FrameReady, ""), frameOf(wire.FrameStdout, "kept"), frameOf(kind, "?"))
			if !s.Done || !s.HasErr {
				t.Fatalf("got done %v, err %q, want done with an error", s.Done, s.Err)
			}
			if want := "unknown frame kind"; !strings.Contains(s.Err, want) {
				t.Errorf("err: got %q, want it to contain %q", s.Err, want)
			}
			frameAssertOutcome(t, s)
			// The stream keeps draining, and nothing more is taken from it.
			frameWrite(t, d, frameOf(wire.FrameStdout, "dropped"), frameOf(wire.FrameStderr, "dropped"),
				frameOf(wire.FrameExit, `{"exit":0}`), []byte("garbage"))
			if got := frameSnapshot(d); !cmp.Equal(s, got) {
				t.Errorf("writes after the error changed the state (-before +after):\n%s", cmp.Diff(s, got))
			}
			if o, _, _ := d.out.result(); o != "kept" {
				t.Errorf("stdout: got %q, want %q", o, "kept")
			}
		})
	}
}

func TestDecoderControlFrameLimit(t *testing.T) {
	exitPadded := `{"exit":5}` + strings.Repeat(" ", wire.MaxControlFrame-len(`{"exit":5}`))
	tests := []struct {
		name  string
		data  []byte
		check func(t *testing.T, s frameState)
	}{
		{"R at limit", frameOf(wire.FrameReady, strings.Repeat("r", wire.MaxControlFrame)), func(t *testing.T, s frameState) {
			if !s.Ready || s.Done {
				t.Errorf("got ready %v, done %v (err %q), want ready, not done", s.Ready, s.Done, s.Err)
			}
		}},
		{"F at limit", frameOf(wire.FrameFatal, strings.Repeat("f", wire.MaxControlFrame)), func(t *testing.T, s frameState) {
			if len(s.Fatal) != wire.MaxControlFrame || s.HasErr {
				t.Errorf("got fatal of %d bytes, err %q, want %d bytes, no error", len(s.Fatal), s.Err, wire.MaxControlFrame)
			}
		}},
		{"X at limit", frameOf(wire.FrameExit, exitPadded), func(t *testing.T, s frameState) {
			if s.Exit == nil || s.Exit.Exit != 5 {
				t.Errorf("got exit %+v, err %q, want exit 5", s.Exit, s.Err)
			}
		}},
	}
	for _, kind := range []byte{wire.FrameReady, wire.FrameExit, wire.FrameFatal} {
		for _, n := range []uint32{wire.MaxControlFrame + 1, 1 << 20, 1<<32 - 1} {
			tests = append(tests, struct {
				name  string
				data  []byte
				check func(t *testing.T, s frameState)
			}{
				name: string(kind) + " of " + strconv.FormatUint(uint64(n), 10),
				// Only the header and a little of the payload arrive: the decoder must
				// refuse at the header, not after buffering.
				data: frameStream(frameHeader(kind, n), bytes.Repeat([]byte("{"), 100)),
				check: func(t *testing.T, s frameState) {
					if !s.Done || !s.HasErr || !strings.Contains(s.Err, "control frame") {
						t.Errorf("got done %v, err %q, want done with a control frame error", s.Done, s.Err)
					}
					if s.Ready {
						t.Errorf("ready: got true, want false")
					}
				},
			})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, s := frameDecode(t, 100, tt.data)
			tt.check(t, s)
			frameAssertOutcome(t, s)
			if d.Buffered() > wire.MaxControlFrame {
				t.Errorf("buffered control bytes: got %d, want at most %d", d.Buffered(), wire.MaxControlFrame)
			}
		})
	}
}

func TestDecoderFileFrame(t *testing.T) {
	const max = frameTestMaxFile
	okHeader := `{"name":"out/r.csv","size":3,"skipped":""}`
	hdrLen := func(n uint32) string { return string(binary.BigEndian.AppendUint32(nil, n)) }
	tests := []struct {
		name      string
		data      []byte
		wantFiles []OutputFile // when the stream ends with an exit
		wantErr   string       // else
	}{
		{name: "file", data: frameFileOf(okHeader, "a,b"),
			wantFiles: []OutputFile{{Name: "out/r.csv", Size: 3, Data: []byte("a,b")}}},
		{name: "size is the content's", data: frameFileOf(`{"name":"x","size":999,"skipped":""}`, "abc"),
			wantFiles: []OutputFile{{Name: "x", Size: 3, Data: []byte("abc")}}},
		{name: "empty file", data: frameFileOf(`{"name":"e","size":0,"skipped":""}`, ""),
			wantFiles: []OutputFile{{Name: "e", Size: 0, Data: []byte{}}}},
		{name: "skipped", data: frameFileOf(`{"name":"big","size":123456789,"skipped":"over the cap"}`, ""),
			wantFiles: []OutputFile{{Name: "big", Size: 123456789, Skipped: "over the cap"}}},
		{name: "skipped carries no data", data: frameFileOf(`{"name":"big","size":5,"skipped":"why"}`, "12345"),
			wantFiles: []OutputFile{{Name: "big", Size: 5, Skipped: "why"}}},
		{name: "at the cap", data: frameFileOf(`{"name":"m"}`, strings.Repeat("m", max)),
			wantFiles: []OutputFile{{Name: "m", Size: max, Data: bytes.Repeat([]byte("m"), max)}}},
		{name: "in order", data: frameStream(frameFileOf(`{"name":"2"}`, "b"), frameFileOf(`{"name":"1"}`, "a")),
			wantFiles: []OutputFile{{Name: "2", Size: 1, Data: []byte("b")}, {Name: "1", Size: 1, Data: []byte("a")}}},

		{name: "frame over the cap", data: frameStream(frameHeader(wire.FrameFile, max+wire.MaxControlFrame+1), []byte(hdrLen(2)+"{}")),
			wantErr: "file frame of"},
		{name: "frame of 4 GiB", data: frameHeader(wire.FrameFile, 1<<32-1), wantErr: "file frame of"},
		{name: "empty frame", data: frameOf(wire.FrameFile, ""), wantErr: "file frame"},
		{name: "short frame", data: frameOf(wire.FrameFile, "\x00\x00\x00"), wantErr: "file frame"},
		{name: "header longer than the frame", data: frameOf(wire.FrameFile, hdrLen(50)+`{"name":"x"}`), wantErr: "file frame header"},
		{name: "header over the control cap", data: frameOf(wire.FrameFile, hdrLen(wire.MaxControlFrame+1)+strings.Repeat(" ", wire.MaxControlFrame+1)),
			wantErr: "file frame header"},
		{name: "header not JSON", data: frameFileOf(`name=x`, "data"), wantErr: "decoding file frame header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, s := frameDecode(t, 100, tt.data, frameOf(wire.FrameExit, `{"exit":0}`))
			frameAssertOutcome(t, s)
			if tt.wantErr != "" {
				if !s.HasErr || !strings.Contains(s.Err, tt.wantErr) {
					t.Errorf("err: got %q, want it to contain %q", s.Err, tt.wantErr)
				}
				if s.Exit != nil {
					t.Errorf("exit: got %+v, want nil after a bad file frame", s.Exit)
				}
			} else if s.Exit == nil {
				t.Errorf("got err %q, want the exit frame to be read", s.Err)
			} else if diff := cmp.Diff(tt.wantFiles, s.Files); diff != "" {
				t.Errorf("files mismatch (-want +got):\n%s", diff)
			}
			if d.Buffered() > max+wire.MaxControlFrame {
				t.Errorf("buffered control bytes: got %d, want at most %d", d.Buffered(), max+wire.MaxControlFrame)
			}
		})
	}
}

// TestDecoderLargeOutputFrame: output frames are not bounded like control frames;
// they stream into the capture, which drops what is past the cap.
func TestDecoderLargeOutputFrame(t *testing.T) {
	d := newDecoder(newCapture(1000), frameTestMaxFile)
	frameWrite(t, d, frameHeader(wire.FrameStdout, 1<<31))
	chunk := bytes.Repeat([]byte("y"), 4096)
	for range 64 {
		frameWrite(t, d, chunk)
	}
	s := frameSnapshot(d)
	if s.Done || s.HasErr {
		t.Fatalf("got done %v, err %q, want a frame in progress", s.Done, s.Err)
	}
	if len(s.RawOut) != 1000 || !s.Truncated || s.Total != 64*4096 {
		t.Errorf("capture: got %d bytes kept, truncated %v, total %d, want 1000, true, %d", len(s.RawOut), s.Truncated, s.Total, 64*4096)
	}
	if d.Buffered() != 0 {
		t.Errorf("buffered control bytes: got %d, want 0", d.Buffered())
	}
}

func TestDecoderBadExitFrame(t *testing.T) {
	for name, payload := range map[string]string{
		"empty":         "",
		"not json":      "exit 0",
		"wrong type":    `{"exit":"0"}`,
		"truncated":     `{"exit":0`,
		"trailing data": `{"exit":0} {"exit":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, s := frameDecode(t, 100, frameOf(wire.FrameExit, payload))
			if !s.Done || !s.HasErr || s.Exit != nil {
				t.Errorf("got done %v, exit %+v, err %q, want done with an error and no exit", s.Done, s.Exit, s.Err)
			}
			frameAssertOutcome(t, s)
		})
	}
}

func TestDecoderIgnoresDataAfterExit(t *testing.T) {
	d, s := frameDecode(t, 100, frameOf(wire.FrameStdout, "before"), frameOf(wire.FrameExit, `{"exit":0}`))
	want := frameState{Done: true, Exit: &wire.Exit{}, RawOut: "before", Total: 6}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	for _, late := range [][]byte{
		frameOf(wire.FrameStdout, "after"),
		frameOf(wire.FrameStderr, "after"),
		frameOf(wire.FrameExit, `{"exit":9}`),
		frameOf(wire.FrameFatal, "late"),
		frameOf('Z', ""),
		frameHeader(wire.FrameExit, 1<<30),
		{wire.FrameStdout},
	} {
		frameWrite(t, d, late)
	}
	if got := frameSnapshot(d); !cmp.Equal(s, got) {
		t.Errorf("frames after X changed the state (-before +after):\n%s", cmp.Diff(s, got))
	}
}

func TestDecoderRepeatedReady(t *testing.T) {
	_, s := frameDecode(t, 100, frameOf(wire.FrameReady, ""), frameOf(wire.FrameReady, "again"), frameOf(wire.FrameExit, `{}`))
	want := frameState{Ready: true, Done: true, Exit: &wire.Exit{}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestDecoderIncompleteStream: a stream that stops inside a header or a payload is
// not an outcome; the caller finds out when the stream ends.
func TestDecoderIncompleteStream(t *testing.T) {
	full := frameHappyStream()
	lastX := bytes.LastIndexByte(full, wire.FrameExit)
	for _, n := range []int{0, 1, 3, 5, 6, lastX, lastX + 4, len(full) - 1} {
		_, s := frameDecode(t, 100, full[:n])
		if s.Done {
			t.Errorf("first %d of %d bytes: got done (exit %+v, fatal %q, err %q), want not done", n, len(full), s.Exit, s.Fatal, s.Err)
		}
		frameAssertOutcome(t, s)
	}
}

// frameRunBootstrap runs frameBootstrapCommand to its end, stdin after the code, and
// returns what it decoded and what boot.py wrote to its stderr.
func frameRunBootstrap(t *testing.T, o Options, code, stdin string) (*decoder, *capture, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, in, d, c, diag := frameBootstrapCommand(ctx, t, o, code)
	cmd.Stdin = strings.NewReader(in + stdin)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running boot.py: %v (stderr %q)", err, diag.String())
		}
	}
	return d, c, diag.String()
}

// frameBootstrapCommand is boot.py as a command on this machine, with the arguments
// bootCommand gives it (files come back from a temporary directory instead of
// OutputDir, which {outdir} in the code names) and its stdout decoded; in is the start
// of its stdin as sandbox.deliver writes it (header, code, no input files).
func frameBootstrapCommand(ctx context.Context, t *testing.T, o Options, code string) (cmd *exec.Cmd, in string, d *decoder, c *capture, diag *bytes.Buffer) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this machine")
	}
	o.Python = python
	o = o.withDefaults()
	outdir := t.TempDir()
	args := bootCommand(o)
	i := slices.Index(args, OutputDir)
	if i < 0 {
		t.Fatalf("bootCommand: got %.200q, want OutputDir among the arguments", args)
	}
	args[i] = outdir
	code = strings.ReplaceAll(code, "{outdir}", outdir)
	cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	c = newCapture(o.MaxOutputBytes)
	d = newDecoder(c, o.MaxFileBytes)
	diag = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = d, diag
	cmd.WaitDelay = 5 * time.Second
	return cmd, "MCPEXEC2 " + strconv.Itoa(len(code)) + " 0\n" + code, d, c, diag
}

// TestFrameBootstrapLocal runs boot.py on this machine and decodes what it writes:
// the Python and Go sides of the protocol must agree.
func TestFrameBootstrapLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	const skipped = "*" // any reason
	tests := []struct {
		name      string
		max       int
		code      string
		stdin     string
		wantExit  wire.Exit
		wantOut   string
		wantErr   string
		wantTrunc bool
		wantFiles []OutputFile
	}{
		{name: "hello", max: 1000, code: "print('hello')",
			wantOut: "hello\n"},
		{name: "exit code and stderr", max: 1000, code: "import sys\nsys.stderr.write('bad\\n')\nsys.exit(3)",
			wantExit: wire.Exit{Exit: 3}, wantErr: "bad\n"},
		{name: "stdin", max: 1000, code: "import sys\nprint(sys.stdin.read().upper(), end='')", stdin: "abc\n",
			wantOut: "ABC\n"},
		{name: "signal", max: 1000, code: "import os\nprint('x', flush=True)\nos.kill(os.getpid(), 9)",
			wantExit: wire.Exit{Exit: 137, Signal: 9}, wantOut: "x\n"},
		{name: "over the cap", max: 100, code: "import sys\nsys.stdout.write('x' * 100000)",
			wantExit: wire.Exit{Dropped: true}, wantOut: strings.Repeat("x", 100), wantTrunc: true},
		{name: "character split by the cap", max: 4, code: "print('ab€€')",
			wantExit: wire.Exit{Dropped: true}, wantOut: "ab", wantTrunc: true},
		{name: "invalid bytes", max: 1000, code: "import sys\nsys.stdout.buffer.write(b'a\\xffb')",
			wantOut: "a\uFFFDb"},
		{name: "files", max: 1000,
			code: "import os\nos.makedirs('{outdir}/sub')\n" +
				"open('{outdir}/sub/b.txt', 'w').write('bee')\n" +
				"open('{outdir}/a.bin', 'wb').write(b'\\x00\\xff')\n" +
				"open('{outdir}/big', 'w').write('x' * 300)\n",
			wantFiles: []OutputFile{
				{Name: "a.bin", Size: 2, Data: []byte("\x00\xff")},
				{Name: "big", Size: 300, Skipped: skipped},
				{Name: "sub/b.txt", Size: 3, Data: []byte("bee")},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, c, diag := frameRunBootstrap(t, Options{MaxOutputBytes: tt.max, MaxFileBytes: 256, MaxFilesBytes: 1024}, tt.code, tt.stdin)
			s := frameSnapshot(d)
			if !s.Done || s.Exit == nil {
				t.Fatalf("got done %v, exit %+v, fatal %q, err %q (stderr %q), want an exit frame", s.Done, s.Exit, s.Fatal, s.Err, diag)
			}
			if !s.Ready {
				t.Errorf("ready: got false, want true")
			}
			got := *s.Exit
			got.OOM = false // depends on the machine's cgroup
			if got != tt.wantExit {
				t.Errorf("exit: got %+v, want %+v", got, tt.wantExit)
			}
			if s.Exit.Dropped {
				c.markTruncated() // as sandbox.finished does
			}
			o, e, trunc := c.result()
			if o != tt.wantOut || e != tt.wantErr || trunc != tt.wantTrunc {
				t.Errorf("result: got (%q, %q, %v), want (%q, %q, %v)", o, e, trunc, tt.wantOut, tt.wantErr, tt.wantTrunc)
			}
			files := slices.Clone(s.Files)
			for i := range files {
				if i < len(tt.wantFiles) && tt.wantFiles[i].Skipped == skipped && files[i].Skipped != "" {
					files[i].Skipped = skipped
				}
			}
			if diff := cmp.Diff(tt.wantFiles, files); diff != "" {
				t.Errorf("files mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFrameBootstrapLongFileName: the program chooses the names of the files it
// leaves, so a long name (non-ASCII characters take 6 bytes each in the JSON header)
// must not turn its run into a protocol error that loses its output.
func TestFrameBootstrapLongFileName(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	code := "import os\n" +
		"d = '{outdir}/' + '/'.join(['\\u00e9' * 120] * 12)\n" +
		"os.makedirs(d)\n" +
		"open(d + '/f', 'w').write('x')\n" +
		"print('done')\n"
	d, c, diag := frameRunBootstrap(t, Options{}, code, "")
	s := frameSnapshot(d)
	if !s.Done || s.Exit == nil {
		t.Fatalf("got done %v, exit %+v, fatal %q, err %q (stderr %q), want an exit frame", s.Done, s.Exit, s.Fatal, s.Err, diag)
	}
	if o, _, _ := c.result(); o != "done\n" {
		t.Errorf("stdout: got %q, want %q", o, "done\n")
	}
	if len(s.Files) != 1 {
		t.Errorf("files: got %d, want 1 (returned or listed as skipped)", len(s.Files))
	}
}

// TestFrameBootstrapStreamsOutput: the bootstrap holds output frames briefly so that a
// program's last output leaves with its exit frame, but what a program writes while it
// runs must still reach the server while it runs: here the program waits, after its
// first line, for a line on stdin that the test sends only once that first line has
// come. A hold until the end would leave both waiting until the deadline.
func TestFrameBootstrapStreamsOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python3")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := "import sys\nprint('first')\nsys.stderr.write('err\\n')\nsys.stdin.readline()\nprint('second')\n"
	cmd, in, d, c, diag := frameBootstrapCommand(ctx, t, Options{}, code)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, in); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if o, e, _ := c.result(); o == "first\n" && e == "err\n" {
			break
		}
		if time.Now().After(deadline) {
			o, e, _ := c.result()
			t.Fatalf("output while the program runs: got (%q, %q) after 10 s, want (%q, %q) before it ends", o, e, "first\n", "err\n")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if frameSnapshot(d).Done {
		t.Fatal("the exit frame came while the program waits for its stdin")
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("boot.py: %v (stderr %q)", err, diag.String())
	}
	if s := frameSnapshot(d); !s.Done || s.Exit == nil || s.Exit.Exit != 0 || s.Exit.Signal != 0 {
		t.Fatalf("got done %v, exit %+v, fatal %q, err %q, want exit 0", s.Done, s.Exit, s.Fatal, s.Err)
	}
	if o, _, _ := c.result(); o != "first\nsecond\n" {
		t.Errorf("stdout: got %q, want %q", o, "first\nsecond\n")
	}
}

// FuzzDecoder feeds arbitrary bytes to the decoder, in one write and one byte at a
// time, and checks its contract.
func FuzzDecoder(f *testing.F) {
	const limit = 64
	f.Add(frameHappyStream())
	f.Add(frameStream(frameOf(wire.FrameReady, ""), frameOf(wire.FrameFatal, "boom")))
	f.Add(frameStream(frameOf(wire.FrameStdout, strings.Repeat("x", 100)), frameOf(wire.FrameExit, `{"exit":1,"dropped":true}`)))
	f.Add(frameStream(frameOf('Q', "?"), frameOf(wire.FrameStdout, "x")))
	f.Add(frameStream(frameHeader(wire.FrameExit, wire.MaxControlFrame+1), []byte("{}")))
	f.Add(frameStream(frameOf(wire.FrameExit, `{"exit":0}`), frameOf(wire.FrameStdout, "late")))
	f.Add([]byte{wire.FrameStdout, 0, 0})
	f.Add(frameStream(frameFileOf(`{"name":"a","size":1,"skipped":""}`, "a"), frameOf(wire.FrameExit, `{}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, whole := frameDecode(t, limit, data)
		if n := len(whole.RawOut) + len(whole.RawErr); n > limit {
			t.Fatalf("capture kept %d bytes, want at most %d", n, limit)
		}
		if whole.Total > int64(len(data)) {
			t.Fatalf("capture counted %d bytes from %d bytes of input", whole.Total, len(data))
		}
		if d.Buffered() > frameTestMaxFile+wire.MaxControlFrame {
			t.Fatalf("buffered control bytes: got %d, want at most %d", d.Buffered(), frameTestMaxFile+wire.MaxControlFrame)
		}
		for _, fl := range whole.Files {
			// The decoder bounds the whole D frame, header included, to maxFile+wire.MaxControlFrame.
			if len(fl.Data) > frameTestMaxFile+wire.MaxControlFrame {
				t.Fatalf("file %q: got %d bytes, want at most %d", fl.Name, len(fl.Data), frameTestMaxFile+wire.MaxControlFrame)
			}
		}
		frameAssertOutcome(t, whole)

		bytewise := make([][]byte, len(data))
		for i := range data {
			bytewise[i] = data[i : i+1]
		}
		if _, got := frameDecode(t, limit, bytewise...); !cmp.Equal(whole, got) {
			t.Fatalf("one byte per write differs from one write (-whole +bytewise):\n%s", cmp.Diff(whole, got))
		}
		half := len(data) / 2
		if _, got := frameDecode(t, limit, data[:half], data[half:]); !cmp.Equal(whole, got) {
			t.Fatalf("two writes differ from one write (-whole +halves):\n%s", cmp.Diff(whole, got))
		}

		if whole.Done {
			frameWrite(t, d, data)
			if got := frameSnapshot(d); !cmp.Equal(whole, got) {
				t.Fatalf("writes after the end changed the state (-before +after):\n%s", cmp.Diff(whole, got))
			}
		}
		// Last: result may mark the capture truncated (see TestCaptureResultStable).
		o, e, _ := d.out.result()
		if len(o)+len(e) > limit {
			t.Fatalf("result: got %d bytes, want at most %d", len(o)+len(e), limit)
		}
		if !utf8.ValidString(o) || !utf8.ValidString(e) {
			t.Fatalf("result: got %q, %q, want valid UTF-8", o, e)
		}
	})
}
