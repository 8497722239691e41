package config

import (
	"fmt"
	"io"
)

// Secret is a value that must never be printed: every way of formatting it (fmt with
// any verb, %#v, JSON, text, zerolog's Interface and Stringer) shows "[redacted]"
// when it is set and "" when it is not. Reveal is the one way to the value, for the
// code that compares it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return string(s) }

// Set reports whether the secret is non-empty.
func (s Secret) Set() bool { return s != "" }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// Format is String whatever the verb, so that no verb (%d, %x, ...) reaches the bytes.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// MarshalJSON writes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText writes the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
