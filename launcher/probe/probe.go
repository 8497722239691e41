// Package probe states the sandbox contract as programs. Each Probe is a program
// that runs through the real launcher, asserts one promise of the contract from
// inside the sandbox, and fails when the promise is broken; All lists the Python set,
// Languages a smaller set per language besides Python (bash, JavaScript: lang.go), and
// Run runs one. The launcher's tests and `mcp-exec selftest` use it.
//
// Probes are decisive: an attempt that fails for another reason than the sandbox (a
// timeout, the wrong errno) is a failure, as is any attempt that succeeds. Where it is
// possible, a syscall is called with arguments for which the kernel itself would
// answer something other than the denial, so that the denial can only come from the
// sandbox. A program's verdict is its last line (Verdict); evidence only the engine's
// host can see (Probe.Outside) that could not be taken is reported as not checked,
// never as passed. Under gVisor (Params.GVisor) the probes assert what gVisor's kernel
// enforces where it differs from Linux's.
//
// The package does not talk to the engine itself: Run feeds each Job to a Runner and
// asks an Engine (both: *launcher.Launcher) for a sandbox's host pid and removal.
package probe

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Probe is one promise of the sandbox contract, as a program and a verdict.
type Probe struct {
	Name  string       // snake_case invariant name, e.g. "network_only_loopback"
	Claim string       // one line for humans: what it proves
	Job   launcher.Job // code (+stdin/timeout) to run in a fresh sandbox
	// Check returns nil when the invariant holds, else an error saying what was seen.
	Check func(launcher.Result) error
	// Next, when set, runs in another fresh sandbox after Job passed its Check, and
	// proves that nothing of the first run is visible there. Runners run it only
	// after this probe passed, and report its failure under this probe's name.
	Next *Probe
	// AwaitRemoval asks the runner, before it runs Next, to confirm that the container
	// that ran Job is gone from the engine (every process of it with it). Job prints
	// the container's id on a line "SANDBOX-ID <id>"; SandboxID extracts it.
	AwaitRemoval bool
	// Outside, when set, takes the probe's evidence from outside the sandbox (the
	// engine host's view of it) while Job, which then only holds its sandbox open and
	// prints its id on a "SANDBOX-ID <id>" line, runs. Run ends Job once Outside has
	// returned. The view is of the seccomp mode, capabilities and namespaces of the
	// sandbox's processes and of its cgroup's limits and CPU accounting (host.go).
	Outside func(ctx context.Context, sb Sandbox) (string, error)
	// Exclusive asks runners to run the probe alone, no other probe's sandbox busy
	// beside it: its evidence is the CPU time its sandbox got, which a sibling's
	// burst (a fork bomb's, a burn's) takes a share of. Measured: the selftest's
	// probes run 4 at a time, and under gVisor in CI cpu_quota_host once saw 1.66 of
	// its 2 CPU-s, never throttled, beside them (2026-12-03); alone it gets 2.0 and is
	// throttled in 20 of 20 periods.
	Exclusive bool
}

// Params carry the limits the launcher was configured with, so that the probes
// assert against the configured values rather than against defaults.
type Params struct {
	Memory    int64   // bytes; launcher.Options.Memory
	Pids      int64   // launcher.Options.Pids
	CPUs      float64 // launcher.Options.CPUs
	TmpfsSize int64   // bytes; launcher.Options.TmpfsSize
	// CanaryName and CanaryValue name an environment variable set in the server's
	// process; the sandbox must see neither. Empty skips that check (the sandbox's
	// environment must still hold only the sandbox's own keys).
	CanaryName, CanaryValue string
	// HostAddrs are addresses of the engine's host (IPv4 or IPv6, no zone) that the
	// sandbox must not reach, besides the default bridge gateway 172.17.0.1 and the
	// cloud metadata address 169.254.169.254. Loopback and link-local ones are ignored.
	HostAddrs []string
	// GVisor says the sandbox runs under gVisor (runsc): the probes then assert what
	// gVisor's kernel enforces where it differs from Linux's (each difference printed
	// in the probe's output), and every probe fails when the kernel it finds is not the
	// one this says.
	GVisor bool
	// Process says the programs run as children of the server in its own container
	// (the process backend, standalone mode): PID 1 is the server, not the bootstrap.
	// bootstrap_unreachable then sends PID 1 no SIGTERM or SIGINT (the server kills the
	// run under way on either, by design) and does not expect to be PID 1's child.
	Process bool
	// Token names the files and processes of the two-run probes; "" derives one from
	// the clock. Runs that share an engine should use distinct tokens.
	Token string
}

// ParamsOf takes the limits from a launcher's effective options.
func ParamsOf(o launcher.Options) Params {
	return Params{Memory: o.Memory, Pids: o.Pids, CPUs: o.CPUs, TmpfsSize: o.TmpfsSize, GVisor: o.GVisor()}
}

// SandboxUID is the user and group id every program runs as.
const SandboxUID = 65532

// SandboxEnvKeys are the environment variables a sandbox may see: those launcher.SpecOf
// sets (launcher/spec.go) and HOSTNAME, which Docker adds.
var SandboxEnvKeys = []string{
	"PATH", "HOME", "LANG", "MPLBACKEND", "MPLCONFIGDIR", "XDG_CACHE_HOME",
	"XDG_CONFIG_HOME", "PYTHONDONTWRITEBYTECODE", "HOSTNAME", "TERM", "container",
}

const (
	okLine     = "PROBE OK"
	failPrefix = "PROBE FAIL"
	// probeTimeout bounds every probe's run; none needs more than a few seconds.
	probeTimeout = 60 * time.Second
)

// All returns every probe, asserting against the limits in o.
func All(o Params) []Probe {
	o = withToken(o)
	hdr := header(o)
	mk := func(name, claim, body string, check func(launcher.Result) error) Probe {
		if check == nil {
			check = Passed
		}
		return Probe{
			Name:  name,
			Claim: claim,
			Job:   launcher.Job{Code: prelude + hdr + body, Timeout: probeTimeout},
			Check: check,
		}
	}

	persist := mk("tmp_not_persisted",
		"files written to /tmp or /dev/shm and a SysV shared memory segment made in one exec are absent in the next, whose /tmp holds only the bootstrap's directories",
		pyPersistWrite, nil)
	next := mk("tmp_not_persisted", persist.Claim, pyPersistCheck, nil)
	persist.Next = &next

	daemon := mk("daemon_not_persisted",
		"a setsid'd double-forked daemon started by one exec is gone, with its container, before the next exec starts",
		pyDaemonStart, daemonStarted)
	daemonNext := mk("daemon_not_persisted", daemon.Claim, pyDaemonCheck, nil)
	daemon.Next = &daemonNext
	daemon.AwaitRemoval = true

	childOOM := mk("memory_oom_reported_for_child",
		"an OOM kill of a child of the program is seen inside (SIGKILL, oom_kill counter) and reported as OOMKilled",
		pyMemoryChild, oomReported)
	if o.GVisor {
		// gVisor keeps no OOM counter inside, and the engine's OOMKilled stays false:
		// the kill of a child the program survives cannot be reported (docs/engines.md).
		childOOM.Claim = "an OOM kill of a child of the program is seen inside (SIGKILL) and the program survives; under gVisor it is not reported as OOMKilled (no counter)"
		childOOM.Check = Passed
	}

	host := mk("host_view",
		"seen from the engine's host, every process of the sandbox is under a seccomp filter and no_new_privs, outside the host's network namespace, holds no capability there (runc: uid 65532, no capability at all), and the container's cgroup carries the configured memory (no swap), pids and CPU limits",
		pyHold, nil)
	host.Outside = func(_ context.Context, sb Sandbox) (string, error) { return HostEvidence(LocalHost, o, sb) }
	cpuHost := mk("cpu_quota_host",
		"seen from the engine's host, busy processes in the sandbox get no more CPU time than CPUs*wall (+20%), by the cgroup's own accounting (the only measure under gVisor), and the quota is seen at work: throttled, or the host saturated by others and the cgroup's limit as configured",
		pyBurn, nil)
	cpuHost.Outside = func(ctx context.Context, sb Sandbox) (string, error) { return HostCPU(ctx, LocalHost, o, sb) }
	cpuHost.Exclusive = true

	return append(append([]Probe{
		host,
		mk("network_only_loopback",
			"the only network interface is lo and there is no route off it",
			pyOnlyLoopback, nil),
		mk("network_tcp_outside_unreachable",
			"TCP connections to outside IPv4 and IPv6 addresses fail with ENETUNREACH",
			pyTCPOutside, nil),
		mk("network_udp_outside_unreachable",
			"UDP datagrams to outside IPv4 and IPv6 addresses fail with ENETUNREACH",
			pyUDPOutside, nil),
		mk("network_dns_fails",
			"resolving public and engine-provided host names fails (EAI_AGAIN/EAI_NONAME/EAI_FAIL/EAI_NODATA)",
			pyDNS, nil),
		mk("network_host_unreachable",
			"the bridge gateway 172.17.0.1, the metadata address and the host's own addresses are unreachable (ENETUNREACH); loopback is the sandbox's own",
			pyHostUnreachable, nil),
		mk("raw_sockets_denied",
			"raw IP and packet sockets cannot be opened (EPERM)",
			pyRawSockets, nil),
		mk("runs_as_unprivileged_user",
			"the program and the bootstrap run as uid/gid 65532, with no group 0, and cannot become root",
			pyUser, nil),
		mk("capabilities_empty",
			"every capability set (inheritable, permitted, effective, bounding, ambient) is empty, in the program and the bootstrap",
			pyCaps, nil),
		mk("no_new_privs",
			"no_new_privs is set in the program and the bootstrap",
			pyNoNewPrivs, nil),
		mk("seccomp_filter_active",
			"a seccomp filter (mode 2) confines the program and the bootstrap",
			pySeccompMode, nil),
		mk("seccomp_denies_dangerous_syscalls",
			"io_uring, userfaultfd, namespaces, mounts, keyrings, bpf, perf, ptrace, modules, kexec and friends are denied with the profile's errno",
			pySyscalls, nil),
		coreDumpsProbe(mk),
		mk("proc_sys_read_only",
			"kernel tunables under /proc/sys (and /proc/sysrq-trigger, /sys) cannot be written",
			pyProcSys, nil),
		mk("cgroup_files_read_only",
			"the container's cgroup limits exist and cannot be written, nor child cgroups made",
			pyCgroupRO, nil),
		mk("kernel_memory_unreadable",
			"/proc/kcore, /dev/mem, /dev/kmem and /dev/port cannot be read",
			pyKernelMemory, nil),
		mk("root_fs_read_only",
			"the root filesystem is read-only: no directory outside /tmp, /dev/shm and /dev/mqueue is writable, including /run and /var/tmp",
			pyRootFS, nil),
		mk("tmp_private_noexec_capped",
			"/tmp is a writable tmpfs, noexec/nosuid/nodev, capped at TmpfsSize (ENOSPC beyond); /dev/shm is noexec and capped too",
			pyTmp, nil),
		mk("no_engine_socket",
			"no engine socket is reachable: no known socket path, no unix socket anywhere in the filesystem or the network namespace",
			pyNoSocket, nil),
		mk("environment_isolated",
			"the environment holds only the sandbox's own variables: nothing of the server's, no canary",
			pyEnv, nil),
		mk("fds_only_std",
			"the program starts with file descriptors 0, 1 and 2 open and no other",
			pyFDs, nil),
		mk("bootstrap_unreachable",
			"PID 1 (the bootstrap) cannot be read, written, traced or killed by the program",
			pyPID1, nil),
		mk("memory_limit_kills_program",
			"memory is capped at Memory without swap: a program touching twice as much is OOM-killed and the Result says so",
			pyMemoryProgram, memoryKilled),
		childOOM,
		mk("pids_limit_stops_fork_bomb",
			"threads and processes stop below Pids (pids.max = Pids) and the program survives to report",
			pyPids, nil),
		cpuHost,
		mk("cpu_quota_enforced",
			"the CFS quota equals CPUs, and busy processes get no more CPU time than CPUs*wall (+20%)",
			pyCPU, nil),
	}, hardeningProbes(mk)...), // hardening.go
		persist,
		daemon,
	)
}

// withToken sets o.Token to the name the programs use: "mcpexecprobe" and the
// token's letters and digits (the clock's when there is none).
func withToken(o Params) Params {
	if o.Token == "" {
		o.Token = fmt.Sprintf("%x", time.Now().UnixNano())
	}
	o.Token = "mcpexecprobe" + regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(o.Token, "")
	return o
}

// header defines the configured values for the programs. JSON literals are valid
// Python literals for strings, numbers and lists of strings.
func header(o Params) string {
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	addrs := o.HostAddrs
	if addrs == nil {
		addrs = []string{}
	}
	return fmt.Sprintf(`MEMORY = %d
PIDS = %d
CPUS = %s
TMPFS_SIZE = %d
SANDBOX_UID = %d
SANDBOX_ENV_KEYS = %s
CANARY_NAME = %s
CANARY_VALUE = %s
HOST_ADDRS = %s
TOKEN = %s
GVISOR = %s
PROCESS = %s
`, o.Memory, o.Pids, js(o.CPUs), o.TmpfsSize, SandboxUID, js(SandboxEnvKeys),
		js(o.CanaryName), js(o.CanaryValue), js(addrs), js(o.Token), map[bool]string{true: "True", false: "False"}[o.GVisor],
		map[bool]string{true: "True", false: "False"}[o.Process])
}

// Verdict reads the probe's verdict from its output: nil for a final "PROBE OK"
// line, the reason of a "PROBE FAIL" line, or an error saying there was none.
//
// A probe's program (the prelude's finish) prints a final "PROBE OK" line only when
// every assertion passed; otherwise "PROBE FAIL: <what was seen>", and it exits 1. An
// exception it did not expect also ends in a "PROBE FAIL" line. A Check verifies that
// verdict and the exit status, plus what only the Result can show (OOMKilled): a
// probe whose promise is that the program gets killed (memory) prints a marker line
// before the act, and its Check then requires the kill in the Result.
func Verdict(stdout string) error {
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	for _, l := range lines {
		if reason, ok := strings.CutPrefix(l, failPrefix); ok {
			return fmt.Errorf("%s", strings.TrimSpace(strings.TrimPrefix(reason, ":")))
		}
	}
	if last := lines[len(lines)-1]; last != okLine {
		return fmt.Errorf("no verdict: the last line of stdout is %q, want %q", last, okLine)
	}
	return nil
}

// Passed is the Check of most probes: a "PROBE OK" verdict, exit status 0, no
// signal, no timeout, nothing cut.
func Passed(r launcher.Result) error {
	var errs []error
	if r.TimedOut {
		errs = append(errs, fmt.Errorf("timed out after %v", r.Duration.Round(time.Millisecond)))
	}
	if r.Truncated {
		errs = append(errs, errors.New("output truncated"))
	}
	if err := Verdict(r.Stdout); err != nil {
		errs = append(errs, err)
	}
	if r.ExitCode != 0 || r.Signal != 0 {
		errs = append(errs, fmt.Errorf("exit code %d (signal %d), want 0", r.ExitCode, r.Signal))
	}
	if r.OOMKilled {
		errs = append(errs, errors.New("OOM-killed"))
	}
	return errors.Join(errs...)
}

var sandboxIDLine = regexp.MustCompile(`(?m)^SANDBOX-ID ([0-9a-f]{12,64})$`)

// SandboxID returns the container id a probe printed on a "SANDBOX-ID <id>" line,
// or "".
func SandboxID(stdout string) string {
	m := sandboxIDLine.FindStringSubmatch(stdout)
	if m == nil {
		return ""
	}
	return m[1]
}

func daemonStarted(r launcher.Result) error {
	if err := Passed(r); err != nil {
		return err
	}
	if SandboxID(r.Stdout) == "" {
		return errors.New("the program printed no SANDBOX-ID line: cannot confirm its container is removed")
	}
	return nil
}

// memoryKilled: the program itself was OOM-killed (exit 137, SIGKILL, OOMKilled)
// after it had checked the configured limits and started allocating.
func memoryKilled(r launcher.Result) error {
	var errs []error
	if err := Verdict(r.Stdout); err != nil && !strings.HasPrefix(err.Error(), "no verdict") {
		return err // the program failed an assertion of its own
	}
	if !strings.Contains(r.Stdout, "\nALLOCATING\n") && !strings.HasPrefix(r.Stdout, "ALLOCATING\n") {
		errs = append(errs, errors.New("the program never reached its allocation (no ALLOCATING line)"))
	}
	if strings.Contains(r.Stdout, okLine) {
		errs = append(errs, errors.New("the program survived its allocation"))
	}
	if !r.OOMKilled {
		errs = append(errs, errors.New("OOMKilled is false, want true"))
	}
	if r.ExitCode != 137 || r.Signal != 9 {
		errs = append(errs, fmt.Errorf("exit code %d (signal %d), want 137 (SIGKILL)", r.ExitCode, r.Signal))
	}
	if r.TimedOut {
		errs = append(errs, errors.New("timed out, want an OOM kill"))
	}
	return errors.Join(errs...)
}

// oomReported: the program saw its child OOM-killed and survived, and the Result
// reports the OOM kill.
func oomReported(r launcher.Result) error {
	var errs []error
	if err := Verdict(r.Stdout); err != nil {
		errs = append(errs, err)
	}
	if r.ExitCode != 0 || r.Signal != 0 || r.TimedOut {
		errs = append(errs, fmt.Errorf("exit code %d (signal %d, timed out %v), want 0", r.ExitCode, r.Signal, r.TimedOut))
	}
	if !r.OOMKilled {
		errs = append(errs, errors.New("OOMKilled is false, want true: the child's OOM kill was not reported"))
	}
	return errors.Join(errs...)
}

// The programs live in py/*.py, linted as Python (scripts/lint-python.sh). A program
// is its header (the configured values), the prelude, and one or more fragments; a
// fragment's first line, "from _composed import ...", names what the parts before it
// define, for the linter, and is dropped here.
//
//go:embed py/*.py
var pyFiles embed.FS

// py joins the named fragments of py/, in order.
func py(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		data, err := pyFiles.ReadFile("py/" + n + ".py")
		if err != nil {
			panic(err) // a name in this file that has no file: caught by every test
		}
		s := string(data)
		if first, rest, ok := strings.Cut(s, "\n"); ok && strings.HasPrefix(first, "from _composed import ") {
			s = rest
		}
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// prelude is the start of every probe's program: the verdict machinery.
var prelude = py("prelude")

var pyOnlyLoopback = py("only_loopback")

var pyTCPOutside = py("sockets", "tcp_outside")

// pyUDPOutside sends a real DNS query (example.com, type A) to public resolvers.
var pyUDPOutside = py("sockets", "udp_outside")

var pyDNS = py("dns")

var pyHostUnreachable = py("sockets", "host_unreachable")

var pyRawSockets = py("raw_sockets")

var pyUser = py("user")

var pyCaps = py("caps")

var pyNoNewPrivs = py("no_new_privs")

var pySeccompMode = py("seccomp_mode")

// pySyscalls calls each syscall directly, in a child of its own, with arguments chosen
// so that a kernel without the filter would answer differently (succeed, EBADF,
// EFAULT, EINVAL) where the syscall has no capability check of its own. The profile
// (moby's default, minus io_uring) answers EPERM for what it denies, and ENOSYS for
// clone3 so that libc falls back to clone: that is what Docker 20.10 on kernel 6.x
// returned for every call here. Without the filter (same user, no capabilities,
// no_new_privs) the same kernel gave: io_uring_setup and userfaultfd a descriptor,
// io_uring_enter EBADF, io_uring_register EINVAL, unshare/clone(CLONE_NEWUSER)
// success, clone3 EINVAL, setns EBADF, keyctl and add_key a key, request_key ENOKEY,
// bpf EINVAL, perf_event_open EFAULT, open_by_handle_at EFAULT, personality and
// quotactl(Q_SYNC) success, kexec/module calls and iopl/ioperm ENOSYS; so for those the
// EPERM is the filter's alone. The other namespace flags, the mount family, syslog,
// fanotify_init, acct, reboot, swapon, settimeofday and vhangup are refused by the
// missing capabilities too. ptrace is allowed by the profile: PTRACE_ATTACH to PID 1
// fails with EPERM because the bootstrap is non-dumpable.
var pySyscalls = py("syscalls")

var pyProcSys = py("proc_sys")

var pyCgroupRO = py("cgroup_ro")

var pyKernelMemory = py("kernel_memory")

var pyRootFS = py("root_fs")

var pyTmp = py("tmp")

var pyNoSocket = py("no_socket")

var pyEnv = py("env")

var pyFDs = py("fds")

var pyPID1 = py("pid1")

var pyMemoryProgram = py("memory_limits", "memory_program")

var pyMemoryChild = py("memory_limits", "memory_child")

var pyPids = py("pids")

var pyCPU = py("cpu")

// persist.py names what the first run leaves behind and the second must not see: files
// in the private /tmp (the working directory, the config and output directories the
// bootstrap makes there) and /dev/shm, and a SysV shared memory segment.
var pyPersistWrite = py("persist", "persist_write")

var pyPersistCheck = py("persist", "persist_check")

var pyDaemonStart = py("sandbox_id", "daemon_start")

var pyDaemonCheck = py("daemon_check")

// pyHold keeps a sandbox open for the outside evidence, pyBurn keeps it busy; Run
// ends them sooner.
var (
	pyHold = py("sandbox_id", "hold")
	pyBurn = py("sandbox_id", "burn")
)
