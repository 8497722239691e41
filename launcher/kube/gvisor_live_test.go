package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// envGVisorSeccomp names the Localhost seccomp profile for gVisor sandboxes on the test cluster
// (`mcp-exec seccomp-profile --gvisor`, installed by scripts/k8s/ci.sh under the kubelet's
// seccomp directory). Under gVisor the pod's profile filters the program's system calls
// (runsc --oci-seccomp), and runsc answers a denial with EPERM: RuntimeDefault, which denies
// clone3 with ENOSYS, leaves the program no thread (glibc falls back to clone only on ENOSYS).
const envGVisorSeccomp = "MCP_EXEC_TEST_KUBE_GVISOR_SECCOMP"

// gvisorRuntimeClass is the RuntimeClass scripts/k8s/up.sh applies (docs/deploy/kubernetes/gvisor).
const gvisorRuntimeClass = "gvisor"

// gvisorPids is RLIMIT_NPROC in the base spec of the test cluster's runsc runtime
// (KGVISORPIDS in scripts/k8s/env.sh).
const gvisorPids = 32

// gvisorLauncher is a launcher whose pods run under the RuntimeClass gvisor, with the gVisor
// seccomp profile. Without the profile's variable it skips, or fails in CI.
func gvisorLauncher(t *testing.T, runtimeClass string, opts launcher.Options) *launcher.Launcher {
	t.Helper()
	opts.Runtime = runtimeClass
	l, _, _ := testLauncherWith(t, Options{SeccompProfile: gvisorProfile(t)}, opts)
	return l
}

// gvisorProfile is the gVisor seccomp profile the test cluster has (its Localhost name).
// It skips without a test cluster or without the profile's variable, or fails in CI.
func gvisorProfile(t *testing.T) string {
	t.Helper()
	adminConfig(t) // skips without a test cluster
	profile := os.Getenv(envGVisorSeccomp)
	if profile == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: CI runs the gVisor tests (scripts/k8s/ci.sh sets it)", envGVisorSeccomp)
		}
		t.Skipf("%s is not set: no gVisor seccomp profile on the test cluster (scripts/k8s/ci.sh installs one)", envGVisorSeccomp)
	}
	return profile
}

// TestLiveGVisor: pods of the RuntimeClass gvisor (handler runsc, the containerd shim of gVisor
// on the test cluster) run the same execs with the same results, under gVisor's kernel; the
// start-up limits check passes there without an override (memory tried with an allocation,
// the process limit with threads, CPU read); an OOM is reported as such; and a warm pool serves
// from gVisor pods too, with node started ahead in them (Prestart): the Python execs kill it,
// a JavaScript one runs in it.
func TestLiveGVisor(t *testing.T) {
	l := gvisorLauncher(t, gvisorRuntimeClass, launcher.Options{Pids: gvisorPids, Memory: 256 << 20, CPUs: 1, PoolSize: 1, Prestart: []string{"javascript"}})
	if !l.Options().GVisor() {
		t.Fatalf("runtime %q: Options.GVisor() false", gvisorRuntimeClass)
	}

	t.Run("limits", func(t *testing.T) {
		lim, err := l.MeasureLimits(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("limits seen from a gVisor pod: %+v", lim)
		if lim.Runtime != "gvisor" || lim.Memory != 256<<20 || lim.Pids != gvisorPids || lim.CPUQuota != 100000 || lim.CPUPeriod != 100000 {
			t.Errorf("got %+v, want runtime gvisor, memory 256 MiB (held), pids %d (RLIMIT_NPROC, threads stopped below it), quota 100000/100000", lim, gvisorPids)
		}
		if err := l.VerifyLimits(t.Context()); err != nil {
			t.Errorf("VerifyLimits: %v", err)
		}
	})

	run := func(t *testing.T, job launcher.Job) launcher.Result {
		t.Helper()
		if job.Timeout == 0 {
			job.Timeout = 60 * time.Second
		}
		res, err := l.Run(t.Context(), job)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("execs", func(t *testing.T) {
		res := run(t, launcher.Job{Code: "import platform, sys; print(platform.release()); print(sys.stdin.read()[::-1]); sys.exit(3)", Stdin: "abc"})
		if !strings.HasSuffix(res.Stdout, "-gvisor\ncba\n") || res.ExitCode != 3 || res.OOMKilled || res.TimedOut {
			t.Errorf("got stdout %q exit %d oom %v timed out %v, want a gVisor kernel release, cba, exit 3", res.Stdout, res.ExitCode, res.OOMKilled, res.TimedOut)
		}
		res = run(t, launcher.Job{Code: "import os; print(os.getuid(), os.getgid()); os.makedirs('outputs', exist_ok=True); open('outputs/o.txt', 'w').write(open('in.txt').read()[::-1])",
			Files: []launcher.File{{Name: "in.txt", Data: []byte("hello")}}})
		if res.Stdout != "65532 65532\n" || res.ExitCode != 0 || len(res.Files) != 1 || string(res.Files[0].Data) != "olleh" {
			t.Errorf("got stdout %q exit %d files %+v, want 65532 65532, exit 0, o.txt=olleh", res.Stdout, res.ExitCode, res.Files)
		}
		res = run(t, launcher.Job{Code: "import threading\nts = [threading.Thread(target=lambda: None) for _ in range(8)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint('threads ok')"})
		if res.Stdout != "threads ok\n" || res.ExitCode != 0 {
			t.Errorf("threads: got stdout %q stderr %q exit %d, want threads ok (clone3 allowed by the gVisor profile)", res.Stdout, res.Stderr, res.ExitCode)
		}
	})
	t.Run("node started ahead", func(t *testing.T) {
		res := run(t, launcher.Job{Language: "javascript", Stdin: "abc", Code: "import { readFileSync } from 'node:fs';\n" +
			"console.log(process.execArgv.includes('--preserve-symlinks') ? 'ahead' : 'cold', readFileSync(0, 'utf8'), process.getuid())"})
		if res.Stdout != "ahead abc 65532\n" || res.ExitCode != 0 {
			t.Errorf("got stdout %q stderr %q exit %d, want ahead abc 65532 (boot.py's _ahead: --preserve-symlinks, which node started after its code has only with tools)", res.Stdout, res.Stderr, res.ExitCode)
		}
	})
	t.Run("oom", func(t *testing.T) {
		res := run(t, launcher.Job{Code: "print('allocating', flush=True)\nb = []\nwhile True:\n    b.append(b'\\1' * (8 << 20))"})
		if res.ExitCode != 137 || !res.OOMKilled || !strings.HasPrefix(res.Stdout, "allocating\n") {
			t.Errorf("got stdout %q stderr %q exit %d oom %v, want allocating, exit 137, oom_killed", res.Stdout, res.Stderr, res.ExitCode, res.OOMKilled)
		}
	})
	t.Run("fork bomb", func(t *testing.T) {
		res := run(t, launcher.Job{Code: "import os, errno, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(n, errno.errorcode[e.errno])"})
		if res.ExitCode != 0 || res.Stdout == "" {
			t.Fatalf("got stdout %q stderr %q exit %d, want the program to go on after the limit", res.Stdout, res.Stderr, res.ExitCode)
		}
		var n int
		var code string
		t.Logf("fork bomb: %s", strings.TrimSpace(res.Stdout))
		if _, err := fmt.Sscan(res.Stdout, &n, &code); err != nil || n >= gvisorPids || code != "EAGAIN" {
			t.Errorf("fork bomb: got %q, want fewer than %d children, then EAGAIN (RLIMIT_NPROC)", res.Stdout, gvisorPids)
		}
	})
}

// TestLiveGVisorMisnamed: a RuntimeClass whose handler is runsc but whose name does not say
// gVisor gives sandboxes gVisor's kernel while the server takes them for Linux's: the start-up
// check refuses, naming the mismatch (no override), rather than assert the wrong kernel.
func TestLiveGVisorMisnamed(t *testing.T) {
	admin := mustClients(adminConfig(t))
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "mcp-exec-test-sandboxed"}, Handler: "runsc"}
	if _, err := admin.NodeV1().RuntimeClasses().Create(t.Context(), rc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RuntimeClass %s: %v", rc.Name, err)
	}
	t.Cleanup(func() {
		_ = admin.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
	})
	l := gvisorLauncher(t, rc.Name, launcher.Options{Pids: gvisorPids, Memory: 256 << 20, CPUs: 1})
	err := l.VerifyLimits(t.Context())
	if !errors.Is(err, launcher.ErrRuntimeMismatch) || !strings.Contains(err.Error(), `runtime "mcp-exec-test-sandboxed" is not taken for gVisor`) {
		t.Errorf("VerifyLimits: got %v, want ErrRuntimeMismatch naming the runtime", err)
	}
}
