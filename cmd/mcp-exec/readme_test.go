package main

import (
	"bytes"
	"os"
	"testing"
)

// TestREADMEShort: README.md stays an index (what it is, the two commands, a client,
// the tool, links into docs/), at most 250 lines; topics live in docs/.
func TestREADMEShort(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move the topic into its page under docs/ and link it", n)
	}
}
