package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// selftest is `mcp-exec selftest`: every built-in probe of the sandbox contract,
// run through the configured engine, image and limits, one line per invariant and a
// final "N passed, N failed". It exits non-zero on any failure, so a deployment can
// prove itself (and fail closed) before it serves.
func selftest(ctx context.Context, cfg Config, l *launcher.Launcher, gone func(context.Context, string) error, stdout io.Writer) int {
	canaryName := "MCP_EXEC_SELFTEST_CANARY_" + strings.ToUpper(randomHex(4))
	canaryValue := randomHex(16)
	os.Setenv(canaryName, canaryValue)
	defer os.Unsetenv(canaryName)

	p := probe.ParamsOf(l.Options())
	p.CanaryName, p.CanaryValue = canaryName, canaryValue
	p.HostAddrs = hostAddrs()
	p.Token = randomHex(6)

	type line struct {
		name string
		err  error
		took time.Duration
	}
	probes := probe.All(p)
	lines := make([]line, len(probes)+1)
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		lines[0] = line{"limits_enforced", l.VerifyLimits(ctx), time.Since(start)}
	})
	sem := make(chan struct{}, max(cfg.MaxConcurrent, 1))
	for i, pr := range probes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			lines[i+1] = line{pr.Name, runProbe(ctx, l, gone, pr), time.Since(start)}
		})
	}
	wg.Wait()

	failed, diffs := 0, 0
	for _, ln := range lines {
		if ln.err != nil && knownDifference(cfg.Backend, ln.name, ln.err) {
			diffs++
			fmt.Fprintf(stdout, "diff %-28s documented difference of the %s backend: %s\n", ln.name, cfg.Backend, strings.ReplaceAll(ln.err.Error(), "\n", "; "))
			continue
		}
		if ln.err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL %-28s %s\n", ln.name, strings.ReplaceAll(ln.err.Error(), "\n", "; "))
			continue
		}
		fmt.Fprintf(stdout, "ok   %-28s (%v)\n", ln.name, ln.took.Round(10*time.Millisecond))
	}
	if diffs > 0 {
		fmt.Fprintf(stdout, "%d passed, %d documented differences, %d failed\n", len(lines)-failed-diffs, diffs, failed)
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed\n", len(lines)-failed, failed)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// knownDifferences are the probe failures a backend is documented to show
// (docs/kubernetes.md, "What the selftest shows"): a failure counts as the difference only
// when every one of its complaints matches, so anything else about the probe still fails.
var knownDifferences = map[string]map[string][]*regexp.Regexp{
	"kubernetes": {
		// The kubelet bind-mounts /etc/hosts read-write whatever readOnlyRootFilesystem
		// says; the file is root's, mode 0644, so the sandbox user cannot write it.
		"root_fs_read_only": {
			regexp.MustCompile(`^writable mounts: \['/etc/hosts'\]$`),
			regexp.MustCompile(`^exit code 1 \(signal 0\), want 0$`),
		},
		// An emptyDir (medium Memory) is a tmpfs with its size, but Kubernetes has no way
		// to mount it noexec, nosuid or nodev.
		"tmp_private_noexec_capped": {
			regexp.MustCompile(`^/(tmp|dev/shm) lacks (noexec|nosuid|nodev): `),
			regexp.MustCompile(`^exec (shebang script|ELF copy) in /(tmp|dev/shm): succeeded \(`),
			regexp.MustCompile(`^mmap PROT_EXEC of a file in /(tmp|dev/shm): succeeded \(`),
			regexp.MustCompile(`^exit code 1 \(signal 0\), want 0$`),
		},
	},
}

func knownDifference(backend, probeName string, err error) bool {
	allowed := knownDifferences[backend][probeName]
	if len(allowed) == 0 {
		return false
	}
	for _, complaint := range strings.Split(err.Error(), "\n") {
		if !slices.ContainsFunc(allowed, func(re *regexp.Regexp) bool { return re.MatchString(complaint) }) {
			return false
		}
	}
	return true
}

func runProbe(ctx context.Context, l *launcher.Launcher, gone func(context.Context, string) error, pr probe.Probe) error {
	res, err := l.Run(ctx, pr.Job)
	if err != nil {
		return fmt.Errorf("running: %w", err)
	}
	if err := pr.Check(res); err != nil {
		return err
	}
	if pr.Next == nil {
		return nil
	}
	if pr.AwaitRemoval {
		if err := gone(ctx, probe.SandboxID(res.Stdout)); err != nil {
			return err
		}
	}
	return runProbe(ctx, l, gone, *pr.Next)
}

// awaitGone waits until the engine no longer knows container id.
func awaitGone(ctx context.Context, cli *client.Client, id string) error {
	if id == "" {
		return fmt.Errorf("no container id to await")
	}
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		switch {
		case docker.IsGone(err):
			return nil
		case err != nil:
			return fmt.Errorf("inspecting container %.12s: %w", id, err)
		case time.Now().After(deadline):
			return fmt.Errorf("container %.12s still exists 45s after its run ended", id)
		}
	}
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
