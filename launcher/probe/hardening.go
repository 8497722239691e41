package probe

import "github.com/mcp-exec/mcp-exec/launcher"

// Probes of what a sandbox's user could write that the end of a run does not wipe.
// The seccomp side (namespaces, keyrings, userfaultfd, perf_event_open, bpf) is
// seccomp_denies_dangerous_syscalls's.

// pyWritableFiles walks every file outside /tmp, /dev/shm and /dev/mqueue and every
// read-write mount of its own, and fails on any the sandbox's user can write.
var pyWritableFiles = py("writable_files")

// hardeningProbes are appended to All's list.
func hardeningProbes(mk func(name, claim, body string, check func(launcher.Result) error) Probe) []Probe {
	return []Probe{
		mk("no_writable_file_outside_wipe",
			"no regular file outside /tmp, /dev/shm and /dev/mqueue, and no read-write mount of its own (a volume, a bind such as Kubernetes' /dev/termination-log), is writable by the sandbox's user",
			pyWritableFiles, nil),
	}
}
