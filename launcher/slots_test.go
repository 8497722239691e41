package launcher

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSlots: at most n run, at most maxQueue wait, a full queue refuses at once with
// ErrBusy, and a waiter whose context ends leaves the queue.
func TestSlots(t *testing.T) {
	s := newSlots(1, 1)
	release, err := s.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	waited := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		r, err := s.acquire(ctx)
		if err == nil {
			r()
		}
		waited <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		n := s.waiting
		s.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second caller never queued")
		}
	}

	start := time.Now()
	if _, err := s.acquire(t.Context()); !errors.Is(err, ErrBusy) {
		t.Errorf("third caller: got %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a full queue answered after %v, want at once", d)
	}

	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: got %v, want context.Canceled", err)
	}
	s.mu.Lock()
	if s.waiting != 0 {
		t.Errorf("queue after cancel: got %d waiting, want 0", s.waiting)
	}
	s.mu.Unlock()

	// With the queue free again, a waiter gets the slot once it is released.
	got := make(chan error, 1)
	go func() {
		r, err := s.acquire(t.Context())
		if err == nil {
			r()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	release()
	if err := <-got; err != nil {
		t.Errorf("waiter after release: got %v, want the slot", err)
	}
}
