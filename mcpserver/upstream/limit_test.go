package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
)

// big is an n-byte JSON string's content.
func big(n int) string { return strings.Repeat("x", n) }

// TestLineLimiter: lines that fit pass as they came; an answer over the limit becomes
// the error answering its id, wherever the id is in the object; a request or a
// notification over it is dropped; the lines after go on.
func TestLineLimiter(t *testing.T) {
	const limit = 100
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"t":"` + big(200) + `"}}`,
		`{"result":{"t":"` + big(200) + `","id":"no","s":"\"id\":9"},"jsonrpc":"2.0","id":"abc"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"t":"` + big(200) + `"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"t":"` + big(200) + `"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{}}`,
	}
	in := strings.Join(lines, "\n") + "\n"
	out, err := io.ReadAll(newLineLimiter(strings.NewReader(in), limit))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		string(tooLargeReply(json.RawMessage(`7`), int64(len(lines[1])+1))) + "\n" +
		string(tooLargeReply(json.RawMessage(`"abc"`), int64(len(lines[2])+1))) + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestLineLimiterMemory: a 40 MB answer costs the reader a few times its limit (the
// buffer growing to it, the stand-in), not its size.
func TestLineLimiterMemory(t *testing.T) {
	const size, limit = 40 << 20, 1 << 20
	r := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":5,"result":{"t":"`), &repeat{'x', size},
		strings.NewReader(`"}}`+"\n"+`{"jsonrpc":"2.0","id":6,"result":{}}`+"\n"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := io.ReadAll(newLineLimiter(r, limit))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"code":-32099`)) || !bytes.Contains(out, []byte(`"id":5`)) || !bytes.HasSuffix(out, []byte(`{"jsonrpc":"2.0","id":6,"result":{}}`+"\n")) {
		t.Errorf("got %q", out)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 8*limit {
		t.Errorf("reading a %d-byte line allocated %d bytes, want at most %d", size, n, 8*limit)
	}
}

// repeat is n bytes of c, made as they are read.
type repeat struct {
	c byte
	n int
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	if len(p) > 0 {
		p[0] = r.c
		for i := 1; i < len(p); i *= 2 {
			copy(p[i:], p[:i])
		}
	}
	r.n -= len(p)
	return len(p), nil
}

// TestSSELimiter: events that fit pass as they came; on a call's stream an event
// over the limit becomes the error answering the call, and the stream ends; on the
// standalone stream it is dropped and the stream goes on.
func TestSSELimiter(t *testing.T) {
	const limit = 100
	small := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
	large := "id: 2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"t\":\"" + big(300) + "\"}}\n\n"
	after := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n\n"
	for _, tc := range []struct {
		name string
		id   json.RawMessage
		want string
	}{
		{"call", json.RawMessage(`4`), small + "event: message\ndata: " + string(tooLargeReply(json.RawMessage(`4`), int64(len(large)))) + "\n\n"},
		{"standalone", nil, small + after},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := io.ReadAll(newSSELimiter(io.NopCloser(strings.NewReader(small+large+after)), limit, tc.id))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", out, tc.want)
			}
		})
	}
}
