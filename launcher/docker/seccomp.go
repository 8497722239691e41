package docker

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// deniedSyscalls are removed from the engine's default seccomp profile: the table in
// launcher/syscalls, which the process backend's per-run filter is built from too
// (io_uring, ptrace, process_vm_readv/writev, pidfd_getfd; why: see there).
var deniedSyscalls = syscalls.Names()

// seccompJSON is the profile sent with every sandbox: moby's default profile, built in
// Go so that it does not depend on what the engine ships, minus deniedSyscalls.
var seccompJSON = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	for _, sc := range p.Syscalls {
		sc.Names = slices.DeleteFunc(sc.Names, func(n string) bool {
			return slices.Contains(deniedSyscalls, n)
		})
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(sc *seccomp.Syscall) bool {
		//lint:ignore SA1019 a rule may still name its one syscall in the old field; such a rule is kept
		return len(sc.Names) == 0 && sc.Name == ""
	})
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding seccomp profile: %w", err)
	}
	return string(b), nil
})

// gvisorSeccompJSON is seccompJSON for gVisor (runsc --oci-seccomp), whose Sentry
// applies the profile to the program's system calls but answers every denial with
// EPERM, whatever the rule's errnoRet. The default profile denies clone3 with ENOSYS
// so that glibc falls back to clone, whose flags the profile can inspect; with EPERM
// instead, glibc gives up and no thread can start. So under gVisor clone3 is allowed:
// what it could do beyond clone (namespaces) happens in gVisor's own kernel, and
// unshare, setns and clone with namespace flags stay denied.
var gvisorSeccompJSON = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	for _, sc := range p.Syscalls {
		sc.Names = slices.DeleteFunc(sc.Names, func(n string) bool {
			return slices.Contains(deniedSyscalls, n) || n == "clone3" && sc.ErrnoRet != nil
		})
	}
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(sc *seccomp.Syscall) bool {
		//lint:ignore SA1019 a rule may still name its one syscall in the old field; such a rule is kept
		return len(sc.Names) == 0 && sc.Name == ""
	})
	clone3 := &seccomp.Syscall{}
	clone3.Names, clone3.Action = []string{"clone3"}, specs.ActAllow
	p.Syscalls = append(p.Syscalls, clone3)
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encoding seccomp profile: %w", err)
	}
	return string(b), nil
})

// SeccompProfile returns the seccomp profile every sandbox gets, as JSON, for tools
// that run containers beside the launcher's (the benchmark's `docker run` baseline).
func SeccompProfile() (string, error) { return seccompJSON() }

// GVisorSeccompProfile is SeccompProfile for sandboxes under gVisor (runsc
// --oci-seccomp): clone3 allowed (see gvisorSeccompJSON), for a Kubernetes RuntimeClass
// whose handler is runsc.
func GVisorSeccompProfile() (string, error) { return gvisorSeccompJSON() }
