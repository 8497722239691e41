package launcher

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// waitForSandbox returns the id of the first container of instance once it runs.
func waitForSandbox(t *testing.T, cli *client.Client, instance string) string {
	t.Helper()
	f := make(client.Filters).Add("label", LabelInstance+"="+instance).Add("status", "running")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, err := listContainers(t.Context(), cli, client.ContainerListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			return list.Items[0].ID
		}
	}
	t.Fatal("no running sandbox appeared")
	return ""
}

// TestKilledFromOutside: a sandbox killed by someone else gives a clear result, not
// a hang or a server error.
func TestKilledFromOutside(t *testing.T) {
	l := testLauncher(t, Options{PoolSize: -1})
	cli := enginetest.Client(t)
	go func() {
		id := waitForSandbox(t, cli, l.opts.Instance)
		time.Sleep(3 * time.Second) // the program has printed and sleeps
		_, _ = cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "KILL"})
	}()
	res, err := l.Run(t.Context(), Job{Code: "import time\nprint('started', flush=True)\ntime.sleep(60)"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 137 || res.Signal != 9 || res.TimedOut {
		t.Errorf("got exit %d signal %d timed_out %v, want 137, 9, false", res.ExitCode, res.Signal, res.TimedOut)
	}
	if !strings.Contains(res.Stderr, "sandbox was stopped before the program reported its exit") {
		t.Errorf("stderr: got %q, want a note that the sandbox was stopped", res.Stderr)
	}
	if res.Stdout != "started\n" {
		t.Errorf("stdout: got %q, want %q", res.Stdout, "started\n")
	}
}

// TestImageDeleted: deleting the image under a running server gives a clear error
// naming the image and how to build it.
func TestImageDeleted(t *testing.T) {
	base := testLauncher(t, Options{})
	tag := "mcp-exec/test-deleted:" + randomHex(4)
	if out, err := exec.Command("docker", "tag", base.opts.Image, tag).CombinedOutput(); err != nil {
		t.Skipf("docker CLI: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })
	l := testLauncher(t, Options{Image: tag, Instance: "test-image-deleted", PoolSize: -1})
	errc := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background(), Job{Code: "import time; time.sleep(2); print('done')"})
		errc <- err
	}()
	waitForSandbox(t, enginetest.Client(t), l.opts.Instance)
	if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
		t.Fatalf("docker rmi: %v: %s", err, out)
	}
	if err := <-errc; err != nil {
		t.Errorf("run in flight: got %v, want it to finish (its container holds the image)", err)
	}
	_, err := l.Run(t.Context(), Job{Code: "print(1)"})
	if !errors.Is(err, ErrImageMissing) || !strings.Contains(err.Error(), tag) {
		t.Errorf("got %v, want ErrImageMissing naming %s", err, tag)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestNoCallerDataPersisted puts canaries in the code, the stdin and the output and
// searches the engine's records (inspect, the data root's container files and the
// container's writable layer) while the sandbox runs and after it is gone, and our
// own log at trace level. The output canary is computed by the program, so it is in
// neither the code nor the stdin.
func TestNoCallerDataPersisted(t *testing.T) {
	var logs syncbuf.Buffer
	l := testLauncher(t, Options{PoolSize: -1})
	l.log = zerolog.New(&logs).Level(zerolog.TraceLevel)
	cli := enginetest.Client(t)
	info, err := cli.Info(t.Context(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	records := engineRecordDirs(t, cli, info.Info.DockerRootDir)
	for _, d := range records {
		if _, err := os.ReadDir(d); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("cannot read the engine's records: %v", err)
			}
			t.Fatalf("cannot read the engine's records %s: %v", d, err)
		}
	}

	codeCanary := "code-canary-" + randomHex(12)
	stdinCanary := "stdin-canary-" + randomHex(12)
	outSeed := randomHex(12)
	outCanary := "output-canary-" + outSeed // printed reversed-then-restored at run time
	code := "# " + codeCanary + "\n" +
		"import sys, time\n" +
		"data = sys.stdin.read()\n" +
		"print(data)\n" +
		"print('output-canary-' + '" + reverse(outSeed) + "'[::-1], flush=True)\n" +
		"open('/tmp/f', 'w').write(data)\n" +
		"time.sleep(4)\n"
	canaries := []string{codeCanary, stdinCanary, outCanary}

	search := callerDataSearch(t, cli, records, canaries)

	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := l.Run(context.Background(), Job{Code: code, Stdin: stdinCanary, Timeout: 30 * time.Second})
		done <- outcome{res, err}
	}()
	id := waitForSandbox(t, cli, l.opts.Instance)
	time.Sleep(1500 * time.Millisecond) // the program has read its stdin and printed
	if hits := search(id); len(hits) > 0 {
		t.Errorf("while running: caller data found: %v", hits)
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if !strings.Contains(o.res.Stdout, outCanary) || !strings.Contains(o.res.Stdout, stdinCanary) {
		t.Fatalf("stdout %q lacks the canaries: the test would prove nothing", o.res.Stdout)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoCallerDataLeft(t, search, canaries, logs.String())
}

// assertNoCallerDataLeft checks, once the launcher is closed and its sandboxes removed,
// that search finds no canary in the engine's records and that our trace log holds none
// (and does hold lifecycle lines, else it proves nothing).
func assertNoCallerDataLeft(t *testing.T, search func(id string) []found, canaries []string, log string) {
	t.Helper()
	if hits := search(""); len(hits) > 0 {
		t.Errorf("after removal: caller data found: %v", hits)
	}
	for _, c := range canaries {
		if strings.Contains(log, c) {
			t.Errorf("our log contains %s", c)
		}
	}
	if !strings.Contains(log, "sandbox started") {
		t.Errorf("log: got %q, want lifecycle lines at trace level (else this proves nothing)", log)
	}
}

// found is one canary found in the engine's records.
type found struct{ where, canary string }

// callerDataSearch returns a search of the engine's records (inspect of container id
// when not empty, the directories of records and the container's own layers) for
// canaries.
func callerDataSearch(t *testing.T, cli *client.Client, records, canaries []string) func(id string) []found {
	return func(id string) []found {
		var hits []found
		if id != "" {
			ins, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
			if err == nil {
				for _, c := range canaries {
					if bytes.Contains(ins.Raw, []byte(c)) {
						hits = append(hits, found{"docker inspect", c})
					}
				}
			}
		}
		dirs := append([]string(nil), records...)
		// The container's own layers, wherever the storage driver keeps them.
		if id != "" {
			if ins, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err == nil {
				for _, k := range []string{"UpperDir", "WorkDir", "MergedDir"} {
					if d := ins.Container.GraphDriver.Data[k]; d != "" && k != "MergedDir" {
						dirs = append(dirs, d)
					}
				}
			}
		}
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
				if err != nil || !e.Type().IsRegular() {
					return nil
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return nil
				}
				for _, c := range canaries {
					if bytes.Contains(b, []byte(c)) {
						hits = append(hits, found{path, c})
					}
				}
				return nil
			})
		}
		return hits
	}
}

// engineRecordDirs lists the directories where the engine keeps what it records about
// containers. Docker: <data root>/containers (config, logs, hosts files). Podman: each
// container's static and run-time directories (config.json, ctr.log of the k8s-file log
// driver, attach and exit files) under the store's graph and run roots, its database
// (<graph root>/libpod), its temporary directory and the events log.
func engineRecordDirs(t *testing.T, cli *client.Client, root string) []string {
	t.Helper()
	ei, err := engine.Identify(t.Context(), cli)
	if err != nil {
		t.Fatal(err)
	}
	if !ei.IsPodman() {
		return []string{filepath.Join(root, "containers")}
	}
	// The run root is not in the Docker-compatible info; Podman's own API has it.
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return cli.Dialer()(ctx) },
	}}
	defer hc.CloseIdleConnections() // its keep-alive connection would outlive the test
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://podman/v4.0.0/libpod/info", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("podman info: %v", err)
	}
	defer resp.Body.Close()
	var pi struct {
		Store struct{ GraphRoot, RunRoot string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&pi); err != nil || pi.Store.GraphRoot == "" || pi.Store.RunRoot == "" {
		t.Fatalf("podman info: %v (store %+v)", err, pi.Store)
	}
	dirs := []string{
		filepath.Join(pi.Store.GraphRoot, "overlay-containers"),
		filepath.Join(pi.Store.GraphRoot, "libpod"),
		filepath.Join(pi.Store.RunRoot, "overlay-containers"),
	}
	// tmp_dir (attach sockets, exit files, events/events.log): /run/libpod for a rootful
	// podman (rootless: $XDG_RUNTIME_DIR/libpod/tmp of its user); no API reports it.
	if fi, err := os.Stat("/run/libpod"); err == nil && fi.IsDir() {
		dirs = append(dirs, "/run/libpod")
	}
	return dirs
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// laggingInspect reports a sandbox as running for lag after its first inspection, as a
// kubelet does until its next relist.
type laggingInspect struct {
	Backend
	lag   time.Duration
	mu    sync.Mutex
	first time.Time
}

func (b *laggingInspect) Inspect(ctx context.Context, id string) (backend.Exit, error) {
	b.mu.Lock()
	if b.first.IsZero() {
		b.first = time.Now()
	}
	early := time.Since(b.first) < b.lag
	b.mu.Unlock()
	if early {
		return backend.Exit{Running: true}, nil
	}
	return b.Backend.Inspect(ctx, id)
}

// TestKilledFromOutsideLateRecord: an engine that records a sandbox's end after its
// stream ended (a kubelet between relists) gives the killed program's result, not an
// engine error for a sandbox that "still runs".
func TestKilledFromOutsideLateRecord(t *testing.T) {
	base := testLauncher(t, Options{PoolSize: -1})
	cli := enginetest.Client(t)
	l, err := New(&laggingInspect{Backend: base.be, lag: 1500 * time.Millisecond}, base.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	go func() {
		id := waitForSandbox(t, cli, l.opts.Instance)
		time.Sleep(2 * time.Second)
		_, _ = cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "KILL"})
	}()
	res, err := l.Run(t.Context(), Job{Code: "import time\nprint('started', flush=True)\ntime.sleep(60)"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 137 || !strings.Contains(res.Stderr, "sandbox was stopped before the program reported its exit") {
		t.Errorf("got exit %d, stderr %q; want 137 and the note", res.ExitCode, res.Stderr)
	}
}
