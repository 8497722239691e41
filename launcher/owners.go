package launcher

import (
	"context"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

// Owners. Servers that share an engine may share an instance name: two stdio servers
// on one workstation both default to the host's name, and nothing stops two servers
// from being given one --instance. The instance label therefore does not say whose a
// sandbox is. With Options.Owner set, every sandbox also carries its server process's
// owner.ID, and this launcher's reaper and sweeps touch another owner's sandbox only
// when it can prove that owner gone:
//
//   - owner.Proc.Judge says Gone: same host, same boot and PID namespace, and the pid
//     is absent or started at another time; or this host has rebooted since;
//   - or the owner cannot be judged (another PID namespace: a server in a container;
//     another machine), but it runs in a container of this engine
//     (LabelOwnerContainer) that has stopped, or started again after the sandbox was
//     made (a restart ends every process of a container);
//   - or the owner cannot be judged and the sandbox has ended at least orphanGrace ago. A sandbox
//     whose server died ends by itself once idle: the engine closes its stdin with the
//     server's attach connection and the bootstrap exits (a warm one at once, a
//     running program when it ends). A live server removes its ended sandboxes as
//     soon as it has read their exit, well within the grace.
//
// A sandbox of the instance without an owner label (made by a server from before the
// label) is removed at start, as every sandbox of the instance was. A sandbox of a live
// owner, or of one it cannot judge that still runs, is left alone.

// ContainerStarter is implemented by backends that can say whether one of their
// engine's containers runs and when it last started (launcher/docker): for a server
// in a container, which its peers in other containers cannot see.
type ContainerStarter interface {
	// ContainerStarted reports when container id last started and whether it runs;
	// one the engine does not hold is backend.ErrNotFound.
	ContainerStarted(ctx context.Context, id string) (started time.Time, running bool, err error)
}

// OwnerLister is implemented by backends that keep LabelOwner and can list a
// sandbox's state (launcher/docker); Options.Owner needs one.
type OwnerLister interface {
	// ListOwners lists what List does, with each sandbox's owner and state.
	ListOwners(ctx context.Context, instance string) ([]backend.Listed, error)
}

// census lists the instance's sandboxes: this launcher's own (all of them without an
// owner), and the others' it may remove, with the reason. atStart includes sandboxes
// without an owner label.
func (l *Launcher) census(ctx context.Context, atStart bool) (own []string, others map[string]string, err error) {
	ol, ok := l.be.(OwnerLister)
	if !ok || l.opts.Owner.IsZero() {
		own, err = l.be.List(ctx, l.opts.Instance)
		return own, nil, err
	}
	all, err := ol.ListOwners(ctx, l.opts.Instance)
	if err != nil {
		return nil, nil, err
	}
	me, now := l.opts.Owner.String(), time.Now()
	others = map[string]string{}
	containers := map[string]containerState{}
	for _, s := range all {
		if s.Owner == me {
			own = append(own, s.ID)
			continue
		}
		if why := l.removable(ctx, s, now, atStart, containers); why != "" {
			others[s.ID] = why
		}
	}
	return own, others, nil
}

// containerState is what the engine said of an owner's container.
type containerState struct {
	started time.Time
	running bool
	err     error
}

// removable says why another owner's sandbox s may be removed, or "" when it may not.
// containers caches the owners' containers over one census.
func (l *Launcher) removable(ctx context.Context, s backend.Listed, now time.Time, atStart bool, containers map[string]containerState) string {
	if s.Owner == "" {
		if atStart {
			return "no owner label"
		}
		return ""
	}
	v := owner.Unknown
	if o, err := owner.Parse(s.Owner); err == nil {
		v = l.proc.Judge(l.opts.Owner, o)
	}
	switch {
	case v == owner.Gone:
		return "its server is gone"
	case v != owner.Unknown:
		return ""
	case !s.Running && !s.Ended.IsZero() && now.Sub(s.Ended) >= l.orph.grace:
		return "it ended and its server cannot be judged"
	case l.ownerContainerGone(ctx, s, containers):
		return "its server's container stopped or restarted since"
	}
	return ""
}

// ownerContainerGone reports whether s's owner's container (LabelOwnerContainer) is
// on this engine and stopped, or started again after s was made. A container the
// engine does not hold proves nothing: it may be another engine's. Created may be
// truncated to the second, hence the second of margin: a live server's sandbox made
// within a second of its container's start is never taken for a restarted one's.
func (l *Launcher) ownerContainerGone(ctx context.Context, s backend.Listed, containers map[string]containerState) bool {
	cs, ok := l.be.(ContainerStarter)
	if !ok || s.OwnerContainer == "" || s.Created.IsZero() {
		return false
	}
	st, seen := containers[s.OwnerContainer]
	if !seen {
		st.started, st.running, st.err = cs.ContainerStarted(ctx, s.OwnerContainer)
		containers[s.OwnerContainer] = st
	}
	if st.err != nil {
		return false
	}
	return !st.running || st.started.After(s.Created.Add(time.Second))
}

// removeLeftovers removes the others' sandboxes census found removable, and returns
// how many it removed.
func (l *Launcher) removeLeftovers(ctx context.Context, doomed map[string]string) (int, []error) {
	n := 0
	var errs []error
	for id, why := range doomed {
		if err := l.remove(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		l.log.Info().Str("container_id", shortID(id)).Str("reason", why).Msg("removed a sandbox another server left")
	}
	return n, errs
}
