package docker

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// ContainerSpec is the single place where a sandbox container's configuration is
// decided; everything that runs a sandbox container (the Backend, the benchmark's
// `docker run` baseline and churn) takes it from here. It is pure: the same Spec gives
// the same containers, cold or warm. Every field that weakens isolation when left at
// the engine's default is set explicitly here. seccompOption is what follows
// "seccomp=": the profile (SeccompProfile) or, for Podman, the path of a file holding it.
func ContainerSpec(s backend.Spec, seccompOption string) (*container.Config, *container.HostConfig) {
	pids := s.Pids
	cfg := &container.Config{
		Image:           s.Image,
		User:            strconv.Itoa(s.UID) + ":" + strconv.Itoa(s.GID),
		Cmd:             slices.Clone(s.Command),
		Entrypoint:      []string{},
		Env:             slices.Clone(s.Env),
		WorkingDir:      s.WorkDir,
		Hostname:        s.Hostname,
		NetworkDisabled: true,
		// Code and stdin arrive on the attached stdin stream. StdinOnce makes the
		// engine close the program's stdin when we half-close the stream.
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Tty:          false,
		Labels:       maps.Clone(s.Labels),
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt: []string{
			"no-new-privileges:true",
			"seccomp=" + seccompOption,
		},
		// The json-file driver would write the program's output under the engine's
		// data root while it runs; attach works without any log driver.
		LogConfig: container.LogConfig{Type: "none"},
		Tmpfs: map[string]string{
			s.WorkDir: tmpfsOptions(s.TmpfsSize, "rw,noexec,nosuid,nodev"),
			// Podman mounts writable, unlimited, exec-allowed tmpfs at /run and
			// /var/tmp even under a read-only root; explicit read-only mounts close
			// them (on Docker they merely shadow empty directories).
			"/run":     "ro,noexec,nosuid,nodev,size=65536",
			"/var/tmp": "ro,noexec,nosuid,nodev,size=65536",
		},
		IpcMode:     "private",
		ShmSize:     s.TmpfsSize,
		Runtime:     s.Runtime,
		AutoRemove:  false, // we remove it ourselves, on every path
		Privileged:  false,
		Init:        new(false), // the bootstrap is PID 1 so the program cannot signal it
		OomScoreAdj: 0,
		Resources: container.Resources{
			Memory:     s.Memory,
			MemorySwap: s.Memory, // equal to Memory: no swap
			NanoCPUs:   nanoCPUs(s.CPUs),
			PidsLimit:  &pids,
			// No core dumps, soft and hard (a program cannot raise it): the engine
			// passes on its own RLIMIT_CORE, often unlimited, and a host core_pattern
			// that pipes to a collector (systemd-coredump honours the limit) would
			// write the program's memory, the caller's data, to the host's disk. The
			// bootstrap sets it too.
			Ulimits: []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	if s.EgressDir != "" {
		host.Mounts = append(host.Mounts, egressMount(s.EgressDir))
	}
	if backend.GVisor(s.Runtime) {
		// gVisor's kernel runs the program's tasks: threads are not host tasks, and each
		// process costs the host a few (measured: 1-2 with systrap, ~7 with ptrace), on
		// top of the Sentry's and the Gofer's ~26-40. So the pids limit is enforced
		// inside, by RLIMIT_NPROC, which gVisor counts per sandbox (on the host it would
		// count every sandbox's uid 65532 together), and the host's pids cgroup is a
		// backstop sized for gVisor's overhead: past it a spawn fails with ENOMEM, and
		// with the old ptrace platform the whole sandbox dies.
		host.Ulimits = append(host.Ulimits, &container.Ulimit{Name: "nproc", Soft: s.Pids, Hard: s.Pids})
		hostPids := backend.GVisorHostPids(s.Pids)
		host.Resources.PidsLimit = &hostPids
	}
	// Setting ReadonlyPaths replaces the engine's default list (MaskedPaths stays the
	// engine's): readonlyPaths keeps Docker's and adds the cgroup mounts.
	host.ReadonlyPaths = append([]string(nil), readonlyPaths...)
	return cfg, host
}

// readonlyPaths is the HostConfig.ReadonlyPaths of every sandbox: the runtime bind-mounts
// each existing path onto itself read-only, after the other mounts; absent paths are
// skipped. First Docker's default list (the engine's, which a non-nil list replaces).
// Then /sys/fs/cgroup: on cgroup v1, crun 1.8 mounts the tmpfs that holds the
// controller mounts read-write with mode 1777 (runc: read-write, mode 0555), so the
// program could create files there. Its read-only bind is recursive and copies the
// controller mounts beneath as crun left them at that point, still read-write (crun
// makes them read-only at the very end, on the originals), so every v1 controller
// directory follows, each made read-only again. The bootstrap still reads the OOM
// counter and VerifyLimits the limits through them. Podman 4's compatible API ignores
// ReadonlyPaths; its runc leaves the tmpfs mode 0555 and the controllers read-only.
var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	"/sys/fs/cgroup",
	// The kernel's cgroup v1 controllers, the combined names hosts mount some of them
	// under, the systemd named hierarchy and the hybrid layout's cgroup2 mount. One
	// missing here stays read-write on crun, which the cgroup_files_read_only probe
	// reports.
	"/sys/fs/cgroup/blkio", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct",
	"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/debug", "/sys/fs/cgroup/devices",
	"/sys/fs/cgroup/freezer", "/sys/fs/cgroup/hugetlb", "/sys/fs/cgroup/memory",
	"/sys/fs/cgroup/misc", "/sys/fs/cgroup/net_cls", "/sys/fs/cgroup/net_prio",
	"/sys/fs/cgroup/net_cls,net_prio", "/sys/fs/cgroup/perf_event", "/sys/fs/cgroup/pids",
	"/sys/fs/cgroup/rdma", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified",
}

// nanoCPUs converts a CPU count to the engine's unit. It never returns 0, which the
// engine would read as "no limit": the smallest quota Docker accepts is 0.01 CPU.
func nanoCPUs(cpus float64) int64 {
	return max(int64(math.Round(cpus*1e9)), 1e7)
}

func tmpfsOptions(size int64, flags string) string {
	return flags + ",size=" + strconv.FormatInt(size, 10) + ",mode=1777"
}

// egressMount bind-mounts the sandbox's egress channel directory read-only:
// the sandbox can connect to the socket in it (connect needs no write access to the
// filesystem) but create nothing there. Nothing propagates back to the host.
func egressMount(dir string) mount.Mount {
	return mount.Mount{
		Type:        mount.TypeBind,
		Source:      dir,
		Target:      backend.EgressMount,
		ReadOnly:    true,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
	}
}
