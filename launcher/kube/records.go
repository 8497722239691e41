package kube

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the shared session store (shared.go) and the run store (runs.go) have in common:
// each keeps its records in the annotations of the pods a label selector finds, under
// hashes of the handle and of the owner's identity salted with it (compared in constant
// time), counts an identity's by an owner tag, remembers (bounded) why this replica ended
// one, for its owner's next call here, and sweeps on a ticker.

// findRecord returns the pod of selector (not one being deleted) whose annotation
// handleAnn is hs, and whether its annotation ownerAnn is not os (another identity's
// record: the caller answers as for none). No pod: nil, false. what names the record
// in errors.
func (b *Backend) findRecord(ctx context.Context, selector, what, handleAnn, hs, ownerAnn, os string) (*corev1.Pod, bool, error) {
	list, err := b.core.Pods(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, false, fmt.Errorf("looking up the %s: %w", what, b.classify(err))
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || subtle.ConstantTimeCompare([]byte(p.Annotations[handleAnn]), []byte(hs)) != 1 {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(p.Annotations[ownerAnn]), []byte(os)) != 1 {
			return nil, true, nil
		}
		return p, false, nil
	}
	return nil, false, nil
}

// countRecords returns how many pods of selector the namespace holds (not those being
// deleted), and how many of them carry tag in their annotation tagAnn. what names the
// records in errors.
func (b *Backend) countRecords(ctx context.Context, selector, what, tagAnn, tag string) (all, owned int, err error) {
	list, err := b.core.Pods(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, 0, fmt.Errorf("counting %s: %w", what, b.classify(err))
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		all++
		if p.Annotations[tagAnn] == tag {
			owned++
		}
	}
	return all, owned, nil
}

// maxEnded bounds what an endedRecords remembers.
const maxEnded = 4096

// endedRecords is why this replica ended records, by their label's key, for their
// owners' next calls here; bounded by maxEnded (past it an arbitrary one goes: its
// owner's answer only gets vaguer). The zero value is ready.
type endedRecords struct {
	mu sync.Mutex
	m  map[string]endedRecord
}

type endedRecord struct {
	owner string // hex owner sum
	why   string
}

func (e *endedRecords) add(key, owner, why string) {
	if key == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]endedRecord{}
	}
	if len(e.m) >= maxEnded {
		for k := range e.m {
			delete(e.m, k)
			break
		}
	}
	e.m[key] = endedRecord{owner: owner, why: why}
}

// why is why key's record ended, if this replica ended it and owner (hex owner sum,
// compared in constant time) is its owner.
func (e *endedRecords) why(key, owner string) (string, bool) {
	e.mu.Lock()
	r, ok := e.m[key]
	e.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(r.owner), []byte(owner)) != 1 {
		return "", false
	}
	return r.why, true
}

// annInts reads integer annotations, keeping each that does not parse as an error.
type annInts struct {
	a    map[string]string
	errs []error
}

func (r *annInts) get(k string) int64 {
	v, err := strconv.ParseInt(r.a[k], 10, 64)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("annotation %s: %w", k, err))
	}
	return v
}

func (r *annInts) err() error { return errors.Join(r.errs...) }

// sweepEvery runs sweep every interval until ctx ends; a failure is logged with msg.
func sweepEvery(ctx context.Context, every time.Duration, sweep func(context.Context) (int, error), log zerolog.Logger, msg string) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := sweep(ctx); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg(msg)
			}
		}
	}
}
