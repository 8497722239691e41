package launcher

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// ErrLimitsNotEnforced: the engine accepted a limit but does not apply it (rootless
// Podman on cgroup v1 drops memory, pids and CPU limits without an error).
var ErrLimitsNotEnforced = errors.New("the engine does not enforce the configured limits")

// ErrRuntimeMismatch: the sandbox's kernel is not the one the runtime setting names
// (Options.GVisor, from the runtime's name): the sandbox would be adapted to, and the
// probes would assert, the wrong kernel. No override: rename the runtime or RuntimeClass.
var ErrRuntimeMismatch = errors.New("the sandbox's kernel is not the one the runtime setting names")

// ErrSeccompNotEnforced: a sandbox's io_uring_setup was not refused with EPERM, so the
// bootstrap's seccomp filter (launcher/syscalls, boot.py's install_filter) is not in
// force and the runtime's profile does not make up for it. No override.
var ErrSeccompNotEnforced = errors.New("the sandbox's seccomp filter does not deny io_uring")

// limitsProgram reads, from inside a sandbox, the limits its cgroups actually carry,
// and tries those it cannot read (limits.py says how).
//
//go:embed limits.py
var limitsProgram string

// LimitsHinter is implemented by a backend that can tell the deployer where its limits
// come from, for the refusal when one is not enforced.
type LimitsHinter interface {
	LimitsHint() string
}

// SeccompHinter is implemented by a backend that can tell the deployer which setting
// gives its sandboxes a seccomp profile of their own, for the refusal when io_uring is
// allowed in one. The hint's Text says how; its Err is nil; nil: no hint.
type SeccompHinter interface {
	SeccompHint() *backend.SettingError
}

// Limits are the limits a sandbox's cgroups carry, as seen from inside.
type Limits struct {
	Memory int64 `json:"memory"` // bytes; -1 unlimited, -2 not visible
	Pids   int64 `json:"pids"`
	// PidsMeasured: no pids limit was visible, Pids is how many tasks the sandbox could
	// run (itself included) before the kernel refused another.
	PidsMeasured bool  `json:"pids_measured"`
	CPUQuota     int64 `json:"cpu_quota"` // microseconds per period; -1 unlimited
	CPUPeriod    int64 `json:"cpu_period"`
	// Runtime is "gvisor" when the sandbox's kernel is gVisor's: memory and pids were
	// then also tried (limits.py), not only read.
	Runtime string `json:"runtime"`
	// MemoryProbe, under gVisor when the memory limit did not hold: how the child that
	// touched twice the limit ended instead of being SIGKILLed (limits.py).
	MemoryProbe string `json:"memory_probe,omitempty"`
	// IOUringSetup is what io_uring_setup answered in the sandbox: "EPERM" under the
	// bootstrap's filter, "allowed" or another errno's name without it.
	IOUringSetup string `json:"io_uring_setup"`
}

// MeasureLimits runs a sandbox that reports the limits it actually runs under.
func (l *Launcher) MeasureLimits(ctx context.Context) (Limits, error) {
	res, err := l.Run(ctx, Job{Code: limitsProgram, Timeout: 20 * time.Second, internal: true})
	if err != nil {
		return Limits{}, fmt.Errorf("measuring sandbox limits: %w", err)
	}
	var lim Limits
	if res.ExitCode != 0 || json.Unmarshal([]byte(strings.TrimSpace(res.Stdout)), &lim) != nil {
		return Limits{}, fmt.Errorf("%w: measuring sandbox limits: exit %d: %s", ErrSandbox, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return lim, nil
}

// Unenforced lists the configured limits that lim shows are not applied.
func (l *Launcher) Unenforced(lim Limits) []string {
	o := l.opts
	var bad []string
	if lim.Memory < 0 || lim.Memory > o.Memory {
		seen := limitText(lim.Memory)
		if lim.MemoryProbe != "" {
			seen += ": " + lim.MemoryProbe
		}
		bad = append(bad, fmt.Sprintf("memory (configured %d bytes, sandbox sees %s)", o.Memory, seen))
	}
	if lim.Pids < 0 || lim.Pids > o.Pids {
		how := "sees"
		if lim.PidsMeasured {
			how = "could start"
		}
		bad = append(bad, fmt.Sprintf("pids (configured %d, sandbox %s %s)", o.Pids, how, limitText(lim.Pids)))
	}
	if lim.CPUQuota < 0 || lim.CPUPeriod <= 0 || float64(lim.CPUQuota)/float64(lim.CPUPeriod) > o.CPUs*1.01 {
		bad = append(bad, fmt.Sprintf("cpus (configured %g, sandbox sees quota %s per %d µs)", o.CPUs, limitText(lim.CPUQuota), lim.CPUPeriod))
	}
	return bad
}

// VerifyLimits fails with ErrLimitsNotEnforced naming every limit the engine does
// not apply, with ErrRuntimeMismatch when the sandbox's kernel is gVisor's and
// Options.GVisor says otherwise, or the reverse, and with ErrSeccompNotEnforced when
// io_uring_setup was not refused in the sandbox.
func (l *Launcher) VerifyLimits(ctx context.Context) error {
	lim, err := l.MeasureLimits(ctx)
	if err != nil {
		return err
	}
	if gv := lim.Runtime == "gvisor"; gv != l.opts.GVisor() {
		if gv {
			return fmt.Errorf("%w: the sandbox runs under gVisor, but runtime %q is not taken for gVisor (its name must contain \"gvisor\" or \"runsc\", e.g. a RuntimeClass named gvisor)", ErrRuntimeMismatch, l.opts.Runtime)
		}
		return fmt.Errorf("%w: runtime %q is taken for gVisor (its name contains \"gvisor\" or \"runsc\"), but the sandbox's kernel is not gVisor's", ErrRuntimeMismatch, l.opts.Runtime)
	}
	if err := l.verifySeccomp(lim); err != nil {
		return err
	}
	if bad := l.Unenforced(lim); len(bad) > 0 {
		hint := "rootless Podman needs cgroup v2 with delegation to apply them"
		if h, ok := l.be.(LimitsHinter); ok {
			hint = h.LimitsHint()
		}
		if lim.Runtime == "gvisor" {
			hint = "under gVisor the memory limit is tried with an allocation and the process limit (RLIMIT_NPROC) with threads; see docs/engines.md"
		}
		return fmt.Errorf("%w: %s (%s)", ErrLimitsNotEnforced, strings.Join(bad, "; "), hint)
	}
	return nil
}

// verifySeccomp refuses a sandbox whose io_uring_setup was not refused with EPERM.
func (l *Launcher) verifySeccomp(lim Limits) error {
	if lim.IOUringSetup == "EPERM" {
		return nil
	}
	seen := lim.IOUringSetup
	if seen == "" {
		seen = "nothing (the limits program did not say)"
	}
	hint := "the bootstrap's seccomp filter (launcher/syscalls, installed by boot.py before any program runs) is not in force there, and the runtime's profile does not deny io_uring either"
	if h, ok := l.be.(SeccompHinter); ok {
		if adv := h.SeccompHint(); adv != nil {
			return &backend.SettingError{Setting: adv.Setting, Err: ErrSeccompNotEnforced, Text: func(v backend.Vars) string {
				return fmt.Sprintf("%v: io_uring_setup in a sandbox answered %s, want EPERM (%s; %s)", ErrSeccompNotEnforced, seen, hint, adv.Text(v))
			}}
		}
	}
	return fmt.Errorf("%w: io_uring_setup in a sandbox answered %s, want EPERM (%s)", ErrSeccompNotEnforced, seen, hint)
}

func limitText(v int64) string {
	switch v {
	case -1:
		return "unlimited"
	case -2:
		return "nothing (no cgroup file visible)"
	}
	return fmt.Sprint(v)
}
