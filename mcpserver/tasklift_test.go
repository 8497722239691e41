package mcpserver

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// liftByDecoding is the lift as a decode and an encode make it: the reference
// spliceTask must agree with, on what the SDK then decodes.
func liftByDecoding(params []byte) ([]byte, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p["task"] == nil {
		return params, false
	}
	var meta map[string]json.RawMessage
	if p["_meta"] != nil && json.Unmarshal(p["_meta"], &meta) != nil {
		return params, false
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaTask] = p["task"]
	delete(p, "task")
	p["_meta"], _ = json.Marshal(meta)
	b, _ := json.Marshal(p)
	return b, true
}

// decoded is v as the SDK's decoder sees it (maps: the last of duplicate keys wins).
func decoded(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("the lift made invalid JSON %q: %v", b, err)
	}
	return v
}

func TestSpliceTask(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"exec","arguments":{"code":"x"},"task":{"ttl":5}}`, `{"name":"exec","arguments":{"code":"x"},"_meta":{"mcp-exec/task":{"ttl":5}}}`},
		{` { "task" : {} , "_meta" : { "a" : 1 } } `, `{"_meta" : { "a" : 1 ,"mcp-exec/task":{}}}`},
		{`{"_meta":{},"task":null}`, `{"_meta":{"mcp-exec/task":null}}`},
		{`{"_meta":null,"task":1}`, `{"_meta":{"mcp-exec/task":1}}`},
		{`{"\u0074ask":{"ttl":1},"arguments":{"code":"\"task\": {"}}`, `{"arguments":{"code":"\"task\": {"},"_meta":{"mcp-exec/task":{"ttl":1}}}`},
		{`{"_meta":{"mcp-exec/task":"client's"},"task":"lifted"}`, `{"_meta":{"mcp-exec/task":"client's","mcp-exec/task":"lifted"}}`},
	} {
		got, ok := spliceTask(nil, []byte(tc.in))
		if !ok || string(got) != tc.want {
			t.Errorf("spliceTask(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
		ref, _ := liftByDecoding([]byte(tc.in))
		if !reflect.DeepEqual(decoded(t, got), decoded(t, ref)) {
			t.Errorf("spliceTask(%s) = %s decodes unlike the decoding lift's %s", tc.in, got, ref)
		}
	}
	for _, in := range []string{`{"name":"exec"}`, `{"_meta":5,"task":{}}`, `[{"task":1}]`, `"task"`, `{"arguments":{"task":1}}`} {
		if got, ok := spliceTask(nil, []byte(in)); ok {
			t.Errorf("spliceTask(%s) = %s, want no lift", in, got)
		}
	}
}

func TestLiftBody(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"code":"` + strings.Repeat("x", 1<<20) + `"},"task":{"ttl":5}}}`
	got, ok := liftBody([]byte(in))
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
			Task json.RawMessage            `json:"task"`
		} `json:"params"`
	}
	if !ok || json.Unmarshal(got, &m) != nil || string(m.Params.Meta[metaTask]) != `{"ttl":5}` || m.Params.Task != nil {
		t.Fatalf("liftBody: %v, %.200s", ok, got)
	}
	body := []byte(in)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 4 {
		liftBody(body)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 4; per > uint64(len(body))*5/4 {
		t.Errorf("liftBody of a %d-byte call allocated %d bytes, want one copy of the body", len(body), per)
	}
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"task":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"code":"task"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{}}}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{}}`, // invalid
	} {
		if got, ok := liftBody([]byte(in)); ok || string(got) != in {
			t.Errorf("liftBody(%s) = %s, %v; want it unchanged", in, got, ok)
		}
	}
}

// FuzzSpliceTask: on any valid JSON, spliceTask lifts exactly when the decoding lift
// does, and the SDK decodes the same params from both.
func FuzzSpliceTask(f *testing.F) {
	for _, s := range []string{`{"task":{"ttl":5},"arguments":{"code":"x"}}`, `{"_meta":{"a":[1,{"b":"}"}]},"task":"\\"}`, `{"task":1,"task":2,"_meta":null}`, `{}`, `[]`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		got, ok := spliceTask(nil, []byte(s))
		ref, refOK := liftByDecoding([]byte(s))
		if ok != refOK {
			t.Fatalf("spliceTask(%s): lifted %v, the decoding lift %v", s, ok, refOK)
		}
		if ok && len(got) > len(s)+LiftTaskGrowth {
			t.Fatalf("spliceTask(%s) = %s, %d bytes more than LiftTaskGrowth allows", s, got, len(got)-len(s))
		}
		if ok && !reflect.DeepEqual(decoded(t, got), decoded(t, ref)) {
			t.Fatalf("spliceTask(%s) = %s, decodes unlike %s", s, got, ref)
		}
	})
}
