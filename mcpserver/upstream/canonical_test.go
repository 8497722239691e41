package upstream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// callWith is a call message with args as its arguments.
func callWith(args string) []byte {
	return []byte(`{"server": "s", "tool": "t", "arguments": ` + args + `}`)
}

// TestReadCallDuplicateKeys: a key twice in one object is refused wherever it is,
// keys comparing as decoded ("to" and "\u0074o" are one key), and the message says
// which key and where.
func TestReadCallDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"top of the arguments", string(callWith(`{"to": "boss@corp.example", "to": "attacker@evil.example"}`)), `the key "to" appears twice in one object (in "arguments")`},
		{"padded with spaces", string(callWith(`{"to": "boss@corp.example", "body": "weekly report"` + strings.Repeat(" ", 2000) + `, "to": "attacker@evil.example", "body": "EXFIL"}`)), `the key "body" appears twice`},
		{"unicode escape", string(callWith(`{"to": "boss@corp.example", "\u0074o": "attacker@evil.example"}`)), `the key "to" appears twice`},
		{"escaped both ways", string(callWith(`{"t\u006f": 1, "\u0074\u006F": 2}`)), `the key "to" appears twice`},
		{"nested", string(callWith(`{"mail": {"head": {"to": "a", "cc": "b", "to": "c"}}}`)), `the key "to" appears twice in one object (in "arguments.mail.head")`},
		{"in an array", string(callWith(`{"mails": [{"to": "a"}, {"to": "b", "to": "c"}]}`)), `the key "to" appears twice in one object (in "arguments.mails")`},
		{"deep", string(callWith(strings.Repeat(`{"a": `, 40) + `{"x": 1, "x": 1}` + strings.Repeat(`}`, 40))), `the key "x" appears twice`},
		{"the envelope", `{"server": "s", "tool": "t", "tool": "u", "arguments": {}}`, `the key "tool" appears twice in one object (at the top)`},
		// Invalid UTF-8 decodes to U+FFFD, so two keys that differ only there are one.
		{"invalid UTF-8", string(callWith("{\"to\xff\": 1, \"to\xfe\": 2}")), `appears twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := readCall([]byte(tc.body))
			if err == nil {
				t.Fatalf("readCall: got arguments %s, want an error", c.args)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readCall: got %q, want %q in it", err, tc.want)
			}
		})
	}
}

// TestReadCallCanonical: what the human is shown and the upstream gets is one
// encoding, whatever spelling the program chose: no whitespace, keys in order,
// escapes decoded where the character prints and made where it does not.
func TestReadCallCanonical(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string
	}{
		{"whitespace padding", `{"to": "boss@corp.example", "body": "weekly report"` + strings.Repeat(" ", 2000) + "\n\t}", `{"body":"weekly report","to":"boss@corp.example"}`},
		{"keys in byte order", `{"b": 1, "a": {"z": [3, 2, {"y": 1, "x": 2}], "é": 1, "A": 0}}`, `{"a":{"A":0,"z":[3,2,{"x":2,"y":1}],"é":1},"b":1}`},
		{"escapes that print are decoded", `{"\u0074o": "\u0062oss\u0040corp.example", "s": "\/\u00e9\ud83d\ude00"}`, `{"s":"/é😀","to":"boss@corp.example"}`},
		{"what does not print is escaped", "{\"x\": \"a\u202eb\u200bc\u2028d\u00a0e\\u0007f\u007fg\"}", `{"x":"a\u202eb\u200bc\u2028d\u00a0e\u0007f\u007fg"}`},
		{"a tag character above the BMP", "{\"x\": \"\U000e0041\"}", `{"x":"\udb40\udc41"}`},
		{"quotes, backslashes, controls", `{"x": "\"\\\n\r\t\b\f"}`, `{"x":"\"\\\n\r\t\u0008\u000c"}`},
		{"html characters", `{"x": "<a href=\"?a=1&b=2\">"}`, `{"x":"\u003ca href=\"?a=1\u0026b=2\"\u003e"}`},
		{"numbers as written", `{"a": 1.0, "b": 1e2, "c": -0, "d": 12345678901234567890123}`, `{"a":1.0,"b":1e2,"c":-0,"d":12345678901234567890123}`},
		{"literals", `{"a": true, "b": false, "c": null, "d": [], "e": {}}`, `{"a":true,"b":false,"c":null,"d":[],"e":{}}`},
		{"null is the empty object", `null`, `{}`},
		{"invalid UTF-8 in a value", "{\"x\": \"a\xffb\"}", `{"x":"a` + "\ufffd" + `b"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := readCall(callWith(tc.args))
			if err != nil {
				t.Fatalf("readCall: %v", err)
			}
			if string(c.args) != tc.want {
				t.Errorf("canonical arguments:\n got %s\nwant %s", c.args, tc.want)
			}
			checkCanonical(t, c.args)
		})
	}
	c, err := readCall([]byte(`{"tool": "t", "server": "s"}`))
	if err != nil || string(c.args) != "{}" || c.server != "s" || c.tool != "t" {
		t.Errorf("no arguments: got %+v, %v; want s, t, {}", c, err)
	}
}

// checkCanonical checks what makes an encoding canonical: it reads back to itself,
// and the go-sdk's encoder (encoding/json, which compacts a RawMessage and escapes
// HTML characters) sends it byte for byte.
func checkCanonical(t *testing.T, c []byte) {
	t.Helper()
	v, err := decodeCanonical(c)
	if err != nil {
		t.Fatalf("reading %s back: %v", c, err)
	}
	if again := appendCanonical(nil, v); !bytes.Equal(again, c) {
		t.Errorf("not a fixed point:\n%s\n%s", c, again)
	}
	wire, err := json.Marshal(struct {
		Arguments any `json:"arguments"`
	}{json.RawMessage(c)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"arguments":` + string(c) + `}`; string(wire) != want {
		t.Errorf("encoding/json sends\n%s\nnot\n%s", wire, want)
	}
}

// TestReadCallRefused: what is not one JSON object of the call's shape is refused.
func TestReadCallRefused(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `{"server": `, "not valid JSON"},
		{"trailing data", `{"server": "s", "tool": "t"} {}`, "more follows it"},
		{"not an object", `["s", "t"]`, "not a JSON object"},
		{"server not a string", `{"server": 1, "tool": "t"}`, `"server" is not a string`},
		{"arguments an array", string(callWith(`[1, 2]`)), "the arguments are not a JSON object"},
		{"arguments a string", string(callWith(`"{}"`)), "the arguments are not a JSON object"},
		{"too deep", string(callWith(strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70))), "nested deeper than 64 levels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readCall([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("readCall(%.80s): got %v, want %q", tc.body, err, tc.want)
			}
		})
	}
	// 62 levels of arguments within the envelope's one: read.
	if _, err := readCall(callWith(strings.Repeat(`{"a": `, 62) + `1` + strings.Repeat(`}`, 62))); err != nil {
		t.Errorf("62 levels: %v", err)
	}
}

// FuzzReadCall: whatever a program sends, arguments that are read are canonical, and
// mean what encoding/json reads in the message (which has no key twice, or it would
// have been refused).
func FuzzReadCall(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"to": "x", "to": "y"}`, `{"\u0074o": "\u202e"}`, `[{"a": {"b": null}}]`, `{"x": "<&>"}`, `{"n": 1e400}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		body := callWith(args)
		c, err := readCall(body)
		if err != nil {
			return
		}
		checkCanonical(t, c.args)
		var sent, meant map[string]any
		dec := json.NewDecoder(bytes.NewReader(c.args))
		dec.UseNumber()
		if err := dec.Decode(&sent); err != nil {
			t.Fatalf("the canonical arguments %q do not decode: %v", c.args, err)
		}
		var msg struct {
			Arguments map[string]any `json:"arguments"`
		}
		dec = json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&msg); err != nil {
			t.Fatalf("readCall took %q, encoding/json refuses it: %v", body, err)
		}
		if meant = msg.Arguments; meant == nil {
			meant = map[string]any{}
		}
		if !reflect.DeepEqual(sent, meant) {
			t.Errorf("the canonical arguments mean %v, the message %v", sent, meant)
		}
	})
}
