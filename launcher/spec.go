package launcher

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/syscalls"
)

// Labels on every sandbox. They carry ownership metadata only, never caller data, so
// that a restarted server can find and remove what it left behind.
const (
	LabelRole     = backend.LabelRole     // always "sandbox"
	LabelInstance = backend.LabelInstance // Options.Instance of the server that made it
)

// sandboxUID is the unprivileged user every program runs as (the distroless
// "nonroot" id, which the image also defines).
const sandboxUID = 65532

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

// SpecOf is the backend-neutral description of every sandbox a launcher with options
// o makes (defaults applied). It is pure, and holds nothing of any job: the backend
// turns it into its own hardened form (docker.ContainerSpec for containers).
func SpecOf(o Options) backend.Spec {
	o = o.withDefaults()
	s := backend.Spec{
		Image:    o.Image,
		Command:  bootCommand(o),
		Env:      slices.Clone(sandboxEnv),
		UID:      sandboxUID,
		GID:      sandboxUID,
		WorkDir:  WorkDir,
		Hostname: "sandbox",
		Labels: map[string]string{
			LabelRole:     backend.RoleSandbox,
			LabelInstance: o.Instance,
		},
		Memory:    o.Memory,
		Pids:      o.Pids,
		CPUs:      o.CPUs,
		TmpfsSize: o.TmpfsSize,
		Runtime:   o.Runtime,
	}
	if !o.Owner.IsZero() {
		s.Labels[backend.LabelOwner] = o.Owner.String()
		if o.OwnerContainer != "" {
			s.Labels[backend.LabelOwnerContainer] = o.OwnerContainer
		}
	}
	return s
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
		bootFilter(),
	}
}

// pooledSpec is SpecOf for a warm-pool sandbox: its bootstrap also starts the
// interpreters of o.Prestart ahead (boot.py, _ahead).
func pooledSpec(o Options) backend.Spec {
	s := SpecOf(o)
	if len(o.Prestart) > 0 {
		s.Command = append(slices.Clone(s.Command), "prestart="+strings.Join(o.Prestart, ","))
	}
	return s
}

// bootFilter is the bootstrap's last argument: launcher/syscalls' seccomp filter,
// which it installs on itself before anything else (boot.py, install_filter), on every
// backend: the runtime's own profile may be weaker (containerd's RuntimeDefault allows
// io_uring) or missing (a pod without one, a container run unconfined). It covers
// every architecture the table knows, since the sandbox's machine (a pod's node, a
// remote engine's host) need not be the server's; a call of any other ABI kills.
var bootFilter = sync.OnceValue(func() string {
	prog, err := syscalls.Filter(syscalls.AllArches()...)
	if err != nil {
		panic(err) // a fixed table: TestSpecCommand builds it
	}
	return "seccomp=" + hex.EncodeToString(syscalls.Encode(prog))
})
