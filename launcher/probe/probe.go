// Package probe states the sandbox contract as programs. Each Probe is a Python
// program that runs through the real launcher, asserts one promise of the contract
// from inside the sandbox, and fails when the promise is broken.
//
// # Convention
//
// A probe's program prints a final line "PROBE OK" only when every assertion passed;
// otherwise it prints "PROBE FAIL: <what was seen>" and exits 1. An exception it did
// not expect also ends in a "PROBE FAIL" line. Check verifies that verdict and the exit
// status, plus what only the Result can show (for example OOMKilled). A probe whose
// promise is that the program gets killed (memory) prints a marker line before the
// act, and its Check then requires the kill in the Result.
//
// Probes are decisive: an attempt that fails for another reason than the sandbox
// (a timeout, the wrong errno) is a failure, as is any attempt that succeeds. Where
// it is possible, the syscalls are called with arguments for which the kernel itself
// would answer something other than the denial, so that the denial can only come
// from the sandbox.
//
// The package does not talk to the engine: whoever runs the probes (the launcher's
// tests, or a deployment's self-check) feeds each Job to a launcher and the Result to
// Check.
package probe

import (
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
	// Token names the files and processes of the two-run probes; "" derives one from
	// the clock. Runs that share an engine should use distinct tokens.
	Token string
}

// ParamsOf takes the limits from a launcher's effective options.
func ParamsOf(o launcher.Options) Params {
	return Params{Memory: o.Memory, Pids: o.Pids, CPUs: o.CPUs, TmpfsSize: o.TmpfsSize}
}

// SandboxUID is the user and group id every program runs as.
const SandboxUID = 65532

// SandboxEnvKeys are the environment variables a sandbox may see: those containerSpec
// sets (launcher/hardening.go) and HOSTNAME, which Docker adds.
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
	if o.Token == "" {
		o.Token = fmt.Sprintf("%x", time.Now().UnixNano())
	}
	o.Token = "mcpexecprobe" + regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(o.Token, "")
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

	return []Probe{
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
		mk("memory_oom_reported_for_child",
			"an OOM kill of a child of the program is seen inside (SIGKILL, oom_kill counter) and reported as OOMKilled",
			pyMemoryChild, oomReported),
		mk("pids_limit_stops_fork_bomb",
			"threads and processes stop below Pids (pids.max = Pids) and the program survives to report",
			pyPids, nil),
		mk("cpu_quota_enforced",
			"the CFS quota equals CPUs, and busy processes get no more CPU time than CPUs*wall (+20%)",
			pyCPU, nil),
		persist,
		daemon,
	}
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
`, o.Memory, o.Pids, js(o.CPUs), o.TmpfsSize, SandboxUID, js(SandboxEnvKeys),
		js(o.CanaryName), js(o.CanaryValue), js(addrs), js(o.Token))
}

// Verdict reads the probe's verdict from its output: nil for a final "PROBE OK"
// line, the reason of a "PROBE FAIL" line, or an error saying there was none.
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

// prelude is the start of every probe's program: the verdict machinery.
const prelude = `import errno, os, sys
_FAILS = []


def fail(msg):
    _FAILS.append(" ".join(str(msg).split()))


def check(cond, msg):
    if not cond:
        fail(msg)
    return bool(cond)


def ename(n):
    if isinstance(n, int):
        return errno.errorcode.get(n, str(n))
    return repr(n)


def denied(what, fn, *want):
    """fn() must raise OSError with an errno in want. Returns the errno seen."""
    try:
        r = fn()
    except OSError as e:
        if e.errno in want:
            print("%s: denied (%s)" % (what, ename(e.errno)))
        else:
            fail("%s: failed with %s (%s), want %s" % (what, ename(e.errno), e, "/".join(map(ename, want))))
        return e.errno
    fail("%s: succeeded (%r), want %s" % (what, r, "/".join(map(ename, want))))
    return None


def status(pid="self"):
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def mountinfo():
    """[(mount point, per-mount options, fstype, super options)]"""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            l, r = left.split(), right.split()
            out.append((l[4], l[5].split(","), r[0], r[2].split(",") if len(r) > 2 else []))
    return out


def mount_of(path):
    best = None
    for m in mountinfo():
        p = m[0]
        if path == p or path.startswith(p.rstrip("/") + "/") or p == "/":
            if best is None or len(p) >= len(best[0]):
                best = m
    return best


def _hook(t, v, tb):
    import traceback
    traceback.print_exception(t, v, tb)
    print("PROBE FAIL: unexpected %s: %s" % (t.__name__, " ".join(str(v).split())), flush=True)


sys.excepthook = _hook


def finish():
    if _FAILS:
        print("PROBE FAIL: " + "; ".join(_FAILS), flush=True)
        sys.exit(1)
    print("PROBE OK", flush=True)


`

const pyOnlyLoopback = `
import socket
names = sorted(n for _, n in socket.if_nameindex())
check(names == ["lo"], "interfaces %r, want only ['lo']" % names)
with open("/proc/net/dev") as f:
    devs = sorted(l.split(":")[0].strip() for l in f.read().splitlines()[2:])
check(devs == ["lo"], "/proc/net/dev lists %r, want only lo" % devs)
with open("/proc/net/route") as f:
    routes = [l for l in f.read().splitlines()[1:] if l.strip()]
check(routes == [], "IPv4 routes in the main table: %r" % routes)
try:
    with open("/proc/net/ipv6_route") as f:
        devs6 = {l.split()[-1] for l in f if l.strip()}
    check(devs6 <= {"lo"}, "IPv6 routes through %r, want only lo" % sorted(devs6))
except FileNotFoundError:
    pass  # IPv6 disabled in the kernel
print("interfaces:", names)
finish()
`

const pySockets = `
import socket


def connect(family, addr, kind=socket.SOCK_STREAM):
    s = socket.socket(family, kind)
    try:
        s.settimeout(5)
        s.connect(addr)
        return "connected to %r" % (addr,)
    finally:
        s.close()


def sendto(family, addr, data):
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        return "sent %d bytes" % s.sendto(data, addr)
    finally:
        s.close()


def v6(fn):
    """IPv6 attempts: a kernel without IPv6 refuses the socket itself."""
    def run():
        try:
            socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
        except OSError as e:
            if e.errno == errno.EAFNOSUPPORT:
                print("IPv6 unsupported by the kernel")
                raise OSError(errno.ENETUNREACH, "no IPv6")
            raise
        return fn()
    return run

`

const pyTCPOutside = pySockets + `
for host, port in (("1.1.1.1", 53), ("8.8.8.8", 443), ("1.1.1.1", 443), ("9.9.9.9", 53)):
    denied("tcp %s:%d" % (host, port), lambda: connect(socket.AF_INET, (host, port)), errno.ENETUNREACH)
for host, port in (("2606:4700:4700::1111", 53), ("2001:4860:4860::8888", 443)):
    denied("tcp [%s]:%d" % (host, port), v6(lambda: connect(socket.AF_INET6, (host, port))), errno.ENETUNREACH)
finish()
`

// pyUDPOutside sends a real DNS query (example.com, type A) to public resolvers.
const pyUDPOutside = pySockets + `
query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
for host, port in (("1.1.1.1", 53), ("8.8.8.8", 53), ("9.9.9.9", 123)):
    denied("udp sendto %s:%d" % (host, port), lambda: sendto(socket.AF_INET, (host, port), query), errno.ENETUNREACH)
    denied("udp connect %s:%d" % (host, port), lambda: connect(socket.AF_INET, (host, port), socket.SOCK_DGRAM), errno.ENETUNREACH)
for host, port in (("2606:4700:4700::1111", 53), ("2001:4860:4860::8888", 53)):
    denied("udp sendto [%s]:%d" % (host, port), v6(lambda: sendto(socket.AF_INET6, (host, port), query)), errno.ENETUNREACH)
# A broadcast on the local segment would reach the host's bridge.
def broadcast():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        return "sent %d bytes" % s.sendto(b"x", ("255.255.255.255", 67))
    finally:
        s.close()
denied("udp broadcast 255.255.255.255:67", broadcast, errno.ENETUNREACH)
finish()
`

const pyDNS = `
import ipaddress, socket
ok = {socket.EAI_AGAIN: "EAI_AGAIN", socket.EAI_NONAME: "EAI_NONAME", socket.EAI_FAIL: "EAI_FAIL"}
if hasattr(socket, "EAI_NODATA"):
    ok[socket.EAI_NODATA] = "EAI_NODATA"
for name in ("example.com", "google.com", "pypi.org", "host.docker.internal",
             "gateway.docker.internal", "host.containers.internal", "metadata.google.internal"):
    try:
        addrs = socket.getaddrinfo(name, 443, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        if e.errno in ok:
            print("resolve %s: failed (%s)" % (name, ok[e.errno]))
        else:
            fail("resolve %s: failed with %r, want one of %s" % (name, e, sorted(ok.values())))
        continue
    fail("resolve %s: got %s" % (name, sorted({a[4][0] for a in addrs})))

# The resolvers themselves: whatever /etc/resolv.conf names (the engine writes its
# own there for networked containers), Docker's embedded DNS and systemd-resolved's
# stub. An outside one must be unreachable; a loopback one must not answer.
servers = []
try:
    with open("/etc/resolv.conf") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                servers.append(parts[1].split("%")[0])
except FileNotFoundError:
    pass
query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
for ns in dict.fromkeys(servers + ["127.0.0.11", "127.0.0.53"]):
    try:
        ip = ipaddress.ip_address(ns)
    except ValueError:
        fail("unparsable nameserver %r" % ns)
        continue
    s = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.connect((ns, 53))
        s.send(query)
        if not ip.is_loopback:
            fail("nameserver %s: a query went out" % ns)
            continue
        data = s.recv(512)
        fail("nameserver %s answered (%d bytes)" % (ns, len(data)))
    except OSError as e:
        if e.errno == errno.ENETUNREACH or (ip.is_loopback and e.errno == errno.ECONNREFUSED):
            print("nameserver %s: unreachable (%s)" % (ns, ename(e.errno)))
        elif ip.is_loopback and isinstance(e, TimeoutError):
            print("nameserver %s: no answer" % ns)
        else:
            fail("nameserver %s: failed with %s (%s), want ENETUNREACH%s" % (ns, ename(e.errno), e, "/ECONNREFUSED" if ip.is_loopback else ""))
    finally:
        s.close()
print("resolv.conf names %s" % (servers or "no nameserver"))
finish()
`

const pyHostUnreachable = pySockets + `
import ipaddress
targets = [("172.17.0.1", p) for p in (2375, 2376, 80, 443, 22)]
targets += [("169.254.169.254", 80)]
for a in HOST_ADDRS:
    ip = ipaddress.ip_address(a)
    if ip.is_loopback or ip.is_link_local:
        continue
    targets += [(a, p) for p in (2375, 2376, 80, 22)]
targets = list(dict.fromkeys(targets))
for host, port in targets:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    fn = (lambda: connect(fam, (host, port)))
    denied("tcp %s port %d" % (host, port), v6(fn) if fam == socket.AF_INET6 else fn, errno.ENETUNREACH)
# Loopback is the sandbox's own: nothing listens there, not the engine's API.
for port in (2375, 2376, 80, 8080):
    denied("tcp 127.0.0.1:%d" % port, lambda: connect(socket.AF_INET, ("127.0.0.1", port)), errno.ECONNREFUSED)
    denied("tcp [::1]:%d" % port, v6(lambda: connect(socket.AF_INET6, ("::1", port))), errno.ECONNREFUSED, errno.ENETUNREACH, errno.EADDRNOTAVAIL)
print("tried %d host addresses" % len(targets))
finish()
`

const pyRawSockets = `
import socket
ETH_P_ALL = 0x0003
for what, args in (
        ("AF_INET SOCK_RAW ICMP", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
        ("AF_INET SOCK_RAW IPPROTO_RAW", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)),
        ("AF_INET SOCK_RAW TCP", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)),
        ("AF_PACKET SOCK_RAW ETH_P_ALL", (socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))),
        ("AF_PACKET SOCK_DGRAM ETH_P_ALL", (socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL)))):
    denied("socket " + what, lambda: socket.socket(*args), errno.EPERM)
def raw6():
    try:
        return socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    except OSError as e:
        if e.errno == errno.EAFNOSUPPORT:
            raise OSError(errno.EPERM, "no IPv6 in this kernel")
        raise
denied("socket AF_INET6 SOCK_RAW ICMPV6", raw6, errno.EPERM)
finish()
`

const pyUser = `
want = (SANDBOX_UID,) * 3
check(os.getresuid() == want, "getresuid %r, want %r" % (os.getresuid(), want))
check(os.getresgid() == want, "getresgid %r, want %r" % (os.getresgid(), want))
groups = os.getgroups()
check(0 not in groups, "supplementary groups %r include 0" % groups)
check(set(groups) <= {SANDBOX_UID}, "supplementary groups %r, want at most [%d]" % (groups, SANDBOX_UID))
for pid in ("self", "1"):
    st = status(pid)
    for key in ("Uid", "Gid"):
        ids = [int(x) for x in st[key].split()]
        check(ids == [SANDBOX_UID] * 4, "/proc/%s/status %s %r, want all %d" % (pid, key, ids, SANDBOX_UID))
    check("0" not in st.get("Groups", "").split(), "/proc/%s/status Groups %r include 0" % (pid, st.get("Groups")))
denied("setuid(0)", lambda: os.setuid(0), errno.EPERM)
denied("setgid(0)", lambda: os.setgid(0), errno.EPERM)
denied("setgroups([0])", lambda: os.setgroups([0]), errno.EPERM)
print("uid/gid", os.getuid(), os.getgid(), "groups", groups)
finish()
`

const pyCaps = `
for pid in ("self", "1"):
    st = status(pid)
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        v = st.get(key)
        check(v is not None and int(v, 16) == 0, "/proc/%s/status %s = %s, want 0" % (pid, key, v))
finish()
`

const pyNoNewPrivs = `
import ctypes
for pid in ("self", "1"):
    v = status(pid).get("NoNewPrivs")
    check(v == "1", "/proc/%s/status NoNewPrivs = %s, want 1" % (pid, v))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.prctl(39, 0, 0, 0, 0)  # PR_GET_NO_NEW_PRIVS
check(r == 1, "prctl(PR_GET_NO_NEW_PRIVS) = %d, want 1" % r)
finish()
`

const pySeccompMode = `
import ctypes
for pid in ("self", "1"):
    v = status(pid).get("Seccomp")
    check(v == "2", "/proc/%s/status Seccomp = %s, want 2 (filter)" % (pid, v))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.prctl(21, 0, 0, 0, 0)  # PR_GET_SECCOMP
check(r == 2, "prctl(PR_GET_SECCOMP) = %d, want 2" % r)
finish()
`

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
const pySyscalls = `
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L, P, S = ctypes.c_long, ctypes.c_void_p, ctypes.c_char_p
NULL = P(0)
ARCH = platform.machine()
# name: (x86_64, aarch64)
NR = {
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "userfaultfd": (323, 282), "unshare": (272, 97), "clone": (56, 220), "clone3": (435, 435),
    "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "ptrace": (101, 117),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "open_by_handle_at": (304, 265),
    "syslog": (103, 116), "personality": (135, 92), "quotactl": (179, 60),
    "fanotify_init": (300, 262), "acct": (163, 89), "reboot": (169, 142),
    "swapon": (167, 224), "settimeofday": (164, 170), "vhangup": (153, 58),
    "iopl": (172, None), "ioperm": (173, None),
}
col = {"x86_64": 0, "aarch64": 1}.get(ARCH)
if col is None:
    fail("no syscall table for %s" % ARCH)
    finish()

SIGCHLD = 17
CLONE = {"CLONE_NEWUSER": 0x10000000, "CLONE_NEWNS": 0x00020000, "CLONE_NEWNET": 0x40000000,
         "CLONE_NEWPID": 0x20000000, "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUTS": 0x04000000,
         "CLONE_NEWCGROUP": 0x02000000}
uring_params = ctypes.create_string_buffer(120)
calls = [
    ("io_uring_setup", "io_uring_setup(1, params)", (L(1), uring_params)),
    ("io_uring_enter", "io_uring_enter(-1, ...)", (L(-1), L(0), L(0), L(0), NULL, L(0))),
    ("io_uring_register", "io_uring_register(-1, ...)", (L(-1), L(0), NULL, L(0))),
    # UFFD_USER_MODE_ONLY: allowed unprivileged by the kernel itself
    ("userfaultfd", "userfaultfd(O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY)", (L(os.O_CLOEXEC | os.O_NONBLOCK | 1),)),
]
calls += [("unshare", "unshare(%s)" % n, (L(f),)) for n, f in CLONE.items()]
calls += [
    ("clone", "clone(CLONE_NEWUSER|SIGCHLD)", (L(CLONE["CLONE_NEWUSER"] | SIGCHLD), L(0), L(0), L(0), L(0))),
    ("clone3", "clone3(NULL, 0)", (NULL, L(0))),
    ("setns", "setns(-1, 0)", (L(-1), L(0))),
    ("mount", "mount(none, /tmp, tmpfs)", (S(b"none"), S(b"/tmp"), S(b"tmpfs"), L(0), NULL)),
    ("umount2", "umount2(/tmp)", (S(b"/tmp"), L(0))),
    ("pivot_root", "pivot_root(., .)", (S(b"."), S(b"."))),
    ("open_tree", "open_tree(AT_FDCWD, /tmp, OPEN_TREE_CLONE)", (L(-100), S(b"/tmp"), L(1))),
    ("move_mount", "move_mount(-1, '', -1, '', 0)", (L(-1), S(b""), L(-1), S(b""), L(0))),
    ("fsopen", "fsopen(tmpfs)", (S(b"tmpfs"), L(0))),
    ("keyctl", "keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING)", (L(0), L(-3), L(0))),
    ("add_key", "add_key(user, ..., KEY_SPEC_PROCESS_KEYRING)", (S(b"user"), S(b"mcpexecprobe"), S(b"x"), L(1), L(-2))),
    ("request_key", "request_key(user, ...)", (S(b"user"), S(b"mcpexecprobe"), NULL, L(0))),
    ("bpf", "bpf(BPF_MAP_CREATE, NULL, 0)", (L(0), NULL, L(0))),
    ("perf_event_open", "perf_event_open(NULL, ...)", (NULL, L(0), L(-1), L(-1), L(0))),
    # moby's profile allows ptrace; PID 1 (the bootstrap) refuses it by being non-dumpable
    ("ptrace", "ptrace(PTRACE_ATTACH, 1)", (L(16), L(1), L(0), L(0))),
    # an unknown flag: past the capability check the kernel answers EINVAL, and an
    # empty segment list with valid flags would unload a loaded kexec kernel
    ("kexec_load", "kexec_load(0, 0, NULL, 0x80)", (L(0), L(0), NULL, L(0x80))),
    ("kexec_file_load", "kexec_file_load(-1, -1, 0, NULL, 0)", (L(-1), L(-1), L(0), NULL, L(0))),
    ("init_module", "init_module(NULL, 0, '')", (NULL, L(0), S(b""))),
    ("finit_module", "finit_module(-1, '', 0)", (L(-1), S(b""), L(0))),
    ("delete_module", "delete_module(mcpexecprobe, O_NONBLOCK)", (S(b"mcpexecprobe"), L(os.O_NONBLOCK))),
    ("open_by_handle_at", "open_by_handle_at(-1, NULL, 0)", (L(-1), NULL, L(0))),
    # SYSLOG_ACTION_SIZE_BUFFER: allowed unprivileged by the kernel when dmesg_restrict=0
    ("syslog", "syslog(SYSLOG_ACTION_SIZE_BUFFER)", (L(10), NULL, L(0))),
    # ADDR_NO_RANDOMIZE: would turn address randomization off for what the program runs
    ("personality", "personality(ADDR_NO_RANDOMIZE)", (L(0x0040000),)),
    # Q_SYNC needs no privilege in the kernel
    ("quotactl", "quotactl(QCMD(Q_SYNC, USRQUOTA), NULL)", (L(0x800001 << 8), NULL, L(0), NULL)),
    ("fanotify_init", "fanotify_init(0, 0)", (L(0), L(0))),
    ("acct", "acct(NULL)", (NULL,)),
    ("reboot", "reboot(bad magic)", (L(0), L(0), L(0), NULL)),
    ("swapon", "swapon(/tmp/x)", (S(b"/tmp/x"), L(0))),
    ("settimeofday", "settimeofday(NULL, NULL)", (NULL, NULL)),
    ("vhangup", "vhangup()", ()),
    ("iopl", "iopl(3)", (L(3),)),
    ("ioperm", "ioperm(0x80, 1, 1)", (L(0x80), L(1), L(1))),
]
# What the profile answers; anything else means the call reached the kernel.
EXPECT = {"clone3": errno.ENOSYS}


def attempt(name, nr, args):
    """Makes the call in a child of its own, so that a call that goes through (a new
    namespace, a personality, I/O port access) changes nothing for the calls after it.
    Returns (result, errno), or (None, signal) when the child was killed."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            ctypes.set_errno(0)
            r = libc.syscall(L(nr), *args)
            e = ctypes.get_errno()
            if name == "clone" and r == 0:
                os._exit(0)  # the child of a clone that went through
            if name == "clone" and r > 0:
                os.waitpid(r, 0)
            if name == "ptrace" and r == 0:
                # Attached to PID 1: let it go again, or it would stay stopped.
                try:
                    os.waitpid(1, 0x40000000)  # __WALL
                except OSError:
                    pass
                libc.syscall(L(nr), L(17), L(1), L(0), L(0))  # PTRACE_DETACH
            os.write(wfd, b"%d %d" % (r, e))
        finally:
            os._exit(0)
    os.close(wfd)
    out = b""
    while True:
        b = os.read(rfd, 64)
        if not b:
            break
        out += b
    os.close(rfd)
    _, st = os.waitpid(pid, 0)
    if not out:
        return None, os.WTERMSIG(st) if os.WIFSIGNALED(st) else -1
    r, e = out.split()
    return int(r), int(e)


seen = []
for name, what, args in calls:
    nr = NR[name][col]
    if nr is None:
        continue
    want = EXPECT.get(name, errno.EPERM)
    r, e = attempt(name, nr, args)
    if r is None:
        fail("%s: the process was killed by signal %d, want %s" % (what, e, ename(want)))
        got = "signal %d" % e
    elif r >= 0:
        fail("%s returned %d, want %s" % (what, r, ename(want)))
        got = str(r)
    else:
        if e != want:
            fail("%s failed with %s, want %s" % (what, ename(e), ename(want)))
        got = ename(e)
    seen.append("%s=%s" % (name if name != "unshare" else what, got))
print("errno:", " ".join(seen))
finish()
`

const pyProcSys = `
def write(path):
    # Opening for writing is the permission check; nothing is ever written, so that a
    # broken sandbox does not get the host's tunables changed by its own probe.
    os.close(os.open(path, os.O_WRONLY))
    return "opened for writing"
# These exist in every kernel...
for p in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
          "/proc/sys/net/ipv4/ip_forward", "/proc/sys/fs/file-max"):
    check(os.path.exists(p), "%s does not exist" % p)
    denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES)
# ...these depend on its configuration (modules, magic SysRq, hotplug, power).
for p in ("/proc/sys/kernel/modprobe", "/proc/sysrq-trigger", "/sys/kernel/uevent_helper",
          "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state"):
    if os.path.exists(p):
        denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES)
m = mount_of("/proc/sys")
check(m and m[0] == "/proc/sys" and "ro" in m[1], "/proc/sys is not a read-only mount: %r" % (m,))
m = mount_of("/sys")
check(m and "ro" in m[1], "/sys is not a read-only mount: %r" % (m,))
finish()
`

const pyCgroupRO = `
def write(path):
    # Opening for writing is the permission check; nothing is written.
    os.close(os.open(path, os.O_WRONLY))
    return "opened for writing"


def mkdir(path):
    os.mkdir(path)
    os.rmdir(path)
    return "made"
candidates = [
    "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes",
    "/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/memory/notify_on_release",
    "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "/sys/fs/cgroup/cpu/cpu.cfs_period_us", "/sys/fs/cgroup/devices/devices.allow",
    "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.swap.max", "/sys/fs/cgroup/pids.max",
    "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/cgroup.subtree_control",
]
present = [p for p in candidates if os.path.exists(p)]
v1 = os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") and os.path.exists("/sys/fs/cgroup/pids/pids.max")
v2 = os.path.exists("/sys/fs/cgroup/memory.max") and os.path.exists("/sys/fs/cgroup/pids.max")
check(v1 or v2, "neither the cgroup v1 nor the v2 limit files are visible: %r" % present)
for p in present:
    denied("write " + p, lambda: write(p), errno.EROFS, errno.EACCES, errno.EPERM)
for d in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu"):
    if os.path.isdir(d):
        denied("mkdir in " + d, lambda: mkdir(d + "/" + TOKEN), errno.EROFS, errno.EACCES, errno.EPERM)
# Every cgroup file system at or under /sys/fs/cgroup is mounted read-only where the
# program sees it (statvfs gives the flags of the visible mount), not merely owned by
# root: a read-only bind of /sys/fs/cgroup copies the controller mounts beneath it.
cgmounts = set()
with open("/proc/self/mountinfo") as f:
    for line in f:
        left, _, right = line.partition(" - ")
        mp = left.split()[4]
        if right.split()[0] in ("cgroup", "cgroup2") and (mp == "/sys/fs/cgroup" or mp.startswith("/sys/fs/cgroup/")):
            cgmounts.add(mp)
check(cgmounts, "no cgroup file system is mounted at or under /sys/fs/cgroup")
for mp in sorted(cgmounts):
    check(os.statvfs(mp).f_flag & os.ST_RDONLY, "%s is mounted read-write" % mp)
print("checked %d cgroup files and %d cgroup mounts (%s)" % (len(present), len(cgmounts), "v1" if v1 else "v2"))
finish()
`

const pyKernelMemory = `
def read(path):
    with open(path, "rb") as f:
        return f.read(16)
for p in ("/proc/kcore", "/dev/mem", "/dev/kmem", "/dev/port"):
    try:
        data = read(p)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.EACCES, errno.EPERM):
            print("read %s: denied (%s)" % (p, ename(e.errno)))
        else:
            fail("read %s: failed with %s, want ENOENT/EACCES/EPERM" % (p, ename(e.errno)))
        continue
    # The engine masks some paths with /dev/null: readable, but empty.
    check(data == b"", "read %s: got %d bytes" % (p, len(data)))
finish()
`

const pyRootFS = `
import stat
def create(path):
    with open(path, "w") as f:
        f.write("x")
    os.unlink(path)
    return "created"


def mkdir(path):
    os.mkdir(path)
    os.rmdir(path)
    return "made"


def chmod_same(path):
    # The same mode: the permission check without a change.
    os.chmod(path, os.stat(path).st_mode & 0o7777)
    return "changed"
for p in ("/etc/x", "/usr/x", "/x", "/var/tmp/x", "/run/x", "/var/run/x", "/run/lock/x", "/var/x",
          "/home/x", "/root/x", "/opt/x", "/srv/x", "/mnt/x", "/usr/local/bin/x", "/usr/lib/python3/dist-packages/x",
          "/usr/lib/python3.13/x", "/var/cache/x", "/var/lib/x", "/var/log/x"):
    parent = os.path.dirname(p)
    if os.path.isdir(parent):
        denied("create " + p, lambda: create(p), errno.EROFS, errno.EACCES)
denied("append /etc/passwd", lambda: open("/etc/passwd", "a"), errno.EROFS, errno.EACCES)
denied("chmod /usr/bin/python3", lambda: chmod_same(os.path.realpath("/usr/bin/python3")), errno.EROFS, errno.EPERM)
denied("mkdir /etc/x.d", lambda: mkdir("/etc/x.d"), errno.EROFS, errno.EACCES)
m = mount_of("/")
check(m and "ro" in m[1], "/ is not mounted read-only: %r" % (m,))

# Every directory of the filesystem, except the private tmpfs mounts: none may be
# writable. (A read-only mount makes access(W_OK) fail with EROFS even for root.)
ALLOWED = ("/tmp", "/dev/shm", "/dev/mqueue")
writable, ndirs = [], 0
stack = ["/"]
while stack:
    d = stack.pop()
    ndirs += 1
    if d != "/" and os.access(d, os.W_OK):
        try:
            create(d + "/" + TOKEN)
            writable.append(d)
        except OSError:
            pass
    try:
        it = os.scandir(d)
    except OSError:
        continue
    with it:
        for e in it:
            if e.is_dir(follow_symlinks=False) and e.path not in ("/proc", "/sys") and e.path not in ALLOWED:
                stack.append(e.path)
check(not writable, "writable directories: %s" % writable[:20])
# Mounts of their own (volumes, bind-mounted files such as /etc/hostname): read-only,
# except the private tmpfs ones and the kernel's (/proc, /sys, /dev).
def under(p, roots):
    return any(p == r or p.startswith(r + "/") for r in roots)
rw = [m[0] for m in mountinfo() if "ro" not in m[1] and not under(m[0], ("/proc", "/sys", "/dev") + ALLOWED)]
check(not rw, "writable mounts: %s" % rw)
for p in ALLOWED:
    if os.path.isdir(p):
        check(os.access(p, os.W_OK), "%s is not writable (it should be the private tmpfs)" % p)
print("walked %d directories" % ndirs)
finish()
`

const pyTmp = `
import mmap, shutil, subprocess
for d in ("/tmp", "/dev/shm"):
    m = mount_of(d)
    check(m and m[0] == d, "%s is not a mount of its own: %r" % (d, m))
    if not m:
        continue
    check(m[2] == "tmpfs", "%s is %s, want tmpfs" % (d, m[2]))
    for opt in ("rw", "noexec", "nosuid", "nodev"):
        check(opt in m[1], "%s lacks %s: %s" % (d, opt, ",".join(m[1])))
    sv = os.statvfs(d)
    total = sv.f_blocks * sv.f_frsize
    check(total == TMPFS_SIZE, "%s is %d bytes, want %d" % (d, total, TMPFS_SIZE))

    path = d + "/" + TOKEN + ".sh"
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho escaped\n")
    os.chmod(path, 0o755)
    with open(path) as f:
        check(f.read().endswith("escaped\n"), "%s: cannot read back what was written" % path)
    denied("exec shebang script in " + d, lambda: subprocess.run([path], capture_output=True), errno.EACCES, errno.EPERM)
    elf = d + "/" + TOKEN + ".true"
    shutil.copy("/bin/true", elf)
    os.chmod(elf, 0o755)
    denied("exec ELF copy in " + d, lambda: subprocess.run([elf]), errno.EACCES, errno.EPERM)
    def mmap_exec():
        with open(elf, "rb") as f:
            return mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
    denied("mmap PROT_EXEC of a file in " + d, mmap_exec, errno.EPERM, errno.EACCES)
    os.unlink(path)
    os.unlink(elf)

# Fill /tmp: the writes must stop at TmpfsSize with ENOSPC. tmpfs pages count against
# the memory limit, so this is only done when the limit leaves room for it.
if TMPFS_SIZE + 48 * 2**20 < MEMORY:
    big, written, chunk = "/tmp/" + TOKEN + ".fill", 0, b"\0" * (256 << 10)
    try:
        with open(big, "wb", buffering=0) as f:
            while written <= TMPFS_SIZE + 8 * 2**20:
                written += f.write(chunk)
        fail("wrote %d bytes to /tmp, more than its %d" % (written, TMPFS_SIZE))
    except OSError as e:
        check(e.errno == errno.ENOSPC, "filling /tmp failed with %s, want ENOSPC" % ename(e.errno))
    finally:
        size = os.path.getsize(big) if os.path.exists(big) else 0
        if os.path.exists(big):
            os.unlink(big)
    check(TMPFS_SIZE - 2**20 <= size <= TMPFS_SIZE, "/tmp took %d bytes, want about %d" % (size, TMPFS_SIZE))
    print("/tmp filled at %d bytes (ENOSPC)" % size)
else:
    print("/tmp fill skipped: TmpfsSize %d is too close to Memory %d" % (TMPFS_SIZE, MEMORY))
finish()
`

const pyNoSocket = `
import stat
for p in ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/var/run/podman/podman.sock",
          "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/run/crio/crio.sock",
          "/run/user/0/podman/podman.sock", "/run/user/1000/podman/podman.sock", "/run/user/1000/docker.sock",
          "/var/lib/docker", "/var/lib/containers", "/run/docker", "/run/containerd", "/run/podman"):
    denied("lstat " + p, lambda: os.lstat(p), errno.ENOENT, errno.EACCES)
# Any unix socket anywhere (/proc and /sys aside): a socket file's kind needs an lstat,
# the rest is told by the directory entry.
socks, stack = [], ["/"]
while stack:
    d = stack.pop()
    try:
        it = os.scandir(d)
    except OSError:
        continue
    with it:
        for e in it:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.path not in ("/proc", "/sys"):
                        stack.append(e.path)
                elif not e.is_file(follow_symlinks=False) and not e.is_symlink():
                    if stat.S_ISSOCK(os.lstat(e.path).st_mode):
                        socks.append(e.path)
            except OSError:
                pass
# A bind-mounted socket keeps the directory entry of its mount point (a regular
# file), so every mount point is looked at too.
for m in mountinfo():
    try:
        if stat.S_ISSOCK(os.lstat(m[0]).st_mode) and m[0] not in socks:
            socks.append(m[0])
    except OSError:
        pass
check(not socks, "unix sockets in the filesystem: %s" % socks[:20])
# The network namespace's unix sockets, abstract ones included: none at start.
with open("/proc/net/unix") as f:
    entries = f.read().splitlines()[1:]
check(not entries, "unix sockets in the network namespace: %s" % entries[:10])
finish()
`

const pyEnv = `
allowed = set(SANDBOX_ENV_KEYS)
extra = sorted(set(os.environ) - allowed)
check(not extra, "environment variables from outside the sandbox: %s" % extra)
with open("/proc/self/environ", "rb") as f:
    raw = [kv.split(b"=", 1)[0].decode("utf-8", "replace") for kv in f.read().split(b"\0") if kv]
extra = sorted(set(raw) - allowed)
check(not extra, "/proc/self/environ holds %s" % extra)
if CANARY_NAME:
    check(CANARY_NAME not in os.environ, "the canary %s is visible" % CANARY_NAME)
if CANARY_VALUE:
    hits = sorted(k for k, v in os.environ.items() if CANARY_VALUE in v)
    check(not hits, "the canary's value is in %s" % hits)
check(os.environ.get("HOME") == "/tmp", "HOME is %r, want /tmp" % os.environ.get("HOME"))
print("environment:", sorted(os.environ))
finish()
`

const pyFDs = `
listed = sorted(int(n) for n in os.listdir("/proc/self/fd"))
# The listing's own descriptor is closed again by now: whatever still answers fstat
# was open before.
still = []
for fd in listed:
    try:
        os.fstat(fd)
        still.append(fd)
    except OSError as e:
        if e.errno != errno.EBADF:
            raise
for fd in (0, 1, 2):
    check(fd in still, "fd %d is not open" % fd)
extra = [fd for fd in still if fd > 2]
def target(fd):
    try:
        return os.readlink("/proc/self/fd/%d" % fd)
    except OSError as e:
        return "?" + ename(e.errno)
check(not extra, "open file descriptors beyond 0-2: %s" % ["%d->%s" % (fd, target(fd)) for fd in extra])
print("open fds:", still)
finish()
`

const pyPID1 = `
import ctypes, signal, time
libc = ctypes.CDLL(None, use_errno=True)
denied("open /proc/1/fd/1 for write", lambda: open("/proc/1/fd/1", "wb"), errno.EACCES, errno.EPERM)
denied("open /proc/1/mem", lambda: open("/proc/1/mem", "rb"), errno.EACCES, errno.EPERM)
denied("read /proc/1/environ", lambda: open("/proc/1/environ", "rb").read(), errno.EACCES, errno.EPERM)
denied("list /proc/1/fd", lambda: os.listdir("/proc/1/fd"), errno.EACCES, errno.EPERM)
denied("readlink /proc/1/exe", lambda: os.readlink("/proc/1/exe"), errno.EACCES, errno.EPERM)
denied("open /proc/1/root/tmp", lambda: os.listdir("/proc/1/root/tmp"), errno.EACCES, errno.EPERM)
def ptrace(req):
    ctypes.set_errno(0)
    r = libc.ptrace(ctypes.c_long(req), ctypes.c_long(1), None, None)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    # Attached: let PID 1 go again (stopped, then detached), or it would stay stopped
    # and the run would end in a timeout rather than in this probe's verdict.
    if req == 0x4206:
        libc.ptrace(ctypes.c_long(0x4207), ctypes.c_long(1), None, None)  # PTRACE_INTERRUPT
    try:
        os.waitpid(1, 0x40000000)  # __WALL
    except OSError:
        pass
    libc.ptrace(ctypes.c_long(17), ctypes.c_long(1), None, None)  # PTRACE_DETACH
    return "attached"
denied("ptrace(PTRACE_ATTACH, 1)", lambda: ptrace(16), errno.EPERM)
denied("ptrace(PTRACE_SEIZE, 1)", lambda: ptrace(0x4206), errno.EPERM)
def pidfd_getfd():
    libc.syscall.restype = ctypes.c_long
    pidfd = os.pidfd_open(1)
    try:
        ctypes.set_errno(0)
        r = libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(1), ctypes.c_long(0))
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        os.close(r)
        return "got PID 1's fd 1 as %d" % r
    finally:
        os.close(pidfd)
denied("pidfd_getfd(PID 1, fd 1)", pidfd_getfd, errno.EPERM)
def state():
    with open("/proc/1/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
before = state()
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
            signal.SIGPIPE, signal.SIGSTOP, signal.SIGKILL):
    try:
        os.kill(1, sig)
    except OSError as e:
        print("kill(1, %s): %s" % (sig.name, ename(e.errno)))
time.sleep(0.3)
after = state()
check(after in ("S", "R", "D"), "PID 1 is in state %r after the signals, want running or sleeping" % after)
check(os.getppid() == 1, "parent is %d, want 1" % os.getppid())
print("PID 1 state before %s, after %s" % (before, after))
finish()
`

const pyMemoryLimits = `
def read(path):
    with open(path) as f:
        return f.read().strip()
if os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
    lim = int(read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
    check(lim == MEMORY, "memory.limit_in_bytes = %d, want %d" % (lim, MEMORY))
    p = "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
    if os.path.exists(p):  # absent when the host has swap accounting off
        sw = int(read(p))
        check(sw == MEMORY, "memory.memsw.limit_in_bytes = %d, want %d (no swap)" % (sw, MEMORY))
    else:
        print("note: no memory.memsw.limit_in_bytes (swap accounting off)")
    OOM = ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")
elif os.path.exists("/sys/fs/cgroup/memory.max"):
    lim = read("/sys/fs/cgroup/memory.max")
    check(lim == str(MEMORY), "memory.max = %s, want %d" % (lim, MEMORY))
    if os.path.exists("/sys/fs/cgroup/memory.swap.max"):
        sw = read("/sys/fs/cgroup/memory.swap.max")
        check(sw == "0", "memory.swap.max = %s, want 0" % sw)
    OOM = ("/sys/fs/cgroup/memory.events", "oom_kill")
else:
    fail("no memory cgroup limit visible")
    finish()


def oom_kills():
    with open(OOM[0]) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == OOM[1]:
                return int(v)
    return 0


def hog(limit):
    chunks, got, step = [], 0, 8 << 20
    while got < limit:
        chunks.append(b"\1" * step)  # filled, so every page is touched
        got += step
    return got

`

const pyMemoryProgram = pyMemoryLimits + `
if _FAILS:
    finish()
print("ALLOCATING", flush=True)
try:
    got = hog(2 * MEMORY)
    fail("allocated and touched %d bytes, twice the %d limit, without being killed" % (got, MEMORY))
except MemoryError:
    fail("MemoryError instead of the OOM killer")
finish()
`

const pyMemoryChild = pyMemoryLimits + `
import signal
if _FAILS:
    finish()
before = oom_kills()
pid = os.fork()
if pid == 0:
    try:
        hog(2 * MEMORY)
    finally:
        os._exit(3)
_, st = os.waitpid(pid, 0)
check(os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL,
      "the allocating child ended with status %#x, want killed by SIGKILL" % st)
after = oom_kills()
check(after > before, "the cgroup's oom_kill counter went from %d to %d, want it to grow" % (before, after))
print("child killed; oom_kill %d -> %d" % (before, after))
finish()
`

const pyPids = `
import signal, threading, time
def read(path):
    with open(path) as f:
        return f.read().strip()
for p in ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"):
    if os.path.exists(p):
        v = read(p)
        # "max": the limit sits on a parent cgroup the sandbox cannot see (Kubernetes puts
        # the kubelet's podPidsLimit on the pod's); the spawning below must still stop.
        check(v in (str(PIDS), "max"), "%s = %s, want %d" % (p, v, PIDS))
        if v == "max":
            print("%s = max: the limit is a parent cgroup's; measured below" % p)
        break
else:
    fail("no pids.max visible")

# The program shares the limit with the bootstrap; the spawning stops at a ceiling
# well above Pids, so a missing limit fails quickly instead of exhausting the host.
CEILING = 4 * PIDS + 64
threading.stack_size(256 << 10)
ev, threads = threading.Event(), []
try:
    while len(threads) < CEILING:
        t = threading.Thread(target=ev.wait)
        t.start()
        threads.append(t)
except RuntimeError as e:
    print("threads stopped at %d: %s" % (len(threads), e))
ev.set()
for t in threads:
    t.join()
check(len(threads) < PIDS, "started %d threads, want fewer than Pids=%d" % (len(threads), PIDS))

# Processes: spawned without copying the interpreter (posix_spawn uses a vfork-like
# clone), so that the memory limit is not what stops them.
kids, err = [], None
try:
    while len(kids) < CEILING:
        kids.append(os.posix_spawn("/bin/sleep", ["sleep", "600"], {}))
except OSError as e:
    err = e
    print("processes stopped at %d: %s" % (len(kids), ename(e.errno)))
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
check(len(kids) < PIDS, "spawned %d processes, want fewer than Pids=%d" % (len(kids), PIDS))
check(err is not None and err.errno == errno.EAGAIN, "spawning stopped with %r, want EAGAIN" % (err,))
# The limit is a ceiling, not a trap: the program goes on once its children are gone.
t = threading.Thread(target=lambda: None)
t.start()
t.join()
finish()
`

const pyCPU = `
import math, signal, time
def read(path):
    with open(path) as f:
        return f.read().strip()
if os.path.exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
    quota = int(read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
    period = int(read("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))
    STAT = "/sys/fs/cgroup/cpu/cpu.stat"
elif os.path.exists("/sys/fs/cgroup/cpu.max"):
    q, _, p = read("/sys/fs/cgroup/cpu.max").partition(" ")
    quota, period = (-1 if q == "max" else int(q)), int(p)
    STAT = "/sys/fs/cgroup/cpu.stat"
else:
    fail("no CPU quota file visible")
    finish()
if not check(quota > 0, "no CPU quota (quota %d)" % quota):
    finish()
check(abs(quota / period - CPUS) <= 0.01, "quota %d/%d = %.3f CPUs, want %.3f" % (quota, period, quota / period, CPUS))


def throttled():
    with open(STAT) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k == "nr_throttled":
                return int(v)
    return 0


ncpu = len(os.sched_getaffinity(0))
workers = min(ncpu, max(2, math.ceil(CPUS) + 1))
if ncpu <= CPUS:
    print("burn skipped: only %d CPUs available to the sandbox, quota %.2f" % (ncpu, CPUS))
else:
    # Burn until the quota has visibly bitten (or 8 s): under a loaded host the
    # workers may take a while to use up even a fraction of a CPU.
    th0 = throttled()
    start = time.monotonic()
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            while True:
                pass
        pids.append(pid)
    while True:
        time.sleep(0.1)
        elapsed = time.monotonic() - start
        if (elapsed >= 1.5 and throttled() - th0 >= 3) or elapsed >= 8:
            break
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    used = 0.0
    for pid in pids:
        _, _, ru = os.wait4(pid, 0)
        used += ru.ru_utime + ru.ru_stime
    wall = time.monotonic() - start
    allowed = CPUS * wall * 1.2 + 0.05
    check(used <= allowed, "%d busy processes used %.2f CPU-seconds in %.2f s, want at most %.2f (CPUs=%.2f)" % (workers, used, wall, allowed, CPUS))
    th = throttled() - th0
    print("%d workers: %.2f CPU-s in %.2f s wall (allowed %.2f), throttled %d times" % (workers, used, wall, allowed, th))
    if th == 0:
        # Workers that got less than the quota on a busy host need not be throttled;
        # workers that got about the quota must have been.
        check(used < 0.8 * CPUS * wall, "%.2f CPU-s in %.2f s is the quota's worth, yet the cgroup was never throttled" % (used, wall))
        print("note: the host was too busy for the workers to reach the quota; the quota's value stands")
finish()
`

// pyPersist names what the first run leaves behind and the second must not see: files
// in the private /tmp (the working directory, the config and output directories the
// bootstrap makes there) and /dev/shm, and a SysV shared memory segment.
const pyPersist = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
PATHS = ["/tmp/" + TOKEN, "/tmp/.config/" + TOKEN, "/tmp/.cache/" + TOKEN, "/dev/shm/" + TOKEN]
SHM_KEY = 0x4d435058  # "MCPX"
# What a fresh sandbox's /tmp holds: the bootstrap's own directories, nothing else.
FRESH_TMP = {".config", "outputs"}


def fresh():
    left = sorted(set(os.listdir("/tmp")) - FRESH_TMP)
    check(not left, "/tmp holds more than the bootstrap's %s at start: %s" % (sorted(FRESH_TMP), left[:10]))
    left = os.listdir("/dev/shm")
    check(not left, "/dev/shm is not empty at start: %s" % left[:10])

`

const pyPersistWrite = pyPersist + `
fresh()
for p in PATHS:
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(TOKEN)
    with open(p) as f:
        check(f.read() == TOKEN, "cannot read back %s" % p)
shmid = libc.shmget(SHM_KEY, 4096, 0o1000 | 0o600)  # IPC_CREAT
check(shmid >= 0, "shmget(IPC_CREAT) failed: %s" % ename(ctypes.get_errno()))
finish()
`

const pyPersistCheck = pyPersist + `
for p in PATHS:
    check(not os.path.exists(p), "%s from the previous exec is still there" % p)
fresh()
ctypes.set_errno(0)
shmid = libc.shmget(SHM_KEY, 0, 0)
check(shmid < 0 and ctypes.get_errno() == errno.ENOENT,
      "the previous exec's shared memory segment: shmget = %d (%s), want ENOENT" % (shmid, ename(ctypes.get_errno())))
finish()
`

const pyDaemonStart = `
import re, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(sys.executable, [sys.executable, "-c", "import time\nwhile True: time.sleep(60)", TOKEN])
    os._exit(0)
os.close(w)
pid = int(os.read(r, 32))
os.close(r)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if TOKEN.encode() in f.read():
                break
    except OSError:
        pass
    time.sleep(0.05)
else:
    fail("the daemon %d did not come up" % pid)
check(os.getsid(pid) != os.getsid(0), "the daemon did not leave the session")
print("DAEMON %d" % pid)
# The container's id, for the runner to confirm that the container is removed.
cid = None
for path in ("/proc/self/mountinfo", "/proc/self/cgroup"):
    with open(path) as f:
        for line in f:
            if path.endswith("mountinfo") and " /etc/hostname " not in line:
                continue
            m = re.search(r"\b([0-9a-f]{64})\b", line)
            if m:
                cid = m.group(1)
                break
    if cid:
        break
if cid:
    print("SANDBOX-ID %s" % cid)
else:
    print("no container id visible")
finish()
`

const pyDaemonCheck = `
pids = sorted(int(n) for n in os.listdir("/proc") if n.isdigit())
check(pids == sorted({1, os.getpid()}), "processes other than the bootstrap and the program: %s" % [p for p in pids if p not in (1, os.getpid())])
for p in pids:
    try:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            check(TOKEN.encode() not in f.read(), "the previous exec's daemon runs as %d" % p)
    except FileNotFoundError:
        pass
finish()
`
