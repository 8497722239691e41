package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// What the server holds of one message from an upstream is bounded where it is read,
// before the SDK decodes it: a message over the limit is never held whole. An answer
// to a call over the limit is discarded and replaced with a JSON-RPC error answering
// the same call, so that the call fails and the session goes on for the others.
const (
	// framing is what one message may have beyond limits.max_result_bytes: the
	// JSON-RPC envelope and the stream's own framing.
	framing = 64 << 10
	// minMessage is the least a message may have, whatever max_result_bytes is:
	// the answers to initialize and tools/list must fit.
	minMessage = 1 << 20
	// codeTooLarge is the JSON-RPC error code of the stand-in answer (in the range
	// JSON-RPC leaves to implementations).
	codeTooLarge = -32099
)

// messageLimit is the most bytes one message from an upstream may have.
func messageLimit(l Limits) int { return max(l.MaxResultBytes, minMessage) + framing }

// tooLargeData is the stand-in answer's error data.
type tooLargeData struct {
	Bytes int64 `json:"bytes"` // the answer's size; -1: unknown, larger than the limit
}

// tooLargeReply is the JSON-RPC error that answers the call id in place of an answer
// of size bytes.
func tooLargeReply(id json.RawMessage, size int64) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": codeTooLarge, "message": "the answer was over the message limit and was discarded", "data": tooLargeData{Bytes: size}}})
	return b
}

// ResultTooLargeError is a call whose answer was over the message limit: the answer
// was discarded (never held whole) and the session kept.
type ResultTooLargeError struct {
	Server string
	Bytes  int64 // the answer's size; -1: unknown, larger than Limit
	Limit  int
}

func (e *ResultTooLargeError) Error() string {
	size := fmt.Sprintf("%d bytes", e.Bytes)
	if e.Bytes < 0 {
		size = fmt.Sprintf("more than %d bytes", e.Limit)
	}
	return fmt.Sprintf("upstream %q answered with %s, more than the %d one answer may have (limits.max_result_bytes in the upstreams file, at least 1 MiB, plus 64 KiB of framing); the answer was discarded",
		e.Server, size, e.Limit)
}

// lineLimiter passes newline-delimited JSON (a stdio upstream's output) through line
// by line. A line over limit bytes is discarded as it is read; an answer is replaced
// with tooLargeReply, anything else (a request or notification) dropped.
type lineLimiter struct {
	r     *bufio.Reader
	limit int
	buf   []byte
	line  []byte // what Read hands out next
}

func newLineLimiter(r io.Reader, limit int) *lineLimiter {
	return &lineLimiter{r: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	for len(l.line) == 0 {
		if err := l.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

// next reads the next line into l.line: as it came if it fits, else its stand-in
// (none for a message that answers no call).
func (l *lineLimiter) next() error {
	if cap(l.buf) > 64<<10 {
		l.buf = nil // a large message's buffer is not kept for the session's life
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > l.limit {
			return l.discard(chunk, err)
		}
		l.buf = append(l.buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && len(l.buf) == 0:
			return err
		}
		l.line = l.buf // a last line without its newline too; the error comes next time
		return nil
	}
}

// discard reads the rest of a line over the limit, keeping only its "id".
func (l *lineLimiter) discard(chunk []byte, err error) error {
	var s idScanner
	s.write(l.buf)
	size := int64(len(l.buf))
	for {
		s.write(chunk)
		size += int64(len(chunk))
		if err != bufio.ErrBufferFull {
			break
		}
		chunk, err = l.r.ReadSlice('\n')
	}
	l.buf = l.buf[:0]
	if err != nil {
		return err // the stream ended inside the message
	}
	if id, ok := s.answer(); ok {
		l.buf = append(tooLargeReply(id, size), '\n')
		l.line = l.buf
	}
	return nil
}

// maxID bounds the JSON-RPC id an idScanner keeps.
const maxID = 256

// idScanner reads one JSON object a byte at a time and keeps only its top-level "id"
// and whether it has a "method": which call a message too large to hold answers.
type idScanner struct {
	depth             int
	inStr, esc        bool
	wantKey, inKey    bool
	key               []byte // the member name being read (its first 8 bytes)
	capturing, method bool
	id                []byte
	idTooLong         bool
}

func (s *idScanner) write(p []byte) {
	for len(p) > 0 {
		if s.inStr && !s.esc && !s.inKey && !s.capturing {
			// Inside a string value (most of a large message): only a quote or a
			// backslash changes anything.
			i := bytes.IndexAny(p, `"\`)
			if i < 0 {
				return
			}
			p = p[i:]
		}
		s.byte(p[0])
		p = p[1:]
	}
}

func (s *idScanner) byte(c byte) {
	if s.capturing && !s.inStr && s.depth == 1 && (c == ',' || c == '}') {
		s.capturing = false
	}
	if s.capturing && (s.inStr || (c != ' ' && c != '\t' && c != '\n' && c != '\r')) {
		if len(s.id) < maxID {
			s.id = append(s.id, c)
		} else {
			s.idTooLong = true
		}
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr, s.inKey = false, false
		case s.inKey && len(s.key) < 8:
			s.key = append(s.key, c)
		}
		return
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.wantKey {
			s.inKey, s.wantKey, s.key = true, false, s.key[:0]
		}
	case '{', '[':
		s.depth++
		if s.depth == 1 {
			s.wantKey = c == '{'
		}
	case '}', ']':
		s.depth--
	case ':':
		if s.depth == 1 {
			switch string(s.key) {
			case "id":
				s.capturing, s.id = true, s.id[:0]
			case "method":
				s.method = true
			}
		}
	case ',':
		if s.depth == 1 {
			s.wantKey = true
		}
	}
}

// answer returns the id of the call the object answers: a number or a string, in a
// message without a method.
func (s *idScanner) answer() (json.RawMessage, bool) {
	if s.method || s.idTooLong || len(s.id) == 0 || !json.Valid(s.id) {
		return nil, false
	}
	if c := s.id[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return nil, false
	}
	return json.RawMessage(s.id), true
}

// sseLimiter passes a server-sent event stream through event by event. An event over
// limit bytes is discarded as it is read; on the stream that answers a call (id set)
// it is replaced with tooLargeReply to the call, which ends the stream; on the
// standalone stream it is dropped.
type sseLimiter struct {
	body  io.ReadCloser
	r     *bufio.Reader
	limit int
	id    json.RawMessage
	buf   []byte
	out   []byte
	ended bool
}

func newSSELimiter(body io.ReadCloser, limit int, id json.RawMessage) *sseLimiter {
	return &sseLimiter{body: body, r: bufio.NewReaderSize(body, 64<<10), limit: limit, id: id}
}

func (l *sseLimiter) Close() error { return l.body.Close() }

func (l *sseLimiter) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		if l.ended {
			return 0, io.EOF
		}
		if err := l.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

// next reads one event (its lines up to the blank line) into l.out, or its stand-in.
func (l *sseLimiter) next() error {
	if cap(l.buf) > 64<<10 {
		l.buf = nil
	}
	l.buf = l.buf[:0]
	over, size, lineBytes := false, int64(0), 0
	for {
		chunk, err := l.r.ReadSlice('\n')
		size += int64(len(chunk))
		lineBytes += len(chunk)
		if !over && len(l.buf)+len(chunk) > l.limit {
			over, l.buf = true, l.buf[:0]
		}
		if !over {
			l.buf = append(l.buf, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && (over || len(l.buf) == 0):
			return err
		case err != nil:
			l.out = l.buf // the last event without its blank line; the error comes next time
			return nil
		}
		blank := lineBytes <= 2 && len(bytes.TrimRight(chunk, "\r\n")) == 0
		lineBytes = 0
		switch {
		case !blank:
			continue // the event goes on
		case !over:
			l.out = l.buf
			return nil
		case l.id == nil:
			over, size, l.buf = false, 0, l.buf[:0] // the standalone stream: drop the event
			continue
		}
		l.out = []byte("event: message\ndata: " + string(tooLargeReply(l.id, size)) + "\n\n")
		l.ended = true
		return nil
	}
}
