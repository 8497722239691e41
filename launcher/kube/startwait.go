package kube

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// The settings that size a sandbox pod's requests and how many such pods this server
// keeps, as unschedulableErr names them (the command's flags, without the dashes).
const (
	settingCPUs          backend.Setting = "cpus"
	settingMemory        backend.Setting = "memory"
	settingSessionMemory backend.Setting = "session-memory"
	settingPoolSize      backend.Setting = "pool-size"
	settingMaxSessions   backend.Setting = "max-sessions"
	settingUnschedulable backend.Setting = "kube-unschedulable-wait-s"
)

// The reasons of the events with which node autoscalers answer an unschedulable pod: a
// node is being added for it (cluster-autoscaler's TriggeredScaleUp, Karpenter's
// Nominated: "Pod should schedule on: nodeclaim/..."), or none will be
// (cluster-autoscaler's NotTriggerScaleUp).
const (
	eventScaleUp   = "TriggeredScaleUp"
	eventNominated = "Nominated"
	eventNoScaleUp = "NotTriggerScaleUp"
)

// startWait is what waitRunning knows of a pod that has not started yet: its last
// state, and a timer that runs while the scheduler finds no node for it. The scheduler
// tries again at each change of the cluster (a pod deleted, a node added): a verdict
// that stands for UnschedulableWait will not change soon, and the start fails naming it
// rather than waiting for StartTimeout in silence; unless a node autoscaler is adding a
// node for the pod (scaling), which takes minutes: then only StartTimeout bounds it.
type startWait struct {
	wait    time.Duration // negative: no bound but StartTimeout
	last    *corev1.Pod
	timer   *time.Timer // nil while the pod is not unschedulable
	scaling string      // the autoscaler's event once it is adding a node for the pod
}

func newStartWait(wait time.Duration) *startWait { return &startWait{wait: wait} }

// see takes the pod's latest state: done when its container runs (nil) or will never run
// (podStarted's error).
func (w *startWait) see(pod *corev1.Pod) (bool, error) {
	w.last = pod
	if done, err := podStarted(pod); done {
		return true, err
	}
	if _, ok := unschedulable(pod); !ok {
		w.stop()
	} else if w.timer == nil && w.wait >= 0 && w.scaling == "" {
		w.timer = time.NewTimer(w.wait)
	}
	return false, nil
}

// expired fires once the pod has been unschedulable for the whole wait; nil (never)
// while it is not.
func (w *startWait) expired() <-chan time.Time {
	if w.timer == nil {
		return nil
	}
	return w.timer.C
}

func (w *startWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// scaleUp reads the pod's events, once its wait has expired: if the newest answer of a
// node autoscaler is that a node is being added for it, the start waits on for it (until
// StartTimeout) and scaleUp reports true.
func (w *startWait) scaleUp(events []corev1.Event) bool {
	var newest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.InvolvedObject.Name != w.last.Name || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != w.last.UID) {
			continue
		}
		switch e.Reason {
		case eventScaleUp, eventNominated, eventNoScaleUp:
			if newest == nil || !eventTime(e).Before(eventTime(newest)) {
				newest = e
			}
		}
	}
	if newest == nil || newest.Reason == eventNoScaleUp {
		return false
	}
	w.stop()
	w.scaling = newest.Reason + ": " + newest.Message
	return true
}

// eventTime is when an event last happened, whichever API recorded it (core/v1's
// LastTimestamp, events.k8s.io's EventTime and series).
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// unschedulable returns the scheduler's reason when it has found no node for pod, nor
// a pod to preempt for it (a nominated node means preemption is under way).
func unschedulable(pod *corev1.Pod) (string, bool) {
	if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName != "" {
		return "", false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

// unschedulableErr says why the pod cannot start: the scheduler's reason, what the pod
// requests, and the settings that size it and the pods it shares the nodes with.
func (w *startWait) unschedulableErr() error {
	msg, _ := unschedulable(w.last)
	req := w.last.Spec.Containers[0].Resources.Requests
	cpu, mem := req[corev1.ResourceCPU], req[corev1.ResourceMemory]
	return fmt.Errorf("starting pod %s: %w", w.last.Name, &backend.SettingError{Setting: settingCPUs, Text: func(v backend.Vars) string {
		return fmt.Sprintf("no node can take it: the scheduler says %q (for %s, %s; no node autoscaler said it is adding one). "+
			"It requests cpu %s and memory %s "+
			"(%s; %s, or %s for a session's), and must fit on the nodes beside the warm pool's pods (%s, per replica), "+
			"the sessions (%s) and the background runs: make room for them all, or lower those settings",
			msg, w.wait, v.Name(settingUnschedulable), cpu.String(), mem.String(), v.Name(settingCPUs), v.Name(settingMemory), v.Name(settingSessionMemory),
			v.Name(settingPoolSize), v.Name(settingMaxSessions))
	}})
}

// waitingFor says what the pod was waiting for when last seen, for the error at
// StartTimeout.
func (w *startWait) waitingFor() string {
	pod := w.last
	if pod == nil {
		return "never seen"
	}
	if msg, ok := unschedulable(pod); ok {
		if w.scaling != "" {
			return "unschedulable: " + msg + "; a node autoscaler is adding a node for it: " + w.scaling
		}
		return "unschedulable: " + msg
	}
	if pod.Spec.NodeName == "" {
		return "not scheduled yet"
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if wt := cs.State.Waiting; wt != nil {
			return strings.TrimSpace(fmt.Sprintf("on node %s, its container waiting: %s %s", pod.Spec.NodeName, wt.Reason, wt.Message))
		}
	}
	return "on node " + pod.Spec.NodeName + ", its container not created yet"
}
