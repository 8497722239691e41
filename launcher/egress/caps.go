package egress

import (
	"fmt"
	"sync/atomic"
)

// Counter counts one sandbox's use during one call against its profile's caps:
// connections opened and bytes carried both ways. It is safe for concurrent use: it
// counts with compare-and-swap, so concurrent connections of one sandbox never get
// past a cap together. A zero cap means no cap.
type Counter struct {
	maxConns, maxBytes int64
	conns, bytes       atomic.Int64
}

// NewCounter returns a Counter with the profile's caps.
func (p *Profile) NewCounter() *Counter { return NewCounter(p.maxConns, p.maxBytes) }

// NewCounter returns a Counter with the given caps; 0 means no cap.
func NewCounter(maxConnections, maxBytes int64) *Counter {
	return &Counter{maxConns: maxConnections, maxBytes: maxBytes}
}

// Connect counts one more connection, or refuses it past the cap with a *Denial of
// ReasonConnectionLimit. A refused connection is not counted.
func (c *Counter) Connect() error {
	for {
		n := c.conns.Load()
		if c.maxConns > 0 && n >= c.maxConns {
			return &Denial{Reason: ReasonConnectionLimit, Detail: fmt.Sprintf("cap of %d connections per call reached", c.maxConns)}
		}
		if c.conns.CompareAndSwap(n, n+1) {
			return nil
		}
	}
}

// Take asks to carry n more bytes and returns how many may be carried: n, or what is
// left under the cap along with a *Denial of ReasonByteLimit, after which the
// connection is to be closed once the granted bytes are through. n < 0 takes nothing.
func (c *Counter) Take(n int64) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	for {
		used := c.bytes.Load()
		grant := n
		if c.maxBytes > 0 && n > c.maxBytes-used { // no overflow: used <= maxBytes
			grant = max(c.maxBytes-used, 0)
		}
		if c.bytes.CompareAndSwap(used, used+grant) {
			if grant < n {
				return grant, &Denial{Reason: ReasonByteLimit, Detail: fmt.Sprintf("cap of %d bytes per call reached", c.maxBytes)}
			}
			return grant, nil
		}
	}
}

// Reset starts a new call: the connections and bytes counted so far are forgotten.
// A session's channel serves many calls, and its caps count per call
// (launcher.Session resets them as each call begins).
func (c *Counter) Reset() {
	c.conns.Store(0)
	c.bytes.Store(0)
}

// Used returns the connections opened and the bytes carried so far, for the log line.
func (c *Counter) Used() (connections, bytes int64) {
	return c.conns.Load(), c.bytes.Load()
}
