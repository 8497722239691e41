// Package syncbuf has the one output and log sink the tests across the module share:
// goroutines (a process's output copier, a logger, a server's stderr) write to it
// while the test reads it. It imports nothing of the module, so that any package's
// tests can use it, the launcher's own and the backends' included.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what goroutines write, for the test to read at any time. The zero
// value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
