package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// selftest is `mcp-exec selftest`: every built-in probe of the sandbox contract,
// run through the configured engine, image and limits, one line per invariant and a
// final "N passed, N failed". It exits non-zero on any failure, so a deployment can
// prove itself (and fail closed) before it serves.
func selftest(ctx context.Context, cfg config.Config, l *launcher.Launcher, stdout io.Writer) int {
	canaryName := "MCP_EXEC_SELFTEST_CANARY_" + strings.ToUpper(randomHex(4))
	canaryValue := randomHex(16)
	os.Setenv(canaryName, canaryValue)
	defer os.Unsetenv(canaryName)

	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue = canaryName, canaryValue
	p.HostAddrs = hostAddrs()
	p.Token = randomHex(6)
	p.Process = cfg.Backend == "process"

	type line struct {
		name string
		err  error
		took time.Duration
	}
	// The Python set, then each other language of --languages: its start-up check (a
	// program in it runs, launcher.CheckLanguages) and its probes.
	langs := slices.DeleteFunc(config.SplitList(cfg.Languages), func(s string) bool { return s == launcher.LanguagePython })
	probes := append(probe.All(p), probe.Languages(p, langs...)...)
	lines := make([]line, len(probes)+1, len(probes)+1+len(langs))
	verify := func() {
		start := time.Now()
		lines[0] = line{"limits_enforced", l.VerifyLimits(ctx), time.Since(start)}
	}
	runProbes(probes, cfg.MaxConcurrent, verify, func(i int, pr probe.Probe) {
		start := time.Now()
		_, _, err := probe.Run(ctx, l, l, pr)
		lines[i+1] = line{pr.Name, err, time.Since(start)}
	})
	for _, lang := range langs {
		start := time.Now()
		_, err := l.CheckLanguages(ctx, []string{lang})
		lines = append(lines, line{"language_" + lang, err, time.Since(start)})
	}

	failed, unchecked, diffs := 0, 0, 0
	for _, ln := range lines {
		switch {
		case errors.Is(ln.err, probe.ErrNoHostView):
			// Outside evidence needs the engine's host: said, not passed.
			unchecked++
			fmt.Fprintf(stdout, "skip %-28s not checked: %s\n", ln.name, strings.ReplaceAll(ln.err.Error(), "\n", "; "))
		case ln.err != nil && knownDifference(cfg.Backend, p.GVisor, ln.name, ln.err):
			diffs++
			fmt.Fprintf(stdout, "diff %-28s documented difference of the %s backend%s: %s%s\n", ln.name, cfg.Backend, map[bool]string{true: " under gVisor"}[p.GVisor], strings.ReplaceAll(ln.err.Error(), "\n", "; "), scopeNote(cfg, ln.name))
		case ln.err != nil:
			failed++
			fmt.Fprintf(stdout, "FAIL %-28s %s%s\n", ln.name, strings.ReplaceAll(ln.err.Error(), "\n", "; "), scopeNote(cfg, ln.name))
		default:
			fmt.Fprintf(stdout, "ok   %-28s (%v)%s\n", ln.name, ln.took.Round(10*time.Millisecond), scopeNote(cfg, ln.name))
		}
	}
	summary := fmt.Sprintf("%d passed, %d failed", len(lines)-failed-unchecked-diffs, failed)
	if diffs > 0 {
		summary += fmt.Sprintf(", %d documented differences", diffs)
	}
	if unchecked > 0 {
		summary += fmt.Sprintf(", %d not checked (no view of the engine's host: run the selftest there)", unchecked)
	}
	fmt.Fprintln(stdout, summary)
	if failed > 0 {
		return 1
	}
	return 0
}

// knownDifferences are the probe failures a backend is documented to show
// (docs/kubernetes.md, "What the selftest shows"), as patterns of single complaints: a
// probe prints its complaints on one line joined by "; " (and the runner adds its own
// lines), and a failure counts as the difference only when every complaint on every line
// matches one of the probe's patterns, each anchored at both ends, so anything else
// about the probe still fails. The variable parts of a pattern never span a "; ".
var knownDifferences = map[string]map[string][]*regexp.Regexp{
	"kubernetes": {
		// The kubelet bind-mounts /etc/hosts read-write whatever readOnlyRootFilesystem
		// says; the file is root's, mode 0644, so the sandbox user cannot write it. So
		// is the termination-message file (0666, on the node's disk), at
		// terminationMessagePath /root/termination-log: in root's home (0700), which the
		// sandbox user cannot enter (no_writable_file_outside_wipe passes).
		"root_fs_read_only": {
			regexp.MustCompile(`^writable mounts: \['/etc/hosts', '/root/termination-log'\]$`),
			exitCode1,
		},
		// An emptyDir (medium Memory) is a tmpfs with its size, but Kubernetes has no way
		// to mount it noexec, nosuid or nodev.
		"tmp_private_noexec_capped": {
			regexp.MustCompile(`^/(tmp|dev/shm) lacks (noexec|nosuid|nodev): [^;\s]*$`),
			regexp.MustCompile(`^exec (shebang script|ELF copy) in /(tmp|dev/shm): succeeded \(CompletedProcess\([^;]*\)\), want EACCES/EPERM$`),
			regexp.MustCompile(`^mmap PROT_EXEC of a file in /(tmp|dev/shm): succeeded \(<mmap\.mmap [^;]*>\), want EPERM/EACCES$`),
			exitCode1,
		},
	},
	// The process backend (standalone mode) runs every exec as a child of the server
	// in the server's own container (docs/standalone.md): the probes written for a
	// container per exec see that container.
	"process": {
		// --network none leaves the namespace only lo, with no IPv6 address to send
		// from: connect/sendto to an outside IPv6 address fails before routing with
		// EADDRNOTAVAIL instead of ENETUNREACH, unreachable either way (the IPv4
		// addresses must still fail with ENETUNREACH, and network_only_loopback passes).
		"network_tcp_outside_unreachable": {
			regexp.MustCompile(`^` + v6NotAvail("tcp ") + `$`),
			exitCode1,
		},
		"network_udp_outside_unreachable": {
			regexp.MustCompile(`^` + v6NotAvail("udp sendto ") + `$`),
			exitCode1,
		},
		// HOME is the run's own directory /tmp/run-N (created empty, removed after the
		// run), not /tmp, which every run shares here; the rest of the fixed list is
		// checked as for any backend (launcher/process TestEnvironmentIsTheFixedList).
		"environment_isolated": {
			regexp.MustCompile(`^HOME is '/tmp/run-[0-9]+', want /tmp$`),
			exitCode1,
		},
		// /tmp holds the run's own directory besides the bootstrap's; anything a previous
		// run left would be a complaint of its own (TestStandaloneNothingLeftBehind,
		// launcher/process TestRunDirectoryIsPrivateAndWiped prove the wipe).
		"tmp_not_persisted": {
			regexp.MustCompile(`^/tmp holds more than the bootstrap's \['\.config', 'outputs'\] at start: \['run-[0-9]+'\]$`),
			exitCode1,
		},
		// PID 1 is the server, so the probe counts the run's bootstrap (its parent) as
		// one extra process: exactly one, any process left behind would make two
		// (TestStandaloneNothingLeftBehind, launcher/process TestRemoveKillsLeftovers).
		"daemon_not_persisted": {
			regexp.MustCompile(`^processes other than the bootstrap and the program: \[[0-9]+\]$`),
			exitCode1,
		},
	},
}

// gvisorDifferences are what a backend shows besides its knownDifferences when its
// sandboxes run under gVisor (Options.GVisor), with the same rules.
var gvisorDifferences = map[string]map[string][]*regexp.Regexp{
	"kubernetes": {
		// The emptyDir at /tmp reaches gVisor's kernel through its file server (the
		// Gofer), so its mount is 9p, not tmpfs; it is still the node's tmpfs of
		// --tmpfs-size, private to the pod, and the probe's fill still stops there with
		// ENOSPC. gVisor mounts a tmpfs of its own at /dev/shm instead of the emptyDir:
		// its size is not --tmpfs-size, what is written there is held in the sandbox's
		// memory, and the pod's memory limit stops it (measured: OOMKilled at about
		// 240 MiB of a 256 MiB limit).
		"tmp_private_noexec_capped": {
			regexp.MustCompile(`^/tmp is 9p, want tmpfs$`),
			regexp.MustCompile(`^/dev/shm is [0-9]+ bytes, want [0-9]+$`),
		},
	},
}

// exitCode1 is the runner's line for a probe that printed its complaints and exited 1.
var exitCode1 = regexp.MustCompile(`^exit code 1 \(signal 0\), want 0$`)

// v6NotAvail is the probe's complaint about one outside IPv6 address failing with
// EADDRNOTAVAIL.
func v6NotAvail(what string) string {
	return regexp.QuoteMeta(what) + `\[[0-9a-f:]+\]:[0-9]+: failed with EADDRNOTAVAIL \(\[Errno 99\] Cannot assign requested address\), want ENETUNREACH`
}

// knownDifference reports whether err, a probe's failure, is nothing but the backend's
// documented differences (with gvisor, also those under gVisor): every complaint matches
// one of the probe's patterns, and at least one says more than the exit code.
func knownDifference(backend string, gvisor bool, probeName string, err error) bool {
	allowed := knownDifferences[backend][probeName]
	if gvisor {
		allowed = slices.Concat(allowed, gvisorDifferences[backend][probeName])
	}
	if len(allowed) == 0 {
		return false
	}
	specific := false // the program's exit code alone is no difference: it says nothing of why
	for _, line := range strings.Split(err.Error(), "\n") {
		for _, complaint := range strings.Split(line, "; ") {
			if !slices.ContainsFunc(allowed, func(re *regexp.Regexp) bool { return re.MatchString(complaint) }) {
				return false
			}
			specific = specific || !strings.HasPrefix(complaint, "exit code ")
		}
	}
	return specific
}

func hostAddrs() []string {
	addrs, _ := net.InterfaceAddrs()
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// perExec are the invariants the process backend (standalone mode) gives each exec
// by itself; every other probe passes there only because of the container the server
// and all its runs share (its network namespace, capabilities, the runtime's seccomp
// profile, root filesystem and cgroup limits).
var perExec = map[string]string{
	"tmp_not_persisted":                 "per exec: the run's directory is removed and /tmp, /dev/shm and SysV IPC wiped before the next run's code",
	"daemon_not_persisted":              "per exec: every process left behind is killed before the next run's code",
	"environment_isolated":              "per exec: a fixed environment, nothing of the server's",
	"fds_only_std":                      "per exec: three pipes, every other descriptor close-on-exec",
	"core_dumps_disabled":               "per exec: the run's wrapper and its bootstrap set RLIMIT_CORE 0, soft and hard",
	"bootstrap_unreachable":             "per exec: the bootstrap and the server are non-dumpable",
	"memory_limit_kills_program":        "per exec by RLIMIT_DATA, per container by the cgroup",
	"memory_oom_reported_for_child":     "per container: the cgroup's OOM kill (runs get oom_score_adj 1000)",
	"pids_limit_stops_fork_bomb":        "per exec by RLIMIT_NPROC (counts the server's threads too), per container by the cgroup",
	"seccomp_filter_active":             "per exec: each run installs its own filter (the runtime's profile is per container)",
	"seccomp_denies_dangerous_syscalls": "per exec for launcher/syscalls' table (io_uring, ptrace, process_vm_*, pidfd_getfd, namespaces, keyrings, bpf, userfaultfd, perf_event_open, kcmp, syslog: the run's own filter, and its bootstrap's as in every sandbox); the rest per container (the runtime's profile)",
}

// perExecGroup are the language probes' groups (probe.Languages) that hold per exec
// on the process backend, as their Python counterparts in perExec.
var perExecGroup = map[string]string{
	"privileges":         "per exec: the run's own seccomp filter; per container: the user, capabilities, no_new_privs",
	"pids_limit":         perExec["pids_limit_stops_fork_bomb"],
	"memory_limit":       perExec["memory_limit_kills_program"],
	"timeout_kills_tree": perExec["daemon_not_persisted"],
}

// scopeNote says, with the process backend, whether an invariant holds per exec or
// only per container.
func scopeNote(cfg config.Config, name string) string {
	if cfg.Backend != "process" {
		return ""
	}
	for _, lang := range launcher.OtherLanguages {
		if group, ok := strings.CutPrefix(name, lang+"_"); ok && perExecGroup[group] != "" {
			return "  [" + perExecGroup[group] + "]"
		}
	}
	if s, ok := perExec[name]; ok {
		return "  [" + s + "]"
	}
	return "  [per container: shared by the server and every run]"
}

// runProbes runs first beside the probes that are not Exclusive, at most parallel of
// those at once, and then, once all of them have ended, each Exclusive probe alone.
func runProbes(probes []probe.Probe, parallel int, first func(), run func(i int, pr probe.Probe)) {
	var wg sync.WaitGroup
	wg.Go(first)
	sem := make(chan struct{}, max(parallel, 1))
	for i, pr := range probes {
		if pr.Exclusive {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			run(i, pr)
		})
	}
	wg.Wait()
	for i, pr := range probes {
		if pr.Exclusive {
			run(i, pr)
		}
	}
}
