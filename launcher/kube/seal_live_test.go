package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// envNodeState names the test cluster's state directory (scripts/k8s/env.sh's KSTATE: the
// kubelet's podLogsDir is its podlogs, and containerd's root and state are under it). Unset,
// it is the directory above the admin kubeconfig's, where up.sh writes it.
const envNodeState = "MCP_EXEC_TEST_KSTATE"

func nodeState(t *testing.T) string {
	t.Helper()
	dir, set := os.LookupEnv(envNodeState)
	if !set {
		dir = filepath.Dir(filepath.Dir(os.Getenv(envKubeconfig)))
	}
	if st, err := os.Stat(filepath.Join(dir, "podlogs")); err != nil || !st.IsDir() {
		if set || os.Getenv("CI") == "true" {
			t.Fatalf("no test cluster state at %q (%s): %v", dir, envNodeState, err)
		}
		t.Skipf("no test cluster state at %q: set %s to the cluster's KSTATE", dir, envNodeState)
	}
	return dir
}

// filesHolding walks root (not into other file systems: the pods' memory-backed emptyDirs and
// the containers' overlay views of snapshots that are searched where they lie) and returns
// the regular files that hold any of needles.
func filesHolding(t *testing.T, root string, needles ...string) (found []string, searched int64) {
	t.Helper()
	rst, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0
		}
		t.Fatal(err)
	}
	dev := rst.Sys().(*syscall.Stat_t).Dev
	keep := 0
	for _, n := range needles {
		keep = max(keep, len(n)-1)
	}
	buf := make([]byte, 1<<20+keep)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // gone while we walked (a pod's cleanup)
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil //nolint:nilerr // gone while we walked
		}
		if d.IsDir() {
			if info.Sys().(*syscall.Stat_t).Dev != dev {
				return filepath.SkipDir
			}
			return nil
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil //nolint:nilerr // gone while we walked
		}
		defer f.Close()
		carry := 0
		for {
			n, err := f.Read(buf[carry:])
			searched += int64(n)
			window := buf[:carry+n]
			for _, needle := range needles {
				if bytes.Contains(window, []byte(needle)) {
					found = append(found, path)
					return nil
				}
			}
			if err == io.EOF || n == 0 && err != nil {
				return nil
			}
			carry = min(keep, len(window))
			copy(buf, window[len(window)-carry:])
		}
	})
	if err != nil {
		t.Fatalf("searching %s: %v", root, err)
	}
	return found, searched
}

// TestLiveOutputNotOnNode runs the real bootstrap in a pod: a program that prints a random
// marker and leaves a file with another in the outputs directory. Both come back through the
// attach; then, with the pod still there (its container log is removed with it), neither
// marker is in any file of the node's disk state (the podLogsDir, /var/log/containers and
// /var/log/pods, containerd's root and state, the kubelet's, etcd's), while the pod's container
// log exists and holds at least as many bytes as its output: the output went to the log,
// sealed.
func TestLiveOutputNotOnNode(t *testing.T) {
	b, _ := liveBackend(t, Options{})
	state := nodeState(t)
	rnd := make([]byte, 16)
	_, _ = rand.Read(rnd)
	// Markers made by the program, not literals of its code: what is searched for is output.
	seed := hex.EncodeToString(rnd)
	marker, fileMarker := "mcp-exec-out-"+strings.ToUpper(seed), "mcp-exec-file-"+strings.ToUpper(seed)
	code := fmt.Sprintf(`import os
s = %q.upper()
print("mcp-exec-out-" + s)
os.makedirs(%q, exist_ok=True)
open(%q + "/m.txt", "w").write("mcp-exec-file-" + s)
`, seed, launcher.OutputDir, launcher.OutputDir)
	spec := launcher.SpecOf(launcher.Options{Image: testImage, Instance: testInstance(t)})
	ctx := t.Context()
	id, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), id) })
	var out, errb launchertest.Buffer
	c, err := b.Start(ctx, id, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "MCPEXEC2 %d 0\n%s", len(code), code); err != nil {
		t.Fatal(err)
	}
	_ = c.CloseWrite()
	select {
	case <-c.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the pod's streams did not end in 60 s")
	}
	fr := frames(t, []byte(out.String()))
	if !strings.Contains(string(fr['O']), marker+"\n") || !bytes.Contains(fr['D'], []byte(fileMarker)) || len(fr['X']) == 0 {
		t.Fatalf("the output did not come back: frames %q (stderr %q)", fr, errb.String())
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		exit, err := b.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !exit.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod's container still runs 30 s after its streams ended")
		}
		time.Sleep(100 * time.Millisecond)
	}

	logs, _ := filepath.Glob(filepath.Join(state, "podlogs", sandboxNamespace+"_"+id+"_*", containerName, "*.log"))
	var logged int64
	for _, l := range logs {
		if st, err := os.Stat(l); err == nil {
			logged += st.Size()
		}
	}
	if len(logs) == 0 || logged < int64(len(out.String())) {
		t.Fatalf("the pod's container log: got %v, %d bytes; want at least the %d bytes of its output (else the search proves nothing)",
			logs, logged, len(out.String()))
	}
	started := time.Now()
	var found []string
	var searched int64
	for _, root := range []string{state, "/var/log/containers", "/var/log/pods"} {
		f, n := filesHolding(t, root, marker, fileMarker)
		found, searched = append(found, f...), searched+n
	}
	t.Logf("searched %d MiB of the node's state in %v; the pod's log holds %d bytes", searched>>20, time.Since(started).Round(time.Millisecond), logged)
	if len(found) > 0 {
		t.Errorf("caller output is on the node's disk, in %v", found)
	}
}
