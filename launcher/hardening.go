package launcher

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
)

// Labels on every sandbox container. They carry ownership metadata only, never
// caller data, so that a restarted server can find and remove what it left behind.
const (
	LabelRole     = "dev.mcp-exec.role"     // always "sandbox"
	LabelInstance = "dev.mcp-exec.instance" // Options.Instance of the server that made it
)

// sandboxUID is the unprivileged user every program runs as (the distroless
// "nonroot" id, which the image also defines).
const sandboxUID = "65532:65532"

// WorkDir is the program's working directory: the private tmpfs.
const WorkDir = "/tmp"

// sandboxEnv is the whole environment of a sandbox: nothing from the server's.
var sandboxEnv = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
	"MPLBACKEND=Agg",
	"MPLCONFIGDIR=/tmp/.config/matplotlib",
	"XDG_CACHE_HOME=/tmp/.cache",
	"XDG_CONFIG_HOME=/tmp/.config",
	"PYTHONDONTWRITEBYTECODE=1",
	// Podman adds TERM=xterm and container=podman unless they are set: pin them so
	// that every engine gives the same environment.
	"TERM=dumb",
	"container=mcp-exec",
}

// SandboxEnv returns a copy of a sandbox's whole environment, for tools that compare
// other containers with the launcher's (the benchmark's `docker run` baseline).
func SandboxEnv() []string { return slices.Clone(sandboxEnv) }

// containerSpec is the single place where a sandbox's configuration is decided. It is
// pure: the same Options give the same containers, cold or warm. Every field that
// weakens isolation when left at the engine's default is set explicitly here.
func containerSpec(o Options, seccompProfile string) (*container.Config, *container.HostConfig) {
	pids := o.Pids
	cfg := &container.Config{
		Image:           o.Image,
		User:            sandboxUID,
		Cmd:             bootCommand(o),
		Entrypoint:      []string{},
		Env:             append([]string(nil), sandboxEnv...),
		WorkingDir:      WorkDir,
		Hostname:        "sandbox",
		NetworkDisabled: true,
		// Code and stdin arrive on the attached stdin stream. StdinOnce makes the
		// engine close the program's stdin when we half-close the stream.
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Tty:          false,
		Labels: map[string]string{
			LabelRole:     "sandbox",
			LabelInstance: o.Instance,
		},
	}
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt: []string{
			"no-new-privileges:true",
			"seccomp=" + seccompProfile,
		},
		// The json-file driver would write the program's output under the engine's
		// data root while it runs; attach works without any log driver.
		LogConfig: container.LogConfig{Type: "none"},
		Tmpfs: map[string]string{
			WorkDir: tmpfsOptions(o.TmpfsSize, "rw,noexec,nosuid,nodev"),
			// Podman mounts writable, unlimited, exec-allowed tmpfs at /run and
			// /var/tmp even under a read-only root; explicit read-only mounts close
			// them (on Docker they merely shadow empty directories).
			"/run":     "ro,noexec,nosuid,nodev,size=65536",
			"/var/tmp": "ro,noexec,nosuid,nodev,size=65536",
		},
		IpcMode:     "private",
		ShmSize:     o.TmpfsSize,
		Runtime:     o.Runtime,
		AutoRemove:  false, // we remove it ourselves, on every path
		Privileged:  false,
		Init:        new(false), // the bootstrap is PID 1 so the program cannot signal it
		OomScoreAdj: 0,
		Resources: container.Resources{
			Memory:     o.Memory,
			MemorySwap: o.Memory, // equal to Memory: no swap
			NanoCPUs:   nanoCPUs(o.CPUs),
			PidsLimit:  &pids,
		},
	}
	if o.GVisor() {
		// gVisor's kernel runs the program's tasks: threads are not host tasks, and each
		// process costs the host a few (measured: 1-2 with systrap, ~7 with ptrace), on
		// top of the Sentry's and the Gofer's ~26-40. So the pids limit is enforced
		// inside, by RLIMIT_NPROC, which gVisor counts per sandbox (on the host it would
		// count every sandbox's uid 65532 together), and the host's pids cgroup is a
		// backstop sized for gVisor's overhead: past it a spawn fails with ENOMEM, and
		// with the old ptrace platform the whole sandbox dies.
		host.Ulimits = []*container.Ulimit{{Name: "nproc", Soft: o.Pids, Hard: o.Pids}}
		hostPids := GVisorHostPids(o.Pids)
		host.Resources.PidsLimit = &hostPids
	}
	// Setting ReadonlyPaths replaces the engine's default list (MaskedPaths stays the
	// engine's): readonlyPaths keeps Docker's and adds the cgroup mounts.
	host.ReadonlyPaths = append([]string(nil), readonlyPaths...)
	return cfg, host
}

// GVisorHostPids is the host's pids cgroup limit of a gVisor sandbox whose program
// may have pids tasks (see containerSpec).
func GVisorHostPids(pids int64) int64 { return 8*pids + 64 }

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

// bootCommand runs the bootstrap as PID 1. It is fixed text, the same for every
// exec: nothing in it comes from the caller.
func bootCommand(o Options) []string {
	return []string{
		o.Python, "-I", "-c", bootSource,
		"parent",
		strconv.Itoa(o.MaxOutputBytes),
		strings.Join(o.Preload, ","),
		OutputDir,
		strconv.Itoa(o.MaxFileBytes),
		strconv.Itoa(o.MaxFilesBytes),
	}
}
