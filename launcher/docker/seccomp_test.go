package docker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// seccompTestProfile returns the profile as the engine receives it, decoded.
func seccompTestProfile(t *testing.T) (string, *seccomp.Seccomp) {
	t.Helper()
	js, err := seccompJSON()
	if err != nil {
		t.Fatalf("seccompJSON: %v", err)
	}
	var p seccomp.Seccomp
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatalf("seccompJSON is not a seccomp profile: %v", err)
	}
	return js, &p
}

// seccompEffective resolves the profile's conditional rules the way the engine does
// for a container with the given bounding capabilities (on this machine's
// architecture and kernel).
func seccompEffective(t *testing.T, js string, caps []string) *specs.LinuxSeccomp {
	t.Helper()
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: caps}}}
	eff, err := seccomp.LoadProfile(js, rs)
	if err != nil {
		t.Fatalf("engine would reject the profile: %v", err)
	}
	if eff == nil {
		t.Fatalf("engine would run without seccomp: the profile resolves to nothing")
	}
	return eff
}

// seccompPermits returns the rules of eff that let name through in some way.
func seccompPermits(eff *specs.LinuxSeccomp, name string) []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, r := range eff.Syscalls {
		if slices.Contains(r.Names, name) && !seccompDenies(r.Action) {
			rules = append(rules, r)
		}
	}
	return rules
}

func seccompDenies(a specs.LinuxSeccompAction) bool {
	switch a {
	case specs.ActErrno, specs.ActKill, specs.ActKillThread, specs.ActKillProcess, specs.ActTrap:
		return true
	}
	return false
}

// seccompRiskySyscalls must not be allowed to a container without capabilities.
var seccompRiskySyscalls = []string{"unshare", "mount", "umount2", "setns", "bpf", "keyctl", "add_key", "request_key", "kexec_load", "init_module", "pivot_root"}

func TestSeccompParses(t *testing.T) {
	js, p := seccompTestProfile(t)
	if !json.Valid([]byte(js)) {
		t.Fatalf("seccompJSON: got invalid JSON")
	}
	if len(p.Syscalls) < 10 {
		t.Errorf("syscalls: got %d rules, want the default profile's (dozens)", len(p.Syscalls))
	}
	if len(p.ArchMap) == 0 {
		t.Errorf("archMap: got none, want the default profile's architectures")
	}
	for i, sc := range p.Syscalls {
		//lint:ignore SA1019 the old single-name field counts as a name too
		if len(sc.Names) == 0 && sc.Name == "" {
			t.Errorf("syscalls[%d]: got a rule without names (action %s), want none", i, sc.Action)
		}
	}
	// The same call returns the same profile.
	js2, err := seccompJSON()
	if err != nil || js2 != js {
		t.Errorf("second seccompJSON call: got a different result (err %v)", err)
	}
}

func TestSeccompDefaultActionErrno(t *testing.T) {
	js, p := seccompTestProfile(t)
	if p.DefaultAction != specs.ActErrno {
		t.Errorf("defaultAction: got %q, want %q", p.DefaultAction, specs.ActErrno)
	}
	if p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != uint(unix.EPERM) {
		t.Errorf("defaultErrnoRet: got %v, want EPERM (%d)", p.DefaultErrnoRet, unix.EPERM)
	}
	eff := seccompEffective(t, js, nil)
	if eff.DefaultAction != specs.ActErrno {
		t.Errorf("effective defaultAction: got %q, want %q", eff.DefaultAction, specs.ActErrno)
	}
	if len(eff.Architectures) == 0 {
		t.Errorf("effective architectures: got none, want this machine's")
	}
}

func TestSeccompNoIOUring(t *testing.T) {
	js, p := seccompTestProfile(t)
	if strings.Contains(js, "io_uring") {
		i := strings.Index(js, "io_uring")
		t.Errorf("seccompJSON: got %q, want no io_uring syscall anywhere", js[max(i-40, 0):min(i+40, len(js))])
	}
	for i, sc := range p.Syscalls {
		//lint:ignore SA1019 the old single-name field counts as a name too
		for _, n := range append(slices.Clone(sc.Names), sc.Name) {
			if strings.HasPrefix(n, "io_uring") {
				t.Errorf("syscalls[%d]: got %q (action %s), want no io_uring syscall", i, n, sc.Action)
			}
		}
	}
	// Even with every capability there is no rule for them: the default action denies.
	eff := seccompEffective(t, js, []string{"CAP_SYS_ADMIN", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE"})
	for _, n := range deniedSyscalls {
		if rules := seccompPermits(eff, n); len(rules) != 0 {
			t.Errorf("%s: got allowed by %+v, want denied", n, rules)
		}
	}
}

func TestSeccompEssentialsAllowed(t *testing.T) {
	js, _ := seccompTestProfile(t)
	eff := seccompEffective(t, js, nil)
	for _, n := range []string{"read", "write", "execve", "exit_group", "mmap", "openat", "wait4"} {
		rules := seccompPermits(eff, n)
		if !slices.ContainsFunc(rules, func(r specs.LinuxSyscall) bool {
			return r.Action == specs.ActAllow && len(r.Args) == 0
		}) {
			t.Errorf("%s: got rules %+v, want an unconditional SCMP_ACT_ALLOW", n, rules)
		}
	}
	// clone is allowed, but only without namespace flags.
	rules := seccompPermits(eff, "clone")
	if len(rules) == 0 {
		t.Fatalf("clone: got no rule allowing it, want one (Python needs threads and subprocesses)")
	}
	for _, r := range rules {
		if r.Action != specs.ActAllow {
			t.Errorf("clone: got action %s, want %s", r.Action, specs.ActAllow)
		}
		if !slices.ContainsFunc(r.Args, func(a specs.LinuxSeccompArg) bool {
			return a.Op == specs.OpMaskedEqual && a.Value&unix.CLONE_NEWUSER != 0 && a.Value&unix.CLONE_NEWNS != 0 && a.ValueTwo == 0
		}) {
			t.Errorf("clone: got rule %+v, want it conditional on no CLONE_NEWUSER/CLONE_NEWNS flags", r)
		}
	}
}

func TestSeccompRiskySyscallsDenied(t *testing.T) {
	js, p := seccompTestProfile(t)

	// In the profile, a rule that lets one of them through must depend on a capability
	// the sandbox does not have (it drops ALL).
	for i, sc := range p.Syscalls {
		if seccompDenies(sc.Action) {
			continue
		}
		//lint:ignore SA1019 the old single-name field counts as a name too
		for _, n := range append(slices.Clone(sc.Names), sc.Name) {
			if !slices.Contains(seccompRiskySyscalls, n) {
				continue
			}
			if sc.Includes == nil || len(sc.Includes.Caps) == 0 {
				t.Errorf("syscalls[%d]: got %q with action %s and includes %+v, want it only under includes.caps", i, n, sc.Action, sc.Includes)
			}
		}
	}

	// As the engine resolves it for a container without capabilities.
	eff := seccompEffective(t, js, nil)
	for _, n := range seccompRiskySyscalls {
		if rules := seccompPermits(eff, n); len(rules) != 0 {
			t.Errorf("%s without capabilities: got allowed by %+v, want denied", n, rules)
		}
	}

	// The resolution above can tell: with CAP_SYS_ADMIN the same profile allows mount.
	admin := seccompEffective(t, js, []string{"CAP_SYS_ADMIN"})
	for _, n := range []string{"mount", "unshare"} {
		if len(seccompPermits(admin, n)) == 0 {
			t.Errorf("%s with CAP_SYS_ADMIN: got denied, want allowed (is the capability resolution working?)", n)
		}
	}
}

// TestSeccompGVisor: gVisor's profile differs from the default only in clone3, which it
// allows (runsc answers denials with EPERM, and glibc falls back to clone only on
// ENOSYS); everything risky stays denied, io_uring and the process-inspection calls
// included.
func TestSeccompGVisor(t *testing.T) {
	js, err := gvisorSeccompJSON()
	if err != nil {
		t.Fatal(err)
	}
	eff := seccompEffective(t, js, nil)
	if len(seccompPermits(eff, "clone3")) == 0 {
		t.Error("clone3: got denied, want allowed under gVisor")
	}
	for _, r := range eff.Syscalls {
		if slices.Contains(r.Names, "clone3") && r.ErrnoRet != nil {
			t.Errorf("clone3: a rule with errnoRet %d remains: %+v", *r.ErrnoRet, r)
		}
	}
	for _, n := range append(slices.Clone(seccompRiskySyscalls), deniedSyscalls...) {
		if rules := seccompPermits(eff, n); len(rules) != 0 {
			t.Errorf("%s under gVisor: got allowed by %+v, want denied", n, rules)
		}
	}
	def, err := seccompJSON()
	if err != nil {
		t.Fatal(err)
	}
	base := seccompEffective(t, def, nil)
	if len(seccompPermits(base, "clone3")) != 0 {
		t.Error("clone3: allowed by the default profile, want ENOSYS there")
	}
	if got, want := len(eff.Syscalls), len(base.Syscalls); got > want+1 {
		t.Errorf("gVisor's profile has %d rules, the default %d: want at most one more (clone3)", got, want)
	}
}
