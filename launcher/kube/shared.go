package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Shared sessions: a session's pod that every replica of the server can serve, so that
// clients behind a load balancer need no affinity. The pod is the store: it is found by
// a label whose value is a truncated hash of the handle (backend.LabelSessionKey), and
// carries the session's state in annotations (below), which each call claims by an
// update conditioned on the pod's resourceVersion (compare-and-swap: of two replicas, one
// wins, the other's call is busy). The handle is never stored: the annotations hold its
// SHA-256, against which a presented handle is checked in constant time, and a hash of
// the owner's identity salted with the handle (no one can test a guessed identity without
// the handle). The store keeps only the state: the server that uses it (mcpserver)
// starts the pod with the labels and annotations a claim names and attaches to it anew
// for each call (launcher.AttachedSession, Backend.Reattach, a fresh seal key per call).
// The rule that ends a session is backend.SessionRecord.Due, as in a server's memory. Every replica's sweeper deletes the session pods whose
// idle deadline or maximum lifetime has passed, whoever made them; activeDeadlineSeconds
// is the backstop should no replica run. A background run's pod (runs.go) carries the
// same label and LabelRun, which the store's selectors exclude.
const (
	annHandle    = "dev.mcp-exec.session-handle-sha256" // hex SHA-256 of the handle (domain-separated)
	annOwner     = "dev.mcp-exec.session-owner-sha256"  // hex SHA-256 of the handle and the owner's identity
	annIdle      = "dev.mcp-exec.session-idle-s"        // the idle timeout, seconds
	annIdleUntil = "dev.mcp-exec.session-idle-until"    // Unix ms: ends unless a call comes first
	annExpires   = "dev.mcp-exec.session-expires-at"    // Unix ms: the maximum lifetime's end
	annCount     = "dev.mcp-exec.session-count"         // calls claimed so far
	annBusyUntil = "dev.mcp-exec.session-busy-until"    // Unix ms: a call's claim, "" when idle
	annBusyBy    = "dev.mcp-exec.session-busy-by"       // the claim's random token
	// annOwnerTag counts an identity's sessions (--max-sessions-per-identity) across
	// replicas: 64 bits of an unsalted hash of the identity. Unlike annOwner it links the
	// sessions of one identity for whoever reads the sandbox namespace's pods (the
	// server's ServiceAccount, the cluster's administrators); it opens none of them.
	annOwnerTag = "dev.mcp-exec.session-owner-tag"
)

// claimMargin is added to a call's timeout for its claim: the kill, the exit frame
// (launcher's interruptWait is 5 s), attaching and releasing.
const claimMargin = 30 * time.Second

// ErrSessionGone: no open session has the handle (never made, closed, expired, lost, or
// another identity's: the same answer for all, so that a handle's owner is not told).
// When this replica ended the session itself, the error wraps it with why ("expired:
// it was idle ...", "closed by session_close"); another replica's ending is not known
// here, and the error says only that.
var ErrSessionGone = backend.ErrSessionGone

// SessionStore keeps shared sessions in the annotations of their pods, in the backend's
// namespace. Any number of them (one per replica) may serve the same namespace.
type SessionStore struct {
	b   *Backend
	log zerolog.Logger
	now func() time.Time

	ended endedRecords // by SessionKey: what this replica ended, and why
}

// gone is ErrSessionGone for handle and owner, with why when this replica ended it.
func (s *SessionStore) gone(handle, owner string) error {
	if why, ok := s.ended.why(SessionKey(handle), hex.EncodeToString(ownerSum(handle, owner))); ok {
		return &backend.GoneError{Why: why}
	}
	return ErrSessionGone
}

// remember records why the session of pod p ended, for its owner's next call here.
func (s *SessionStore) remember(p *corev1.Pod, why string) {
	s.ended.add(p.Labels[backend.LabelSessionKey], p.Annotations[annOwner], why)
}

// NewSessionStore keeps shared sessions in b's namespace.
func NewSessionStore(b *Backend, log zerolog.Logger) *SessionStore {
	return &SessionStore{b: b, log: log, now: time.Now}
}

func handleSum(handle string) []byte {
	s := sha256.Sum256([]byte("mcp-exec session handle v1\x00" + handle))
	return s[:]
}

// SessionKey is the label value that finds handle's pod: 128 bits of its hash.
func SessionKey(handle string) string { return hex.EncodeToString(handleSum(handle)[:16]) }

// OwnerTag is the annotation that counts owner's sessions: 64 bits of a hash.
func OwnerTag(owner string) string {
	s := sha256.Sum256([]byte("mcp-exec session owner tag v1\x00" + owner))
	return hex.EncodeToString(s[:8])
}

func ownerSum(handle, owner string) []byte {
	s := sha256.Sum256([]byte("mcp-exec session owner v1\x00" + handle + "\x00" + owner))
	return s[:]
}

// SessionInfo is what a claim found besides the pod: the session as claimed.
type SessionInfo struct {
	Count     int       // calls claimed so far, this one included
	ExpiresAt time.Time // the idle deadline or the maximum lifetime, the earlier

	idle    time.Duration // the session's idle timeout
	expires time.Time     // its maximum lifetime's end
	memory  int64         // its pod's memory limit, bytes
}

// Create starts handle's session for owner: the claim names the labels (SessionKey) and
// annotations (its state, claimed by its creation: no call, no sweep touches it while
// its pod starts) of the pod to start, which is the record; Release, once the pod is
// ready, starts its idle clock. rec gives the idle timeout, the maximum lifetime's end
// and (after a restart) the call count.
func (s *SessionStore) Create(ctx context.Context, handle, owner string, rec backend.SessionRecord) (backend.SessionClaim, error) {
	now := s.now()
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return backend.SessionClaim{}, fmt.Errorf("making a claim token: %w", err)
	}
	token := hex.EncodeToString(tok)
	startBy := now.Add(s.b.opts.StartTimeout + claimMargin)
	ann := sessionAnnotations(handle, owner, rec.Idle, now.Add(rec.Idle), rec.Expires)
	ann[annBusyUntil] = ms(startBy)
	ann[annBusyBy] = token
	ann[annCount] = strconv.Itoa(rec.Count)
	rec.IdleUntil, rec.Busy, rec.BusyUntil = now.Add(rec.Idle), true, startBy
	return backend.SessionClaim{Handle: handle, Owner: owner, Token: token, Record: rec, StartBy: startBy,
		Labels: map[string]string{backend.LabelSessionKey: SessionKey(handle)}, Annotations: ann}, nil
}

// sessionAnnotations is a new session's state: idle, nothing claimed.
func sessionAnnotations(handle, owner string, idle time.Duration, idleUntil, expires time.Time) map[string]string {
	return map[string]string{
		annHandle:    hex.EncodeToString(handleSum(handle)),
		annOwner:     hex.EncodeToString(ownerSum(handle, owner)),
		annIdle:      strconv.FormatInt(int64(idle/time.Second), 10),
		annIdleUntil: ms(idleUntil),
		annExpires:   ms(expires),
		annCount:     "0",
		annBusyUntil: "",
		annBusyBy:    "",
		annOwnerTag:  OwnerTag(owner),
	}
}

// find returns handle's pod, checked against the stored hashes (constant time).
// Another identity's session is ErrSessionGone, as is none.
func (s *SessionStore) find(ctx context.Context, handle, owner string) (*corev1.Pod, error) {
	p, other, err := s.b.findRecord(ctx, backend.LabelSessionKey+"="+SessionKey(handle)+",!"+LabelRun, "session",
		annHandle, hex.EncodeToString(handleSum(handle)), annOwner, hex.EncodeToString(ownerSum(handle, owner)))
	switch {
	case err != nil:
		return nil, err
	case other:
		return nil, ErrSessionGone
	case p == nil:
		return nil, s.gone(handle, owner)
	}
	return p, nil
}

// state is a session pod's annotations, parsed.
type state struct {
	backend.SessionRecord
	busyBy string // the claim's token
}

func stateOf(p *corev1.Pod) (state, error) {
	a := p.Annotations
	var st state
	ints := annInts{a: a}
	num := ints.get
	st.Idle = time.Duration(num(annIdle)) * time.Second
	st.IdleUntil = time.UnixMilli(num(annIdleUntil))
	st.Expires = time.UnixMilli(num(annExpires))
	st.Count = int(num(annCount))
	if a[annBusyUntil] != "" {
		st.Busy, st.BusyUntil = true, time.UnixMilli(num(annBusyUntil))
	}
	st.busyBy = a[annBusyBy]
	st.Ended = p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	return st, ints.err()
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// claimTries bounds the compare-and-swap retries of one claim or release: a conflict
// that is not another claim (the kubelet's status updates move the resourceVersion too)
// is read again and decided again.
const claimTries = 8

// claim marks handle's session busy for one call of timeout, by an update conditioned on
// the pod's resourceVersion. It returns the pod's name, the claim's token and the count.
func (s *SessionStore) claim(ctx context.Context, handle, owner string, timeout time.Duration) (string, string, SessionInfo, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return "", "", SessionInfo{}, fmt.Errorf("making a claim token: %w", err)
	}
	token := hex.EncodeToString(tok)
	pods := s.b.core.Pods(s.b.opts.Namespace)
	for try := 0; ; try++ {
		p, err := s.find(ctx, handle, owner)
		if err != nil {
			return "", "", SessionInfo{}, err
		}
		st, err := stateOf(p)
		if err != nil {
			return "", "", SessionInfo{}, fmt.Errorf("session pod %s: %w", p.Name, err)
		}
		now := s.now()
		if why := st.Due(now); why != "" {
			s.deleteIf(ctx, p, why)
			return "", "", SessionInfo{}, &backend.GoneError{Why: why}
		}
		if st.Busy {
			return "", "", SessionInfo{}, backend.ErrSessionBusy
		}
		p.Annotations[annBusyUntil] = ms(now.Add(timeout + claimMargin))
		p.Annotations[annBusyBy] = token
		p.Annotations[annCount] = strconv.Itoa(st.Count + 1)
		_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			return p.Name, token, SessionInfo{Count: st.Count + 1, ExpiresAt: earlier(now.Add(st.Idle), st.Expires), idle: st.Idle, expires: st.Expires, memory: podMemory(p)}, nil
		}
		if !apierrors.IsConflict(err) {
			return "", "", SessionInfo{}, fmt.Errorf("claiming session pod %s: %w", p.Name, s.b.classify(err))
		}
		if try == claimTries {
			return "", "", SessionInfo{}, backend.ErrSessionBusy
		}
	}
}

// release ends the claim token on pod name and restarts the idle clock.
func (s *SessionStore) release(ctx context.Context, name, token string) (time.Time, error) {
	pods := s.b.core.Pods(s.b.opts.Namespace)
	for try := 0; try <= claimTries; try++ {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Time{}, nil // closed during the call
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("releasing session pod %s: %w", name, s.b.classify(err))
		}
		st, err := stateOf(p)
		if err != nil {
			return time.Time{}, fmt.Errorf("session pod %s: %w", name, err)
		}
		if st.busyBy != token || p.DeletionTimestamp != nil {
			return time.Time{}, nil
		}
		idleUntil := s.now().Add(st.Idle)
		p.Annotations[annBusyUntil], p.Annotations[annBusyBy] = "", ""
		p.Annotations[annIdleUntil] = ms(idleUntil)
		if _, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err == nil {
			return earlier(idleUntil, st.Expires), nil
		} else if !apierrors.IsConflict(err) {
			return time.Time{}, fmt.Errorf("releasing session pod %s: %w", name, s.b.classify(err))
		}
	}
	return time.Time{}, fmt.Errorf("releasing session pod %s: conflicting updates %d times", name, claimTries+1)
}

// defaultClaimTimeout is a call's timeout for its claim when the call names none: the
// longest a call may run.
const defaultClaimTimeout = 300 * time.Second

// Claim marks handle's session busy for one call of timeout, on whichever replica this
// is. A second call while one runs, on any replica, is backend.ErrSessionBusy; a handle
// with no open session of owner's is ErrSessionGone; a session that is due ends here.
func (s *SessionStore) Claim(ctx context.Context, handle, owner string, timeout time.Duration) (backend.SessionClaim, error) {
	if timeout <= 0 {
		timeout = defaultClaimTimeout
	}
	name, token, info, err := s.claim(ctx, handle, owner, timeout)
	if err != nil {
		return backend.SessionClaim{}, err
	}
	rec := backend.SessionRecord{Idle: info.idle, IdleUntil: info.ExpiresAt, Expires: info.expires, Count: info.Count}
	return backend.SessionClaim{Handle: handle, Owner: owner, Token: token, Sandbox: name, Record: rec, Memory: info.memory}, nil
}

// Release ends claim c on its pod and restarts the idle clock: it returns when the
// session ends if no call comes, zero if it ended during the call.
func (s *SessionStore) Release(ctx context.Context, c backend.SessionClaim) (time.Time, error) {
	return s.release(ctx, c.Sandbox, c.Token)
}

// Restart is Create for c's session, whose interpreter was lost (and its pod with it):
// a new, empty pod keeps its handle, owner, count and maximum lifetime. It fails (and
// the session ends, saying so to its owner) when the maximum lifetime is over or the
// old pod cannot be removed.
func (s *SessionStore) Restart(ctx context.Context, c backend.SessionClaim) (backend.SessionClaim, error) {
	if err := s.b.Remove(ctx, c.Sandbox); err != nil && !errors.Is(err, backend.ErrNotFound) {
		s.End(ctx, c, "ended: its interpreter was lost and its pod could not be removed")
		return backend.SessionClaim{}, fmt.Errorf("removing the lost pod %s: %w", c.Sandbox, err)
	}
	if !s.now().Before(c.Record.Expires) {
		s.End(ctx, c, "expired: it reached its maximum lifetime")
		return backend.SessionClaim{}, errors.New("past its maximum lifetime")
	}
	n, err := s.Create(ctx, c.Handle, c.Owner, backend.SessionRecord{Idle: c.Record.Idle, Expires: c.Record.Expires, Count: c.Record.Count})
	n.Memory = c.Memory
	return n, err
}

// End records why c's session ended (its pod is gone or never started), for its owner's
// next call on this replica; "" records nothing.
func (s *SessionStore) End(_ context.Context, c backend.SessionClaim, why string) {
	if why == "" {
		return
	}
	s.remember(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{backend.LabelSessionKey: SessionKey(c.Handle)},
		Annotations: map[string]string{annOwner: hex.EncodeToString(ownerSum(c.Handle, c.Owner))}}}, why)
}

// podMemory is p's sandbox container's memory limit in bytes, 0 if it has none (the
// launcher's default then applies).
func podMemory(p *corev1.Pod) int64 {
	for _, c := range p.Spec.Containers {
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			return m.Value()
		}
	}
	return 0
}

// Close deletes handle's session pod for owner: true when it was open.
func (s *SessionStore) Close(ctx context.Context, handle, owner string) (bool, error) {
	p, err := s.find(ctx, handle, owner)
	if errors.Is(err, ErrSessionGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.b.Remove(ctx, p.Name); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return false, fmt.Errorf("closing the session: %w", err)
	}
	s.remember(p, "closed by session_close")
	return true, nil
}

// deleteIf deletes p unless it changed since it was read (a precondition on its
// resourceVersion: a call that claimed it meanwhile wins).
func (s *SessionStore) deleteIf(ctx context.Context, p *corev1.Pod, why string) bool {
	rv := p.ResourceVersion
	err := s.b.core.Pods(s.b.opts.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &p.UID, ResourceVersion: &rv},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		if !apierrors.IsConflict(err) {
			s.log.Warn().Err(s.b.classify(err)).Str("pod", p.Name).Msg("deleting a shared session's pod")
		}
		return false
	}
	s.log.Info().Str("pod", p.Name).Str("why", why).Msg("shared session ended")
	if err == nil {
		s.remember(p, why)
	}
	return err == nil
}

// Sweep deletes every shared session pod of the namespace that is due, whoever made it:
// past its maximum lifetime, idle past its idle deadline, claimed by a call whose claim
// ran out (its replica went away), ended, or unreadable. It returns how many it deleted.
func (s *SessionStore) Sweep(ctx context.Context) (int, error) {
	list, err := s.b.core.Pods(s.b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: backend.LabelSessionKey + ",!" + LabelRun})
	if err != nil {
		return 0, fmt.Errorf("listing shared sessions: %w", s.b.classify(err))
	}
	now, n := s.now(), 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		st, err := stateOf(p)
		why := st.Due(now)
		if err != nil {
			why = "ended: its state was unreadable (" + err.Error() + ")"
		}
		if why != "" && s.deleteIf(ctx, p, why) {
			n++
		}
	}
	return n, nil
}

// Count returns how many shared sessions the namespace holds, and how many of them
// are owner's (not those being deleted): for --max-sessions and
// --max-sessions-per-identity, which on Kubernetes bound every replica's sessions
// together.
func (s *SessionStore) Count(ctx context.Context, owner string) (all, owned int, err error) {
	return s.b.countRecords(ctx, backend.LabelSessionKey+",!"+LabelRun, "shared sessions", annOwnerTag, OwnerTag(owner))
}

// RunSweeper sweeps every interval until ctx ends.
func (s *SessionStore) RunSweeper(ctx context.Context, every time.Duration) {
	sweepEvery(ctx, every, s.Sweep, s.log, "sweeping shared sessions")
}
