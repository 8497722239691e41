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
//     another machine) and the sandbox has ended at least orphanGrace ago. A sandbox
//     whose server died ends by itself once idle: the engine closes its stdin with the
//     server's attach connection and the bootstrap exits (a warm one at once, a
//     running program when it ends). A live server removes its ended sandboxes as
//     soon as it has read their exit, well within the grace.
//
// A sandbox of the instance without an owner label (made by a server from before the
// label) is removed at start, as every sandbox of the instance was. A sandbox of a live
// owner, or of one it cannot judge that still runs, is left alone.

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
	for _, s := range all {
		if s.Owner == me {
			own = append(own, s.ID)
			continue
		}
		if why := l.removable(s, now, atStart); why != "" {
			others[s.ID] = why
		}
	}
	return own, others, nil
}

// removable says why another owner's sandbox s may be removed, or "" when it may not.
func (l *Launcher) removable(s backend.Listed, now time.Time, atStart bool) string {
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
	case v == owner.Unknown && !s.Running && !s.Ended.IsZero() && now.Sub(s.Ended) >= l.orph.grace:
		return "it ended and its server cannot be judged"
	}
	return ""
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
