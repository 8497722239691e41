package egress

import (
	"errors"
	"math"
	"sync"
	"testing"
)

func TestCounterConnections(t *testing.T) {
	c := NewCounter(3, 0)
	for i := range 3 {
		if err := c.Connect(); err != nil {
			t.Fatalf("Connect %d = %v, want nil", i+1, err)
		}
	}
	err := c.Connect()
	var d *Denial
	if !errors.As(err, &d) || d.Reason != ReasonConnectionLimit {
		t.Fatalf("Connect 4 = %v, want %s", err, ReasonConnectionLimit)
	}
	if got, want := err.Error(), "egress denied (connection_limit): cap of 3 connections per call reached"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if conns, _ := c.Used(); conns != 3 {
		t.Errorf("Used() connections = %d, want 3 (a refused one is not counted)", conns)
	}
}

func TestCounterBytes(t *testing.T) {
	c := NewCounter(0, 100)
	for _, tc := range []struct {
		n, grant int64
		refused  bool
	}{
		{0, 0, false}, {-5, 0, false}, {60, 60, false}, {40, 40, false}, {1, 0, true},
	} {
		grant, err := c.Take(tc.n)
		if grant != tc.grant || (err != nil) != tc.refused {
			t.Errorf("Take(%d) = %d, %v, want %d, refused %v", tc.n, grant, err, tc.grant, tc.refused)
		}
	}
	c = NewCounter(0, 100)
	c.Take(70)
	grant, err := c.Take(50)
	var d *Denial
	if grant != 30 || !errors.As(err, &d) || d.Reason != ReasonByteLimit {
		t.Errorf("Take(50) after 70 of 100 = %d, %v, want 30 and %s", grant, err, ReasonByteLimit)
	}
	if grant, err := c.Take(math.MaxInt64); grant != 0 || err == nil {
		t.Errorf("Take(MaxInt64) at the cap = %d, %v, want 0 and a denial", grant, err)
	}
	if _, b := c.Used(); b != 100 {
		t.Errorf("Used() bytes = %d, want 100", b)
	}
	c = NewCounter(0, math.MaxInt64-1)
	c.Take(10)
	if grant, err := c.Take(math.MaxInt64); grant != math.MaxInt64-11 || err == nil {
		t.Errorf("Take(MaxInt64) near the top = %d, %v, want the rest and a denial", grant, err)
	}
}

func TestCounterNoCaps(t *testing.T) {
	c := mustProfile(t, pypiFile, "api").NewCounter()
	for range 1000 {
		if err := c.Connect(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Take(1 << 30); err != nil {
			t.Fatal(err)
		}
	}
	if conns, b := c.Used(); conns != 1000 || b != 1000<<30 {
		t.Errorf("Used() = %d, %d, want 1000, %d", conns, b, int64(1000)<<30)
	}
}

// TestCounterConcurrent: many goroutines together never get past a cap (run with
// -race too).
func TestCounterConcurrent(t *testing.T) {
	c := mustProfile(t, pypiFile, "pypi").NewCounter() // 32 connections, 256 MiB
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns, granted int64
	for range 64 {
		wg.Go(func() {
			for range 20 {
				if c.Connect() == nil {
					mu.Lock()
					conns++
					mu.Unlock()
				}
				g, _ := c.Take(1 << 20)
				mu.Lock()
				granted += g
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if conns != 32 || granted != 268435456 {
		t.Errorf("granted %d connections and %d bytes, want 32 and 268435456", conns, granted)
	}
	if uc, ub := c.Used(); uc != conns || ub != granted {
		t.Errorf("Used() = %d, %d, want %d, %d", uc, ub, conns, granted)
	}
}

// TestCounterReset: a session's next call starts with its caps whole again.
func TestCounterReset(t *testing.T) {
	c := NewCounter(1, 100)
	if err := c.Connect(); err != nil {
		t.Fatal(err)
	}
	c.Take(100)
	if err := c.Connect(); err == nil {
		t.Fatal("second Connect before Reset: got nil, want the connection cap")
	}
	if grant, err := c.Take(1); grant != 0 || err == nil {
		t.Fatalf("Take(1) at the cap before Reset = %d, %v, want 0 and a denial", grant, err)
	}
	c.Reset()
	if conns, b := c.Used(); conns != 0 || b != 0 {
		t.Errorf("Used() after Reset = %d, %d, want 0, 0", conns, b)
	}
	if err := c.Connect(); err != nil {
		t.Errorf("Connect after Reset = %v, want nil", err)
	}
	if grant, err := c.Take(100); grant != 100 || err != nil {
		t.Errorf("Take(100) after Reset = %d, %v, want 100, nil", grant, err)
	}
	if err := c.Connect(); err == nil {
		t.Error("second Connect after Reset: got nil, want the cap again")
	}
}
