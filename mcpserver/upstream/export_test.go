package upstream

import "time"

// SetBackoff shortens m's reconnection backoff for tests.
func SetBackoff(m *Manager, min, max time.Duration) { m.minBackoff, m.maxBackoff = min, max }
