package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrBusy: every sandbox slot is taken and the queue is full; the caller should retry.
var ErrBusy = errors.New("busy: every sandbox slot is taken and the queue is full, try again shortly")

// slots bounds the sandboxes running at once, with a bounded queue of waiters. A
// waiter whose context ends leaves the queue.
type slots struct {
	run      chan struct{}
	mu       sync.Mutex
	waiting  int
	maxQueue int
}

func newSlots(n, maxQueue int) *slots {
	return &slots{run: make(chan struct{}, n), maxQueue: max(maxQueue, 0)}
}

func (s *slots) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-s.run }
	select {
	case s.run <- struct{}{}:
		return release, nil
	default:
	}
	s.mu.Lock()
	if s.waiting >= s.maxQueue {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w (%d running, %d queued)", ErrBusy, cap(s.run), s.maxQueue)
	}
	s.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	select {
	case s.run <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a sandbox slot: %w", ctx.Err())
	}
}
