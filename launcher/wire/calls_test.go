package wire

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type callMsg struct {
	ID   uint32
	Body string
	Nil  bool
	Size int
}

func callOf(id uint32, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, body...)
}

// TestCallsChunked: calls come out whole and in order whatever the C frames' sizes,
// and a call over the cap comes as nil with its size, unbuffered.
func TestCallsChunked(t *testing.T) {
	big := strings.Repeat("x", 40)
	stream := append(append(append(callOf(1, `{"a":1}`), callOf(2, "")...), callOf(3, big)...), callOf(4, `{}`)...)
	want := []callMsg{{1, `{"a":1}`, false, 7}, {2, "", false, 0}, {3, "", true, 40}, {4, `{}`, false, 2}}
	for chunk := 1; chunk <= len(stream); chunk++ {
		var got []callMsg
		c := NewCalls(32, func(id uint32, body []byte, size int) {
			got = append(got, callMsg{id, string(body), body == nil, size})
		})
		for p := stream; len(p) > 0; {
			n := min(chunk, len(p))
			c.Add(p[:n])
			p = p[n:]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("chunks of %d: calls mismatch (-want +got):\n%s", chunk, diff)
		}
		if c.body != nil {
			t.Fatalf("chunks of %d: got %d bytes held after the last call, want none", chunk, len(c.body))
		}
	}
}
