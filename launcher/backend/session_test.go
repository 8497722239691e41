package backend

import (
	"testing"
	"time"
)

// TestSessionRecordDue: the one rule that ends a session, with the reasons its owner
// reads, for a record in a server's memory (Lifetime known, no lapsing claim) and one in
// a pod's annotations (a claim that lapses).
func TestSessionRecordDue(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	base := SessionRecord{Idle: time.Minute, IdleUntil: now.Add(time.Second), Expires: now.Add(time.Hour)}
	for _, c := range []struct {
		name string
		edit func(*SessionRecord)
		want string
	}{
		{"fresh", func(*SessionRecord) {}, ""},
		{"idle", func(r *SessionRecord) { r.IdleUntil = now }, "expired: it was idle for more than 1m0s"},
		{"idle but busy", func(r *SessionRecord) { r.IdleUntil, r.Busy = now, true }, ""},
		{"lifetime", func(r *SessionRecord) { r.Expires = now }, "expired: it reached its maximum lifetime"},
		{"lifetime known", func(r *SessionRecord) { r.Expires, r.Lifetime = now, time.Hour }, "expired: it reached its maximum lifetime of 1h0m0s"},
		{"claim running", func(r *SessionRecord) { r.Busy, r.BusyUntil = true, now.Add(time.Second) }, ""},
		{"claim lapsed", func(r *SessionRecord) { r.Busy, r.BusyUntil = true, now }, "ended: the server replica running its last call went away during it"},
		{"ended", func(r *SessionRecord) { r.Ended, r.Expires = true, now }, "ended: its interpreter's container ended"},
	} {
		r := base
		c.edit(&r)
		if got := r.Due(now); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if got := base.ExpiresAt(); !got.Equal(base.IdleUntil) {
		t.Errorf("ExpiresAt: got %s, want the idle deadline", got)
	}
}
