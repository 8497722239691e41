package mcpserver

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// expiringSessions opens fakeSessions' sessions whose sandbox ends at end (as one
// taken from the launcher's session pool does, sooner than asked).
type expiringSessions struct {
	*fakeSessions
	end time.Time
}

type expiringConn struct {
	SessionConn
	end time.Time
}

func (c expiringConn) Expires() time.Time { return c.end }

func (e expiringSessions) OpenSession(ctx context.Context, o launcher.SessionOptions) (SessionConn, error) {
	c, err := e.fakeSessions.OpenSession(ctx, o)
	return expiringConn{c, e.end}, err
}

// TestSessionEndsAtItsSandboxExpiry: a session whose sandbox ends sooner than its
// maximum lifetime (a pooled one's label counts from the sandbox's creation) reports
// that end in expires_at and max_lifetime_s, and its maximum lifetime is that.
func TestSessionEndsAtItsSandboxExpiry(t *testing.T) {
	end := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	o := sessionOpts(&fakeSessions{})
	o.IdleTimeout = 2 * time.Hour
	o.Backend = expiringSessions{o.Backend.(*fakeSessions), end}
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: o})
	c := createSession(t, cs)
	if c.ExpiresAt != end.UTC().Format(time.RFC3339) {
		t.Errorf("expires_at: got %s, want the sandbox's end %s", c.ExpiresAt, end.UTC().Format(time.RFC3339))
	}
	if c.MaxLifetimeS > 600 || c.MaxLifetimeS < 590 {
		t.Errorf("max_lifetime_s: got %d, want about 600 (the sandbox's end), not the configured 3600", c.MaxLifetimeS)
	}
}
