package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Lockdown says what the container must give the server before it runs programs as
// its own children. Every lock is checked; a missing one is an error that names it
// and the flag that provides it.
type Lockdown struct {
	// MaxTmpfs is the largest /tmp accepted, in bytes (the operator's tmpfs size):
	// a tmpfs mounted without size= gets half the host's memory.
	MaxTmpfs int64
	// Scratch is the backend's scratch root (Options.Scratch; "" is "/tmp"): with
	// /dev/shm and /dev/mqueue, what the wipe between runs covers. No other mount may
	// be writable (mounts.go).
	Scratch string
	// Network: the server serves HTTP or SSE, so its namespace has interfaces
	// besides loopback. Then EgressDenied must be true (the operator states that a
	// NetworkPolicy or firewall denies egress) and the egress probe must fail to
	// connect to every one of Probes.
	Network      bool
	EgressDenied bool
	// Probes are the addresses (host:port: a TCP connection; udp:host:port: a DNS
	// query over UDP) a child tries when Network is true; none may answer. Empty is
	// DefaultProbes. To them the check always adds the container's own neighbourhood
	// (egress_neighbours.go): its resolvers (loopback ones too), default gateways,
	// the peers in /proc/net/arp and a bounded sweep of its subnets.
	Probes       []string
	ProbeTimeout time.Duration // per address; 0 is 1.5 s
	// Python is the interpreter the runs use ("" is python3): the child that counts
	// the uid's tasks on the host (nproc.go) runs in it.
	Python string
	// Pids is the runs' pids limit (0: none), which their RLIMIT_NPROC follows: the
	// uid's tasks outside the container count against it.
	Pids int64

	// seccompArg0 replaces the seccomp child's argv[0]: tests only (seccomp_test.go
	// runs the probe without the filter, to see the check refuse).
	seccompArg0 string
}

// DefaultProbes are outside addresses a network that allows egress would let a
// connection reach: public resolvers over IPv4 and IPv6 (which answer on 53 and 443
// when reachable, and answer a DNS query over UDP: "udp:" entries) and one address
// in each private range.
var DefaultProbes = []string{
	"1.1.1.1:443", "8.8.8.8:53", "9.9.9.9:443",
	"10.0.0.1:53", "172.16.0.1:53", "192.168.0.1:53", "169.254.169.254:80",
	"[2606:4700:4700::1111]:443", "[2001:4860:4860::8888]:53",
	"udp:1.1.1.1:53", "udp:8.8.8.8:53", "udp:[2606:4700:4700::1111]:53",
}

// LockError is one missing lock.
type LockError struct {
	Lock string // short name: "not root", "no capabilities", ...
	Msg  string // what was found and how to provide the lock
	// Err is the *backend.SettingError Msg was written from when a setting provides
	// the lock, so that the command spells the setting (backend.Spell); else nil.
	Err error
}

func (e *LockError) Error() string {
	return "standalone lock " + strconv.Quote(e.Lock) + " missing: " + e.Msg
}

func (e *LockError) Unwrap() error { return e.Err }

// The settings that provide a lock, as Check's errors name them.
const (
	SettingTmpfsSize    backend.Setting = "tmpfs-size"
	SettingEgressDenied backend.Setting = "standalone-egress-denied"
)

// Status is what the check found, for the start-up log.
type Status struct {
	UID          int
	TmpfsBytes   int64
	Interfaces   []string
	ProbedEgress []string // the addresses the egress child failed to reach
	Seccomp      []string // what the seccomp child saw, "name=ERRNO" per denied syscall
	// UIDTasksHost and UIDTasksHere are the uid's tasks as the kernel counts them for
	// RLIMIT_NPROC (the whole host) and as the container's /proc shows them; 0 when not
	// measured (nproc.go).
	UIDTasksHost, UIDTasksHere int64
	// Notes are what the check saw and did not count as a missing lock, with why
	// (for the start-up log, at warn level).
	Notes []string
}

// Check verifies every lock; it returns every missing one (joined LockErrors).
func (l Lockdown) Check(ctx context.Context) (Status, error) {
	var st Status
	var errs []error
	miss := func(lock, format string, a ...any) {
		errs = append(errs, &LockError{Lock: lock, Msg: fmt.Sprintf(format, a...)})
	}
	missSetting := func(lock string, s backend.Setting, text func(backend.Vars) string) {
		se := &backend.SettingError{Setting: s, Text: text}
		errs = append(errs, &LockError{Lock: lock, Msg: se.Error(), Err: se})
	}
	st.UID = os.Getuid()
	if os.Getuid() == 0 || os.Geteuid() == 0 || os.Getgid() == 0 || os.Getegid() == 0 {
		miss("not root", "running as uid %d gid %d; run as an unprivileged user and group: docker run --user 65532:65532 (Kubernetes: runAsUser/runAsGroup 65532, runAsNonRoot)", os.Geteuid(), os.Getegid())
	}
	status, err := readStatus()
	if err != nil {
		return st, fmt.Errorf("reading /proc/self/status: %w", err)
	}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		v, ok := status[k]
		if !ok && k == "CapAmb" {
			continue // kernels before 4.3
		}
		n, err := strconv.ParseUint(v, 16, 64)
		if err != nil || n != 0 {
			miss("no capabilities", "%s is %s, want 0 (every capability set empty, the bounding set too); docker run --cap-drop ALL (Kubernetes: capabilities.drop [ALL])", k, v)
			break
		}
	}
	if status["NoNewPrivs"] != "1" {
		miss("no-new-privileges", "NoNewPrivs is %q, want 1; docker run --security-opt no-new-privileges (Kubernetes: allowPrivilegeEscalation false)", status["NoNewPrivs"])
	}
	if v := status["Seccomp"]; v != "2" {
		miss("runtime seccomp profile", "Seccomp is %q in /proc/self/status, want 2 (a filter of the container's runtime): the server runs unconfined, and the per-run filter is all that stands between a program and the kernel's namespace, keyring, userfaultfd, perf and bpf calls; drop --security-opt seccomp=unconfined (Docker and Podman apply their default profile; Kubernetes: securityContext.seccompProfile.type RuntimeDefault, since the kubelet's default is Unconfined)", v)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs("/", &fs); err != nil {
		return st, fmt.Errorf("statfs /: %w", err)
	}
	if fs.Flags&unix.ST_RDONLY == 0 {
		miss("read-only root filesystem", "/ is mounted read-write; docker run --read-only (Kubernetes: readOnlyRootFilesystem true)")
	}
	if err := unix.Statfs("/tmp", &fs); err != nil {
		miss("/tmp a size-limited tmpfs", "statfs /tmp: %v; docker run --tmpfs /tmp:rw,noexec,nosuid,size=64m", err)
	} else {
		size := int64(fs.Blocks) * fs.Bsize
		st.TmpfsBytes = size
		switch {
		case fs.Type != unix.TMPFS_MAGIC:
			miss("/tmp a size-limited tmpfs", "/tmp is not a tmpfs (filesystem magic %#x): what a run leaves there would outlive the container's memory limit; docker run --tmpfs /tmp:rw,noexec,nosuid,size=64m (Kubernetes: an emptyDir with medium Memory and sizeLimit)", fs.Type)
		case l.MaxTmpfs > 0 && size > l.MaxTmpfs:
			missSetting("/tmp a size-limited tmpfs", SettingTmpfsSize, func(v backend.Vars) string {
				return fmt.Sprintf("/tmp is a tmpfs of %d bytes, more than the %d allowed (%s); mount it with size=: docker run --tmpfs /tmp:rw,noexec,nosuid,size=64m", size, l.MaxTmpfs, v.Name(SettingTmpfsSize))
			})
		}
	}
	// What a run's user could write; as root (a lock missing already) that is everything.
	if info, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		return st, fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	} else if found := mountsOutsideWipe(parseMountinfo(info), l.wiped(), hostMountProbe); len(found) > 0 && os.Geteuid() != 0 {
		miss("no writable mount outside the wipe", "%s: runs share this container's filesystem and the wipe between them covers only %s, so what one run writes there the next one reads (and a mount of the host's keeps it on the host's disk); remove the mount or mount it read-only (docker run --read-only without extra --tmpfs or -v mounts; Kubernetes: readOnly: true on every volumeMount but /tmp, and terminationMessagePath /root/termination-log, a directory the user cannot enter, instead of /dev/termination-log; Podman: --read-only-tmpfs=false, since its --read-only adds writable tmpfs mounts at /run and /var/tmp)", strings.Join(found, "; "), strings.Join(l.wiped(), ", "))
	}
	missing, note := swapCheck(os.ReadFile)
	if missing != "" {
		miss("no swap beyond the memory limit", "%s: a run could swap beyond the container's memory limit; docker run --memory-swap 256m, equal to --memory (compose: memswap_limit; Kubernetes: a node without swap, or swapBehavior NoSwap)", missing)
	}
	if note != "" {
		st.Notes = append(st.Notes, "swap: "+note)
	}
	seen, err := checkSeccomp(ctx, l.seccompArg0)
	st.Seccomp = seen
	if err != nil {
		miss("seccomp filter per run", "%v: every run installs a seccomp filter denying io_uring, ptrace, process_vm_readv/writev, pidfd_getfd, namespaces, keyrings, userfaultfd, perf_event_open and bpf before its program starts (launcher/process/seccomp.go); it needs seccomp filters in the kernel (CONFIG_SECCOMP_FILTER), a runtime profile that allows seccomp(2) and prctl(PR_SET_NO_NEW_PRIVS) (Docker's, containerd's and Podman's defaults do), and amd64 or arm64", err)
	}
	if os.Geteuid() != 0 { // RLIMIT_NPROC does not apply to root (a lock missing already)
		t, note := l.checkNproc(ctx, os.Getuid())
		st.UIDTasksHost, st.UIDTasksHere = t.Host, t.Here
		if note != "" {
			st.Notes = append(st.Notes, note)
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return st, fmt.Errorf("listing network interfaces: %w", err)
	}
	var others []string
	for _, i := range ifs {
		st.Interfaces = append(st.Interfaces, i.Name)
		if i.Flags&net.FlagLoopback == 0 {
			others = append(others, i.Name)
		}
	}
	switch {
	case len(others) == 0:
	case !l.Network:
		missSetting("network namespace holds only loopback", SettingEgressDenied, func(v backend.Vars) string {
			return fmt.Sprintf("interfaces %s besides loopback: a program could reach the network; docker run --network none (serving HTTP or SSE needs a network: then set %s=true behind a NetworkPolicy that denies egress)", strings.Join(others, ", "), v.Var(SettingEgressDenied))
		})
	case !l.EgressDenied:
		missSetting("egress denied", SettingEgressDenied, func(v backend.Vars) string {
			return fmt.Sprintf("serving %s needs a network (interfaces %s), and a program would share it: deny egress outside the container (the Kubernetes NetworkPolicy in docs/deploy/standalone, a firewall) and say so by setting %s to true", "HTTP/SSE", strings.Join(others, ", "), v.Name(SettingEgressDenied))
		})
	default:
		reached, tried, err := l.probeEgress(ctx)
		st.ProbedEgress = tried
		if err != nil {
			return st, fmt.Errorf("probing egress: %w", err)
		}
		if len(reached) > 0 {
			missSetting("egress denied", SettingEgressDenied, func(v backend.Vars) string {
				return fmt.Sprintf("%s=true, but %s: egress is open; deny it (NetworkPolicy, firewall; a network of the server's own, without peers) or serve stdio with --network none", v.Var(SettingEgressDenied), describeReached(reached))
			})
		}
	}
	return st, errors.Join(errs...)
}

// wiped is what the wipe between runs covers (Backend.wipe).
func (l Lockdown) wiped() []string {
	scratch := l.Scratch
	if scratch == "" {
		scratch = "/tmp"
	}
	return []string{scratch, "/dev/shm", "/dev/mqueue"}
}

func readStatus() (map[string]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, sc.Err()
}

// probes is the list the egress child tries: Probes (or DefaultProbes), then the
// neighbourhood, without duplicates.
func (l Lockdown) probes() []string {
	base := l.Probes
	if len(base) == 0 {
		base = DefaultProbes
	}
	return dedupe(append(append([]string(nil), base...), neighbourhood()...))
}

// probeEgress runs the egress child (this binary, re-executed as a run's wrapper is,
// with a run's environment) and returns the addresses it reached.
func (l Lockdown) probeEgress(ctx context.Context) (reached, tried []string, err error) {
	tried = l.probes()
	timeout := l.ProbeTimeout
	if timeout <= 0 {
		timeout = 1500 * time.Millisecond
	}
	args := wrapperArgs("egress", Limits{}, append([]string{timeout.String()}, tried...))
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = args
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return nil, tried, fmt.Errorf("running the egress child: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if a, ok := strings.CutPrefix(line, "reached "); ok {
			reached = append(reached, a)
		}
	}
	return reached, tried, nil
}

// egressChild tries each address concurrently and prints "reached ADDR" for each
// that answered: a TCP connection that succeeded (nothing is sent over it), a DNS
// answer over UDP (probeUDP), or for a neighbour ("peer:" entries) a connection that
// succeeded on any of neighbourPorts.
func egressChild(args []string) int {
	if len(args) < 1 {
		return 64
	}
	timeout, err := time.ParseDuration(args[0])
	if err != nil {
		return 64
	}
	addrs := args[1:]
	res := make([]string, len(addrs))
	done := make(chan struct{})
	for i, a := range addrs {
		go func() {
			defer func() { done <- struct{}{} }()
			res[i] = probeOne(a, timeout)
		}()
	}
	for range addrs {
		<-done
	}
	for _, r := range res {
		if r != "" {
			fmt.Println("reached " + r)
		}
	}
	return 0
}

func resolvers(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if ip := net.ParseIP(f[1]); ip != nil {
				out = append(out, f[1])
			}
		}
	}
	return out
}

// gateways reads the IPv4 default gateways from /proc/net/route (hex, little endian).
func gateways(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		out = append(out, net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String())
	}
	return out
}

// Swap files the swap lock reads (swapCheck's inputs).
const (
	memswV1   = "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
	memV1     = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	swapMaxV2 = "/sys/fs/cgroup/memory.swap.max"
	meminfo   = "/proc/meminfo"
)

// swapCheck decides the swap lock from the files it reads through read (os.ReadFile;
// the unit test feeds its own). The container's memory cgroup may let it swap beyond
// its memory limit: cgroup v1 memory.memsw.limit_in_bytes above memory.limit_in_bytes
// (docker run --memory without --memory-swap: twice the limit), cgroup v2
// memory.swap.max other than 0. That is a missing lock only when the host has swap
// (SwapTotal in /proc/meminfo above 0, or unreadable): with none, no run can swap
// whatever the cgroup allows, and note says what was seen and why it passed. A
// cgroup v1 without memsw files (swap accounting off) is not checked; with host swap
// that is noted too.
func swapCheck(read func(string) ([]byte, error)) (missing, note string) {
	readInt := func(path string) (int64, bool) {
		b, err := read(path)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	var found string
	if memsw, ok := readInt(memswV1); ok {
		if mem, ok := readInt(memV1); ok && memsw > mem {
			found = fmt.Sprintf("memory.memsw.limit_in_bytes is %d, more than memory.limit_in_bytes %d", memsw, mem)
		}
	} else if b, err := read(swapMaxV2); err == nil {
		if v := strings.TrimSpace(string(b)); v != "0" {
			found = "memory.swap.max is " + v + ", want 0"
		}
	}
	swapTotal, known := hostSwap(read)
	switch {
	case found == "":
		if _, err := read(memV1); err == nil && known && swapTotal > 0 {
			if _, ok := readInt(memswV1); !ok {
				return "", fmt.Sprintf("no memory.memsw.limit_in_bytes (swap accounting off) and the host has %d kB of swap: the swap a run may use is not checked", swapTotal)
			}
		}
		return "", ""
	case known && swapTotal == 0:
		return "", found + ", but the host has no swap (SwapTotal 0 kB in /proc/meminfo): no run can swap, so the limit is moot and not a missing lock (add --memory-swap equal to --memory anyway, should the host get swap)"
	case known:
		return fmt.Sprintf("%s, and the host has %d kB of swap", found, swapTotal), ""
	default:
		return found + ", and the host's swap is unknown (/proc/meminfo unreadable)", ""
	}
}

// hostSwap reads SwapTotal (kB) from /proc/meminfo.
func hostSwap(read func(string) ([]byte, error)) (kB int64, ok bool) {
	b, err := read(meminfo)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, "SwapTotal:"); found {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
