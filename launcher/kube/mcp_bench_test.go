package kube

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/mcpserver"
)

// mcpStack connects an MCP client to an mcpserver on l over in-memory transports: the whole
// path a call takes, minus the transport's bytes.
func mcpStack(b *testing.B, l *launcher.Launcher) *mcp.ClientSession {
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(l, mcpserver.Options{Name: "bench"}).Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func callPrint(b *testing.B, cs *mcp.ClientSession) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "print(1)"}})
	if err != nil || res.IsError {
		b.Fatalf("exec: %v %+v", err, res)
	}
}

func benchLauncher(b *testing.B, be launcher.Backend, pool int) *launcher.Launcher {
	l, err := launcher.New(be, launcher.Options{Image: testImage, Instance: "kube-bench", PoolSize: pool, MaxConcurrent: 2, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Reap(context.Background()); err != nil {
		b.Fatal(err)
	}
	l.StartPool()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = l.Close(ctx)
	})
	return l
}

// waitPool waits, off the clock, until the pool is full again.
func waitPool(b *testing.B, l *launcher.Launcher) {
	b.StopTimer()
	defer b.StartTimer()
	for i := 0; i < 1200 && l.PoolStats().Idle < l.PoolStats().Size; i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkLiveMCP: print(1) through the MCP layer on the Kubernetes backend, cold (a pod per
// call, started for it) and warm (a pod from the pool, refilled between calls), the pool's
// sustained rate (back to back, 2 at a time), and, as the baseline of the same run, warm on
// the Docker backend of the shared engine.
//
//	MCP_EXEC_TEST_KUBECONFIG=... go test -run '^$' -bench LiveMCP -benchtime 10x ./launcher/kube
func BenchmarkLiveMCP(b *testing.B) {
	cfg := adminConfig(b)
	applyBase(b, cfg)
	kbe, _ := newLiveBackend(b, cfg, Options{})
	b.Run("kube-cold", func(b *testing.B) {
		cs := mcpStack(b, benchLauncher(b, kbe, 0))
		for b.Loop() {
			callPrint(b, cs)
		}
	})
	b.Run("kube-warm", func(b *testing.B) {
		l := benchLauncher(b, kbe, 2)
		cs := mcpStack(b, l)
		for b.Loop() {
			waitPool(b, l)
			callPrint(b, cs)
		}
	})
	b.Run("kube-pool-sustained", func(b *testing.B) {
		cbe := &countingBackend{Backend: kbe}
		l := benchLauncher(b, cbe, 2)
		cs := mcpStack(b, l)
		waitPool(b, l)
		b.SetParallelism(1) // GOMAXPROCS(2) x 1 = 2 callers, MaxConcurrent 2
		created := cbe.creates.Load()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				callPrint(b, cs)
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		// pods created per call while the callers ran: 1 when no pod is wasted (a cold start
		// that lost the race to a pooled pod and found the pool full is removed unused)
		b.ReportMetric(float64(cbe.creates.Load()-created)/float64(b.N), "creates/call")
	})
	b.Run("docker-warm", func(b *testing.B) {
		cli, err := engine.NewClient("")
		if err != nil {
			b.Fatal(err)
		}
		defer cli.Close()
		dbe, err := docker.New(cli, zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		l := benchLauncher(b, dbe, 2)
		cs := mcpStack(b, l)
		for b.Loop() {
			waitPool(b, l)
			callPrint(b, cs)
		}
	})
}

// countingBackend counts the pods a launcher creates.
type countingBackend struct {
	launcher.Backend
	creates atomic.Int64
}

func (c *countingBackend) Create(ctx context.Context, spec backend.Spec) (string, error) {
	c.creates.Add(1)
	return c.Backend.Create(ctx, spec)
}
