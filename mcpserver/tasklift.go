package mcpserver

import (
	"bytes"
	"encoding/json"
)

// The lift of params.task into params._meta (LiftTask) works on the message's bytes:
// the task and the _meta object are spliced, the rest (the program's code, its files)
// copied once, never decoded. A call at the request limit costs the lift one copy of
// its body, not the several a decode and an encode make, so that the body budget's
// bound on the server's memory holds for task-augmented calls too.

// LiftTaskGrowth bounds the bytes the lift adds to a message (a _meta object around the
// task's value, less the "task" key it replaces): a body limit behind LiftTaskHandler
// allows that much more than the one in front of it.
const LiftTaskGrowth = 64

// spliceTask appends to dst the JSON object params (valid JSON) with its "task"
// members removed and the last one's value put into its last "_meta" object under
// metaTask (a null or missing _meta becomes one). ok is false, and dst unchanged, when
// params is not an object, has no "task", or has a _meta that is not an object (the
// SDK refuses that call).
func spliceTask(dst, params []byte) (_ []byte, ok bool) {
	i := skipSpace(params, 0)
	if i >= len(params) || params[i] != '{' {
		return dst, false
	}
	task, meta := span{-1, -1, -1}, span{-1, -1, -1}
	eachMember(params, i, func(k []byte, v span) {
		switch {
		case keyIs(k, "task"):
			task = v
		case keyIs(k, "_meta"):
			meta = v
		}
	})
	if task.start < 0 {
		return dst, false
	}
	metaNull := meta.start >= 0 && string(params[meta.start:meta.end]) == "null"
	if meta.start >= 0 && !metaNull && params[meta.start] != '{' {
		return dst, false
	}
	entry := func(dst []byte) []byte {
		dst = append(dst, `"`+metaTask+`":`...)
		return append(dst, params[task.start:task.end]...)
	}
	dst = append(dst, '{')
	first := true
	eachMember(params, i, func(k []byte, v span) {
		if keyIs(k, "task") {
			return
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if v != meta {
			dst = append(dst, params[v.key:v.end]...)
			return
		}
		dst = append(dst, params[v.key:v.start]...)
		if metaNull {
			dst = append(entry(append(dst, '{')), '}')
			return
		}
		// The entry goes last in _meta, so that it wins over one the client put there.
		closing := v.end - 1
		dst = append(dst, params[v.start:closing]...)
		if j := skipSpace(params, v.start+1); j != closing {
			dst = append(dst, ',')
		}
		dst = append(entry(dst), '}')
	})
	if meta.start < 0 {
		if !first {
			dst = append(dst, ',')
		}
		dst = append(entry(append(dst, `"_meta":{`...)), '}')
	}
	return append(dst, '}'), true
}

// liftBody is a JSON-RPC message (b, as received) with its tools/call's params.task
// lifted (spliceTask), and true; or b and false when there is nothing to lift.
func liftBody(b []byte) ([]byte, bool) {
	if !bytes.Contains(b, taskKey) || !json.Valid(b) {
		return b, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return b, false // a batch, or no request: not lifted
	}
	method, params := span{-1, -1, -1}, span{-1, -1, -1}
	eachMember(b, i, func(k []byte, v span) {
		switch {
		case keyIs(k, "method"):
			method = v
		case keyIs(k, "params"):
			params = v
		}
	})
	if method.start < 0 || params.start < 0 || !keyIs(b[method.start:method.end], "tools/call") {
		return b, false
	}
	out := make([]byte, 0, len(b)+len(metaTask)+16)
	out = append(out, b[:params.start]...)
	out, ok := spliceTask(out, b[params.start:params.end])
	if !ok {
		return b, false
	}
	return append(out, b[params.end:]...), true
}

var taskKey = []byte(`"task"`)

// span is a member of an object: its key from b[key], its value b[start:end].
type span struct{ key, start, end int }

// eachMember calls f with the key (quoted, as in b) and the span of each member of
// the object at b[i], which must be valid JSON.
func eachMember(b []byte, i int, f func(k []byte, v span)) {
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		ks := i
		ke := skipValue(b, ks)
		i = skipSpace(b, ke)
		i = skipSpace(b, i+1) // the colon
		ve := skipValue(b, i)
		f(b[ks:ke], span{ks, i, ve})
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
}

// skipValue returns the end of the JSON value at b[i] (valid JSON, no space before it).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// keyIs reports whether the JSON value q (valid) is the string s. Only a string with
// escapes is decoded, and only when it could be s.
func keyIs(q []byte, s string) bool {
	if len(q) < 2 || q[0] != '"' {
		return false
	}
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1:len(q)-1]) == s
	}
	if len(q) > 6*len(s)+2 {
		return false // longer than s with every byte escaped
	}
	var v string
	return json.Unmarshal(q, &v) == nil && v == s
}
