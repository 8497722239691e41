package launcher

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// captureWrite is one add call.
type captureWrite struct {
	stderr bool
	data   string
}

func capOut(s string) captureWrite { return captureWrite{false, s} }
func capErr(s string) captureWrite { return captureWrite{true, s} }

// captureRun feeds writes to a fresh capture and returns its result.
func captureRun(t *testing.T, limit int, writes []captureWrite, mark bool) (string, string, bool) {
	t.Helper()
	c := newCapture(limit)
	for _, w := range writes {
		c.add(w.stderr, []byte(w.data))
	}
	if mark {
		c.markTruncated()
	}
	return c.result()
}

// captureRepaired is the reference repair: every byte that is not part of a valid
// UTF-8 sequence becomes U+FFFD (Go's string-to-rune conversion does exactly that).
func captureRepaired(s string) string { return string([]rune(s)) }

const capFFFD = "\uFFFD"

func TestCaptureTable(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []captureWrite
		mark      bool // markTruncated before result
		wantOut   string
		wantErr   string
		wantTrunc bool
	}{
		{"nothing", 10, nil, false, "", "", false},
		{"empty writes", 0, []captureWrite{capOut(""), capErr("")}, false, "", "", false},
		{"under cap", 10, []captureWrite{capOut("abc"), capErr("de")}, false, "abc", "de", false},
		{"under cap interleaved", 10, []captureWrite{capOut("a"), capErr("1"), capOut("b"), capErr("2")}, false, "ab", "12", false},
		{"exactly at cap", 5, []captureWrite{capOut("abc"), capErr("de")}, false, "abc", "de", false},
		{"exactly at cap one stream", 3, []captureWrite{capOut("abc")}, false, "abc", "", false},
		{"one byte over on stderr", 5, []captureWrite{capOut("abc"), capErr("def")}, false, "abc", "de", true},
		{"one byte over on stdout", 5, []captureWrite{capOut("abcdef")}, false, "abcde", "", true},
		{"one extra write after full", 5, []captureWrite{capOut("abcde"), capErr("x")}, false, "abcde", "", true},
		{"empty write after full", 5, []captureWrite{capOut("abcde"), capErr("")}, false, "abcde", "", false},
		{"shared cap stdout first", 4, []captureWrite{capOut("aaa"), capErr("bbb")}, false, "aaa", "b", true},
		{"shared cap stderr first", 4, []captureWrite{capErr("bbb"), capOut("aaa")}, false, "a", "bbb", true},
		{"shared cap nothing after full", 4, []captureWrite{capOut("ab"), capErr("cd"), capOut("e"), capErr("f")}, false, "ab", "cd", true},
		{"zero cap", 0, []captureWrite{capOut("a")}, false, "", "", true},
		{"mark truncated", 10, []captureWrite{capOut("abc")}, true, "abc", "", true},

		// A character cut by the cap is dropped whole.
		{"split 2-byte char", 3, []captureWrite{capOut("abé")}, false, "ab", "", true},
		{"split 3-byte char after 1", 3, []captureWrite{capOut("ab€")}, false, "ab", "", true},
		{"split 3-byte char after 2", 4, []captureWrite{capOut("ab€")}, false, "ab", "", true},
		{"whole 3-byte char at cap", 5, []captureWrite{capOut("ab€")}, false, "ab€", "", false},
		{"split 4-byte char after 1", 1, []captureWrite{capOut("😀")}, false, "", "", true},
		{"split 4-byte char after 2", 2, []captureWrite{capOut("😀")}, false, "", "", true},
		{"split 4-byte char after 3", 3, []captureWrite{capOut("😀!")}, false, "", "", true},
		{"whole 4-byte char, cut after it", 4, []captureWrite{capOut("😀!")}, false, "😀", "", true},
		{"split char on stderr", 3, []captureWrite{capOut("a"), capErr("bé")}, false, "a", "b", true},
		{"split char on both", 4, []captureWrite{capOut("é"[:1]), capErr("ab€")}, true, "", "ab", true},
		{"split by bootstrap drop", 10, []captureWrite{capOut("ab€"[:4])}, true, "ab", "", true},

		// Invalid bytes: one U+FFFD each.
		{"invalid byte", 100, []captureWrite{capOut("a\xffb")}, false, "a" + capFFFD + "b", "", false},
		{"invalid bytes one each", 100, []captureWrite{capOut("\xff\xfe\xfd")}, false, capFFFD + capFFFD + capFFFD, "", false},
		{"lone continuation bytes", 100, []captureWrite{capErr("x\x80\xbfy")}, false, "", "x" + capFFFD + capFFFD + "y", false},
		{"overlong encoding", 100, []captureWrite{capOut("\xc0\xaf")}, false, capFFFD + capFFFD, "", false},
		{"surrogate", 100, []captureWrite{capOut("\xed\xa0\x80")}, false, capFFFD + capFFFD + capFFFD, "", false},
		{"valid U+FFFD kept", 100, []captureWrite{capOut(capFFFD)}, false, capFFFD, "", false},
		{"invalid in the middle of a cut stream", 6, []captureWrite{capOut("\xffab€")}, false, capFFFD + "ab", "", true},

		// An incomplete sequence at the end of a stream that was not cut is invalid.
		{"incomplete tail not truncated", 100, []captureWrite{capOut("ab\xe2\x82")}, false, "ab" + capFFFD + capFFFD, "", false},
		{"incomplete tail on stderr", 100, []captureWrite{capOut("ok"), capErr("x\xf0\x9f\x98")}, false, "ok", "x" + capFFFD + capFFFD + capFFFD, false},
		{"incomplete char split across writes", 100, []captureWrite{capOut("\xe2\x82"), capOut("\xac")}, false, "€", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotOut, gotErr, gotTrunc := captureRun(t, tt.limit, tt.writes, tt.mark)
			if gotOut != tt.wantOut {
				t.Errorf("stdout: got %q, want %q", gotOut, tt.wantOut)
			}
			if gotErr != tt.wantErr {
				t.Errorf("stderr: got %q, want %q", gotErr, tt.wantErr)
			}
			if gotTrunc != tt.wantTrunc {
				t.Errorf("truncated: got %v, want %v", gotTrunc, tt.wantTrunc)
			}
			if len(gotOut)+len(gotErr) > tt.limit {
				t.Errorf("size: got %d bytes, want at most %d", len(gotOut)+len(gotErr), tt.limit)
			}
		})
	}
}

// TestCaptureRepairGrowsPastCap covers invalid bytes whose replacement (3 bytes each)
// no longer fits: the result is cut to the cap, stays valid and says it was cut.
func TestCaptureRepairGrowsPastCap(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []captureWrite
	}{
		{"stdout only", 4, []captureWrite{capOut("\xff\xff")}},
		{"stderr only", 5, []captureWrite{capErr("a\xff\xffb")}},
		{"both streams", 6, []captureWrite{capOut("\xff"), capErr("\xff\xff")}},
		{"both streams full", 6, []captureWrite{capOut("\xff\xff\xff"), capErr("\xfe\xfe\xfe")}},
		{"at cap then repaired", 2, []captureWrite{capOut("\xff"), capErr("\xff")}},
		{"cap of one", 1, []captureWrite{capOut("\xff")}},
		{"mixed", 8, []captureWrite{capOut("ok\xff"), capErr("é\xff\xff")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rawOut, rawErr, total string
			for _, w := range tt.writes {
				total += w.data
				if w.stderr {
					rawErr += w.data
				} else {
					rawOut += w.data
				}
			}
			if len(total) > tt.limit {
				t.Fatalf("bad test: input of %d bytes is over the cap %d", len(total), tt.limit)
			}
			if n := len(captureRepaired(rawOut)) + len(captureRepaired(rawErr)); n <= tt.limit {
				t.Fatalf("bad test: repaired input of %d bytes fits the cap %d", n, tt.limit)
			}
			gotOut, gotErr, gotTrunc := captureRun(t, tt.limit, tt.writes, false)
			if n := len(gotOut) + len(gotErr); n > tt.limit {
				t.Errorf("size: got %d bytes (%q, %q), want at most %d", n, gotOut, gotErr, tt.limit)
			}
			if !gotTrunc {
				t.Errorf("truncated: got false, want true")
			}
			if !utf8.ValidString(gotOut) || !utf8.ValidString(gotErr) {
				t.Errorf("got %q, %q, want valid UTF-8", gotOut, gotErr)
			}
			if !strings.HasPrefix(captureRepaired(rawOut), gotOut) {
				t.Errorf("stdout: got %q, want a prefix of %q", gotOut, captureRepaired(rawOut))
			}
			if !strings.HasPrefix(captureRepaired(rawErr), gotErr) {
				t.Errorf("stderr: got %q, want a prefix of %q", gotErr, captureRepaired(rawErr))
			}
		})
	}
}

// TestCaptureResultStable checks that result can be called again with the same answer.
func TestCaptureResultStable(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []captureWrite
	}{
		{"valid", 10, []captureWrite{capOut("abc"), capErr("d")}},
		{"cut", 3, []captureWrite{capOut("ab€")}},
		{"repair grows past cap", 4, []captureWrite{capOut("\xff\xff")}},
		// Found by FuzzCapture: the first call grows past the cap through repair and
		// sets truncated, so the second trims stdout's incomplete tail instead.
		{"repair grows past cap with incomplete tail", 5, []captureWrite{capErr("0\x92"), capOut("\xc8")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.limit)
			for _, w := range tt.writes {
				c.add(w.stderr, []byte(w.data))
			}
			o1, e1, t1 := c.result()
			o2, e2, t2 := c.result()
			if o1 != o2 || e1 != e2 || t1 != t2 {
				t.Errorf("second result: got (%q, %q, %v), want (%q, %q, %v)", o2, e2, t2, o1, e1, t1)
			}
		})
	}
}

// TestCaptureConcurrent runs writers on both streams at once (for -race) and checks
// that the cap holds and no byte is lost below it.
func TestCaptureConcurrent(t *testing.T) {
	const writers, writes, limit = 8, 200, 1000
	for _, lim := range []int{limit, writers * writes * 3} {
		c := newCapture(lim)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				for range writes {
					c.add(i%2 == 1, []byte("abc"))
				}
			})
		}
		wg.Wait()
		o, e, trunc := c.result()
		total := writers * writes * 3
		if n := len(o) + len(e); n != min(lim, total) {
			t.Errorf("limit %d: got %d bytes, want %d", lim, n, min(lim, total))
		}
		if trunc != (total > lim) {
			t.Errorf("limit %d: truncated: got %v, want %v", lim, trunc, total > lim)
		}
		if c.total != int64(total) {
			t.Errorf("limit %d: total: got %d, want %d", lim, c.total, total)
		}
	}
}

// FuzzCapture feeds data to a capture in writes described by split: each byte of split
// is one write, of length split[i]&0x3f, to stderr when split[i]&0x80 is set. What is
// left of data after split is one last write to stdout.
func FuzzCapture(f *testing.F) {
	f.Add(uint16(10), []byte("hello world"), []byte{0x03, 0x82})
	f.Add(uint16(4), []byte("ab€cd"), []byte{0x02, 0x83})
	f.Add(uint16(3), []byte("😀"), []byte{})
	f.Add(uint16(4), []byte("\xff\xff"), []byte{0x81})
	f.Add(uint16(0), []byte("x"), []byte{0x80})
	f.Add(uint16(100), []byte("ok\xe2\x82"), []byte{0x81, 0x01})
	f.Fuzz(func(t *testing.T, limit uint16, data []byte, split []byte) {
		c := newCapture(int(limit))
		var wantOut, wantErr []byte
		rest := data
		write := func(stderr bool, p []byte) {
			c.add(stderr, p)
			if stderr {
				wantErr = append(wantErr, p...)
			} else {
				wantOut = append(wantOut, p...)
			}
		}
		for _, s := range split {
			n := min(int(s&0x3f), len(rest))
			write(s&0x80 != 0, rest[:n])
			rest = rest[n:]
		}
		write(false, rest)
		total := len(data)

		gotOut, gotErr, trunc := c.result()
		size := len(gotOut) + len(gotErr)

		if !utf8.ValidString(gotOut) || !utf8.ValidString(gotErr) {
			t.Fatalf("got %q, %q, want valid UTF-8", gotOut, gotErr)
		}
		if size > int(limit) {
			t.Fatalf("size: got %d bytes, want at most %d", size, limit)
		}
		if total > int(limit) && !trunc {
			t.Fatalf("truncated: got false for %d bytes offered under a cap of %d, want true", total, limit)
		}
		// What is kept is always the beginning of each stream, repaired.
		repOut, repErr := captureRepaired(string(wantOut)), captureRepaired(string(wantErr))
		if !strings.HasPrefix(repOut, gotOut) {
			t.Fatalf("stdout: got %q, want a prefix of %q", gotOut, repOut)
		}
		if !strings.HasPrefix(repErr, gotErr) {
			t.Fatalf("stderr: got %q, want a prefix of %q", gotErr, repErr)
		}
		fits := total <= int(limit) && len(repOut)+len(repErr) <= int(limit)
		if trunc != !fits {
			t.Fatalf("truncated: got %v, want %v (%d bytes offered, %d repaired, cap %d)",
				trunc, !fits, total, len(repOut)+len(repErr), limit)
		}
		if fits && (gotOut != repOut || gotErr != repErr) {
			t.Fatalf("got %q, %q, want the whole repaired input %q, %q", gotOut, gotErr, repOut, repErr)
		}
		valid := utf8.Valid(wantOut) && utf8.Valid(wantErr)
		if valid && total <= int(limit) && (gotOut != string(wantOut) || gotErr != string(wantErr)) {
			t.Fatalf("got %q, %q, want the input unchanged %q, %q", gotOut, gotErr, wantOut, wantErr)
		}
		// Valid input is cut at the cap, less at most one partial character per stream.
		if valid {
			if floor := min(total, int(limit)) - 2*(utf8.UTFMax-1); size < floor {
				t.Fatalf("size: got %d bytes of valid input (%d offered, cap %d), want at least %d", size, total, limit, floor)
			}
		}
	})
}

// TestCaptureStreamTails: progress keeps a tail of each stream apart, each bounded to
// tailSize bytes, valid UTF-8 even when the cut splits a character, and counting bytes
// past the output cap (a background run's tail shows what the program does now).
func TestCaptureStreamTails(t *testing.T) {
	c := newCapture(10)
	c.add(false, []byte("out1\n"))
	c.add(true, []byte("err1\n"))
	c.add(false, []byte("out2\n"))
	pr := c.progress()
	if pr.StdoutTail != "out1\nout2\n" || pr.StderrTail != "err1\n" || pr.Tail != "out1\nerr1\nout2\n" || pr.OutputBytes != 15 {
		t.Fatalf("progress = %+v", pr)
	}
	// A flood of multi-byte characters, then a last line: the tail is bounded, starts at
	// a line, and is valid UTF-8.
	c.add(false, []byte(strings.Repeat("é", 1000)+"\nlast\n"))
	c.add(true, []byte("x"+strings.Repeat("€", 400)))
	pr = c.progress()
	if pr.StdoutTail != "last\n" {
		t.Errorf("stdout tail = %q, want the last line", pr.StdoutTail)
	}
	if len(pr.StderrTail) > tailSize || !utf8.ValidString(pr.StderrTail) || strings.ContainsRune(pr.StderrTail, utf8.RuneError) {
		t.Errorf("stderr tail is %d bytes, valid %v: %q", len(pr.StderrTail), utf8.ValidString(pr.StderrTail), pr.StderrTail)
	}
	if !strings.HasSuffix(pr.StderrTail, "€€€") {
		t.Errorf("stderr tail does not end with the last bytes written: %q", pr.StderrTail)
	}
}
