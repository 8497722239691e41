package main

import (
	"testing"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// TestMain fails the package's tests if any goroutine they started is still running
// at the end (e2e.Main says which of client-go's are let run).
func TestMain(m *testing.M) { e2e.Main(m) }
