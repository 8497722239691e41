package kube

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest"
)

// churnOnce is one raw pod's whole life through the backend: create, wait for it to run,
// attach, send stdin, read its output to the end, delete. It is the cluster's own cost per
// sandbox, the baseline for the pool's refill rate.
func churnOnce(b testing.TB, be *Backend, spec backend.Spec) (running time.Duration) {
	ctx := context.Background()
	s := time.Now()
	id, err := be.Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Remove(ctx, id)
	var out launchertest.Buffer
	c, err := be.Start(ctx, id, &out, &out)
	if err != nil {
		b.Fatal(err)
	}
	running = time.Since(s)
	defer c.Close()
	_, _ = c.Write([]byte("x"))
	_ = c.CloseWrite()
	<-c.Done()
	if out.String() != "X" {
		b.Fatalf("output: got %q, want X", out.String())
	}
	return running
}

// BenchmarkLivePodChurn measures raw pod churn on the test cluster, sequential and with 2
// workers (as many as the pool benchmark's callers): `go test -run '^$' -bench LivePodChurn ./launcher/kube` with MCP_EXEC_TEST_KUBECONFIG.
func BenchmarkLivePodChurn(b *testing.B) {
	cfg := adminConfig(b)
	applyBase(b, cfg)
	be, _ := newLiveBackend(b, cfg, Options{})
	spec := testSpec()
	spec.Command = []string{"python3", "-I", "-c", sealed("import sys; print(sys.stdin.read().upper(), end='')")}
	spec.Labels[backend.LabelInstance] = "kube-bench"
	b.Run("sequential", func(b *testing.B) {
		var run time.Duration
		n := 0
		for b.Loop() {
			run += churnOnce(b, be, spec)
			n++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pods/s")
		b.ReportMetric(float64(run.Milliseconds())/float64(n), "ms-to-running")
	})
	b.Run("workers2", func(b *testing.B) {
		b.SetParallelism(1) // x GOMAXPROCS, 2 here: run with -cpu 2
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				churnOnce(b, be, spec)
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pods/s")
	})
}
