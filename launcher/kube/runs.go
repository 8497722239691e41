package kube

import (
	"context"
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

// Background runs on Kubernetes: a run is the one call of a pod started as a shared
// session's (any replica attaches to it), sent as a kept call (launcher.AttachedSession's
// Keep): the bootstrap runs it without any replica and keeps its result in the pod's
// memory until the pod goes. The pod is the store, as for shared sessions: found by
// backend.LabelSessionKey with a truncated hash of the handle in its own domain (RunKey),
// marked LabelRun so that the session store leaves it alone, its state in annotations
// (below): hashes of the handle and of the owner's identity salted with it (never either),
// when it started, its timeout, when a replica first saw it ended, and whether it was
// cancelled. Never the caller's code, input or output. The result itself is fetched from
// the pod by whichever replica is asked. Every replica's sweeper deletes the run pods
// whose result has been kept for the TTL; activeDeadlineSeconds is the backstop.
const (
	// LabelRun marks a background run's pod ("1").
	LabelRun = "dev.mcp-exec.run"

	annRunHandle   = "dev.mcp-exec.run-handle-sha256" // hex SHA-256 of the handle (domain-separated)
	annRunOwner    = "dev.mcp-exec.run-owner-sha256"  // hex SHA-256 of the handle and the owner's identity
	annRunOwnerTag = "dev.mcp-exec.run-owner-tag"     // counts an identity's runs (see annOwnerTag)
	annRunStarted  = "dev.mcp-exec.run-started"       // Unix ms
	annRunTimeout  = "dev.mcp-exec.run-timeout-ms"    // the run's own timeout
	annRunEnded    = "dev.mcp-exec.run-ended"         // Unix ms when a replica first saw it ended, "" before
	annRunCanceled = "dev.mcp-exec.run-canceled"      // "1" once run_cancel stopped it
)

// runEndMargin is added to a run's timeout for when it has ended at the latest if no
// replica saw its end: the pod's start, and the bootstrap's kill at the timeout.
const runEndMargin = time.Minute

// Errors of the run store (backend's). ErrRunNotFound is the same for a handle that
// never was and another identity's.
var (
	ErrRunNotFound = backend.ErrRunNotFound
	ErrRunExpired  = backend.ErrRunExpired
	ErrRunLost     = backend.ErrRunLost
)

// RunRecord is a run's state as its pod's annotations hold it; Sandbox is its pod.
type RunRecord = backend.RunRecord

// runExpires is when r's pod is removed at the latest: TTL after its end, or after its
// timeout plus a margin while no replica has seen its end.
func runExpires(r RunRecord, ttl time.Duration) time.Time {
	if !r.Ended.IsZero() {
		return r.Ended.Add(ttl)
	}
	return r.Started.Add(r.Timeout + runEndMargin + ttl)
}

// RunStore keeps background runs in the annotations of their pods, in the backend's
// namespace. Any number of them (one per replica) may serve the same namespace.
type RunStore struct {
	b   *Backend
	log zerolog.Logger
	ttl time.Duration
	now func() time.Time

	expired endedRecords // by RunKey: the runs this replica removed at their TTL
}

// NewRunStore keeps background runs in b's namespace; their results are kept ttl after
// they end.
func NewRunStore(b *Backend, log zerolog.Logger, ttl time.Duration) *RunStore {
	return &RunStore{b: b, log: log, ttl: ttl, now: time.Now}
}

func runHandleSum(handle string) []byte {
	s := sha256.Sum256([]byte("mcp-exec run handle v1\x00" + handle))
	return s[:]
}

func runOwnerSum(handle, owner string) string {
	s := sha256.Sum256([]byte("mcp-exec run owner v1\x00" + handle + "\x00" + owner))
	return hex.EncodeToString(s[:])
}

// RunKey is the label value that finds handle's pod: 128 bits of its hash.
func RunKey(handle string) string { return hex.EncodeToString(runHandleSum(handle)[:16]) }

// Create returns the labels and annotations of the pod that starts handle's run for
// owner, timeout its own.
func (s *RunStore) Create(handle, owner string, timeout time.Duration) (labels, annotations map[string]string) {
	return map[string]string{backend.LabelSessionKey: RunKey(handle), LabelRun: "1"}, map[string]string{
		annRunHandle:   hex.EncodeToString(runHandleSum(handle)),
		annRunOwner:    runOwnerSum(handle, owner),
		annRunOwnerTag: OwnerTag(owner),
		annRunStarted:  ms(s.now()),
		annRunTimeout:  strconv.FormatInt(timeout.Milliseconds(), 10),
		annRunEnded:    "",
		annRunCanceled: "",
	}
}

func runOf(p *corev1.Pod) (RunRecord, error) {
	a := p.Annotations
	ints := annInts{a: a}
	num := ints.get
	r := RunRecord{Sandbox: p.Name, Started: time.UnixMilli(num(annRunStarted)),
		Timeout: time.Duration(num(annRunTimeout)) * time.Millisecond, Canceled: a[annRunCanceled] == "1"}
	if a[annRunEnded] != "" {
		r.Ended = time.UnixMilli(num(annRunEnded))
	}
	return r, ints.err()
}

// find returns handle's pod, checked against the stored hashes (constant time).
func (s *RunStore) find(ctx context.Context, handle, owner string) (*corev1.Pod, error) {
	os := runOwnerSum(handle, owner)
	p, other, err := s.b.findRecord(ctx, backend.LabelSessionKey+"="+RunKey(handle)+","+LabelRun, "run",
		annRunHandle, hex.EncodeToString(runHandleSum(handle)), annRunOwner, os)
	switch {
	case err != nil:
		return nil, err
	case other:
		return nil, ErrRunNotFound
	case p != nil:
		return p, nil
	}
	if _, ok := s.expired.why(RunKey(handle), os); ok {
		return nil, ErrRunExpired
	}
	return nil, ErrRunNotFound
}

// Get returns owner's run handle. A run whose result is past its TTL is removed here
// (ErrRunExpired); one whose pod has ended (the bootstrap never ends by itself: an
// eviction, a lost node, activeDeadlineSeconds) is ErrRunLost; another identity's
// handle, and one that never was, are ErrRunNotFound.
func (s *RunStore) Get(ctx context.Context, handle, owner string) (RunRecord, error) {
	p, err := s.find(ctx, handle, owner)
	if err != nil {
		return RunRecord{}, err
	}
	r, err := runOf(p)
	if err != nil {
		return RunRecord{}, fmt.Errorf("run pod %s: %w", p.Name, err)
	}
	if !s.now().Before(runExpires(r, s.ttl)) {
		s.remove(ctx, p)
		return RunRecord{}, ErrRunExpired
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		if r.Ended.IsZero() { // the record stays for the TTL from now, to say so
			if _, err := s.Ended(ctx, r, false); err != nil {
				s.log.Warn().Err(err).Str("pod", p.Name).Msg("recording a lost background run's end")
			}
		}
		return RunRecord{}, ErrRunLost
	}
	return r, nil
}

// Ended records on r's pod that the run has ended (the first time only: its TTL runs
// from then), and that it was cancelled when canceled. It returns the record as
// stored.
func (s *RunStore) Ended(ctx context.Context, r RunRecord, canceled bool) (RunRecord, error) {
	pods := s.b.core.Pods(s.b.opts.Namespace)
	for try := 0; try <= claimTries; try++ {
		p, err := pods.Get(ctx, r.Sandbox, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return r, nil // swept meanwhile: the answer in hand stands
		}
		if err != nil {
			return r, fmt.Errorf("recording the run's end on pod %s: %w", r.Sandbox, s.b.classify(err))
		}
		cur, err := runOf(p)
		if err != nil {
			return r, fmt.Errorf("run pod %s: %w", p.Name, err)
		}
		if !cur.Ended.IsZero() && (cur.Canceled || !canceled) {
			return cur, nil
		}
		if cur.Ended.IsZero() {
			cur.Ended = time.UnixMilli(s.now().UnixMilli()) // as stored
			p.Annotations[annRunEnded] = ms(cur.Ended)
		}
		if canceled {
			cur.Canceled = true
			p.Annotations[annRunCanceled] = "1"
		}
		if _, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err == nil {
			return cur, nil
		} else if !apierrors.IsConflict(err) {
			return r, fmt.Errorf("recording the run's end on pod %s: %w", r.Sandbox, s.b.classify(err))
		}
	}
	return r, fmt.Errorf("recording the run's end on pod %s: conflicting updates %d times", r.Sandbox, claimTries+1)
}

// Forget deletes owner's run handle without remembering it as expired (its result was
// handed out as a call's own answer).
func (s *RunStore) Forget(ctx context.Context, handle, owner string) error {
	p, err := s.find(ctx, handle, owner)
	if err != nil {
		return err
	}
	if err := s.b.Remove(ctx, p.Name); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("removing the run's pod: %w", err)
	}
	return nil
}

// remove deletes p, whose result is past its TTL, and remembers its handle's key as
// expired for its owner's next look here.
func (s *RunStore) remove(ctx context.Context, p *corev1.Pod) bool {
	if err := s.b.Remove(ctx, p.Name); err != nil && !errors.Is(err, backend.ErrNotFound) {
		s.log.Warn().Err(err).Str("pod", p.Name).Msg("deleting an expired background run's pod")
		return false
	}
	s.log.Info().Str("pod", p.Name).Msg("background run's result expired")
	s.expired.add(p.Labels[backend.LabelSessionKey], p.Annotations[annRunOwner], "expired")
	return true
}

// Sweep deletes every run pod of the namespace whose result is past its TTL (or whose
// state is unreadable), whoever made it. It returns how many it deleted.
func (s *RunStore) Sweep(ctx context.Context) (int, error) {
	list, err := s.b.core.Pods(s.b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelRun})
	if err != nil {
		return 0, fmt.Errorf("listing background runs: %w", s.b.classify(err))
	}
	now, n := s.now(), 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		r, err := runOf(p)
		if (err != nil || !now.Before(runExpires(r, s.ttl))) && s.remove(ctx, p) {
			n++
		}
	}
	return n, nil
}

// Count returns how many runs the namespace holds (running, or with a result kept),
// and how many of them are owner's: for --max-background-runs and its per-identity
// bound, which on Kubernetes bound every replica's runs together.
func (s *RunStore) Count(ctx context.Context, owner string) (all, owned int, err error) {
	return s.b.countRecords(ctx, LabelRun, "background runs", annRunOwnerTag, OwnerTag(owner))
}

// RunSweeper sweeps every interval until ctx ends.
func (s *RunStore) RunSweeper(ctx context.Context, every time.Duration) {
	sweepEvery(ctx, every, s.Sweep, s.log, "sweeping background runs")
}
