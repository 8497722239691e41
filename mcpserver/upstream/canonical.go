package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A call message is read into one canonical value, and its arguments go upstream in
// the canonical encoding, the same bytes a human approving the call is shown. Reading
// refuses what a reader elsewhere could take otherwise: a key twice in one object (at
// any depth; keys compare as decoded, so "to" and "\u0074o" are the same key), and
// anything after the value.
//
// The encoding has no whitespace, keys in byte order, numbers as written, and strings
// with every character that does not print as itself escaped (controls, format and
// separator characters, such as right-to-left overrides and zero-width spaces), and <,
// > and & too: the go-sdk's encoder escapes those, so escaping them here keeps what
// goes on the wire byte for byte what was shown.

// maxDepth bounds the nesting of a call message, so that reading one recurses a
// bounded number of times.
const maxDepth = 64

// object is a JSON object read canonically: its members in key order, no key twice.
type object []member

type member struct {
	key string
	val any
}

// decodeCanonical reads one JSON value: nil, bool, json.Number, string, []any or
// object.
func decodeCanonical(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not one JSON value: more follows it")
	}
	return v, nil
}

func readValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidJSON(err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth == maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	if d == '[' {
		arr := []any{}
		for dec.More() {
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, invalidJSON(err)
	}
	obj := object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidJSON(err)
		}
		key := tok.(string) // the decoder allows only a string here
		v, err := readValue(dec, depth+1)
		if d, ok := err.(*duplicateKey); ok {
			d.in = append(d.in, key)
		}
		if err != nil {
			return nil, err
		}
		obj = append(obj, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, invalidJSON(err)
	}
	slices.SortStableFunc(obj, func(a, b member) int { return strings.Compare(a.key, b.key) })
	for i := 1; i < len(obj); i++ {
		if obj[i].key == obj[i-1].key {
			return nil, &duplicateKey{key: obj[i].key}
		}
	}
	return obj, nil
}

// duplicateKey is a key found twice in one object; in holds the keys of the objects
// around it, innermost first (gathered on the way out, so that reading builds no
// path).
type duplicateKey struct {
	key string
	in  []string
}

func (d *duplicateKey) Error() string {
	where := "at the top"
	if len(d.in) > 0 {
		path := slices.Clone(d.in)
		slices.Reverse(path)
		where = "in " + shortQuote(strings.Join(path, "."))
	}
	return fmt.Sprintf("the key %s appears twice in one object (%s)", shortQuote(d.key), where)
}

func invalidJSON(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("not valid JSON: %v", err)
}

// maxShown bounds what a message quotes of a program's strings.
const maxShown = 64

// shortQuote quotes s for a message: at most maxShown bytes of it, and its size when
// it is longer.
func shortQuote(s string) string {
	if len(s) <= maxShown {
		return strconv.Quote(s)
	}
	return strconv.Quote(strings.ToValidUTF8(s[:maxShown], "")) + fmt.Sprintf("... (%d bytes)", len(s))
}

// appendCanonical appends v's canonical encoding to b.
func appendCanonical(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		if v {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case json.Number:
		return append(b, v...)
	case string:
		return appendString(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, e)
		}
		return append(b, ']')
	case object:
		b = append(b, '{')
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m.key)
			b = append(b, ':')
			b = appendCanonical(b, m.val)
		}
		return append(b, '}')
	}
	panic(fmt.Sprintf("upstream: appendCanonical of %T", v)) // decodeCanonical makes no other type
}

// appendString appends s as a JSON string. s is valid UTF-8: the decoder replaced
// every invalid byte with U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '<' || r == '>' || r == '&' || !unicode.IsPrint(r):
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				b = append(b, '\\', 'u', hex[r1>>12], hex[r1>>8&15], hex[r1>>4&15], hex[r1&15])
				r = r2
			}
			b = append(b, '\\', 'u', hex[r>>12], hex[r>>8&15], hex[r>>4&15], hex[r&15])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + r>>10&0x3ff, 0xdc00 + r&0x3ff
}

// call is one call message, read canonically.
type call struct {
	server, tool string
	args         []byte // canonical
}

// readCall reads a call message: {"server": string, "tool": string, "arguments":
// object or null}.
func readCall(body []byte) (call, error) {
	v, err := decodeCanonical(body)
	if err != nil {
		return call{}, err
	}
	obj, ok := v.(object)
	if !ok {
		return call{}, errors.New("not a JSON object")
	}
	var c call
	var args any
	for _, m := range obj {
		s, isString := m.val.(string)
		switch m.key {
		case "server":
			c.server = s
		case "tool":
			c.tool = s
		case "arguments":
			args = m.val
			continue
		default:
			continue
		}
		if !isString {
			return call{}, fmt.Errorf("%q is not a string", m.key)
		}
	}
	c.args, err = canonicalArguments(args)
	return c, err
}

// canonicalArguments is the canonical encoding of a call's arguments: an object;
// absent or null is the empty object.
func canonicalArguments(v any) ([]byte, error) {
	switch v.(type) {
	case nil:
		return []byte("{}"), nil
	case object:
		return appendCanonical(nil, v), nil
	}
	return nil, errors.New("the arguments are not a JSON object")
}
