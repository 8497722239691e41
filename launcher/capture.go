package launcher

import (
	"sync"
	"unicode/utf8"
)

// capture collects a program's stdout and stderr under one shared byte cap. Bytes past
// the cap are counted and dropped, never buffered, so a program that floods its output
// costs the server no memory; it keeps running until it exits or times out.
type capture struct {
	mu        sync.Mutex
	limit     int
	out, err  []byte
	total     int64 // every byte offered, kept or not
	truncated bool
	tail      []byte // the last tailSize bytes offered, for progress reports
	// outTail and errTail are tail for each stream alone (background runs show them).
	outTail, errTail []byte
}

const tailSize = 512

func newCapture(limit int) *capture { return &capture{limit: limit} }

func (c *capture) add(stderr bool, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	c.tail = keepTail(c.tail, p)
	if stderr {
		c.errTail = keepTail(c.errTail, p)
	} else {
		c.outTail = keepTail(c.outTail, p)
	}
	room := c.limit - len(c.out) - len(c.err)
	if len(p) > room {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	if stderr {
		c.err = append(c.err, p...)
	} else {
		c.out = append(c.out, p...)
	}
}

func (c *capture) markTruncated() {
	c.mu.Lock()
	c.truncated = true
	c.mu.Unlock()
}

// keepTail appends p to tail and keeps the last tailSize bytes.
func keepTail(tail, p []byte) []byte {
	tail = append(tail, p[max(len(p)-tailSize, 0):]...)
	if len(tail) > tailSize {
		tail = append(tail[:0], tail[len(tail)-tailSize:]...)
	}
	return tail
}

// progress is what the program has written so far: the bytes offered, and the last
// lines among them, of both streams and of each.
func (c *capture) progress() Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Progress{OutputBytes: c.total, Tail: lines(c.tail), StdoutTail: lines(c.outTail), StderrTail: lines(c.errTail)}
}

// lines is tail as valid UTF-8, starting at a line when the tail is full (the bytes
// before its first newline are the end of a line cut off).
func lines(tail []byte) string {
	if i := indexByte(tail, '\n'); i >= 0 && len(tail) == tailSize {
		tail = tail[i+1:]
	}
	// A cut at the front may have split a character too: its continuation bytes would
	// read as invalid.
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return repairUTF8(trimPartialRune(tail))
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// result returns stdout and stderr as valid UTF-8 whose lengths add up to at most the
// limit, and whether anything was cut.
func (c *capture) result() (stdout, stderr string, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.out, c.err
	truncated = c.truncated
	if truncated {
		// A cut may have split a character: drop the incomplete tail instead of
		// reporting it as invalid.
		out, err = trimPartialRune(out), trimPartialRune(err)
	}
	o, e := repairUTF8(out), repairUTF8(err)
	// Repair can grow the text (one invalid byte becomes three bytes of U+FFFD).
	for len(o)+len(e) > c.limit {
		truncated = true
		excess := len(o) + len(e) - c.limit
		if len(e) >= len(o) {
			e = cutRunes(e, max(len(e)-excess, 0))
		} else {
			o = cutRunes(o, max(len(o)-excess, 0))
		}
	}
	return o, e, truncated
}

// trimPartialRune removes a trailing sequence that is the beginning of a multi-byte
// character whose remaining bytes were cut off.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		start := len(b) - i
		if !utf8.RuneStart(b[start]) {
			continue
		}
		if !utf8.FullRune(b[start:]) {
			return b[:start]
		}
		return b
	}
	return b
}

// repairUTF8 replaces each byte that is not part of a valid UTF-8 sequence with U+FFFD.
func repairUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	buf := make([]byte, 0, len(b)+len(b)/2)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			buf = utf8.AppendRune(buf, utf8.RuneError)
		} else {
			buf = append(buf, b[:size]...)
		}
		b = b[size:]
	}
	return string(buf)
}

// cutRunes shortens valid UTF-8 s to at most n bytes without splitting a character.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
