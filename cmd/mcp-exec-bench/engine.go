package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/docker"
)

// timedEngine is the Docker backend's client with every call timed, and with a gate that
// can hold container creation back (the deferred-refill diagnostic).
type timedEngine struct {
	*client.Client
	creates atomic.Int64

	mu    sync.Mutex
	times map[string][]time.Duration
	gate  chan struct{} // non-nil: ContainerCreate waits until it is closed
}

var _ docker.Client = (*timedEngine)(nil)

func newTimedEngine(cli *client.Client) *timedEngine {
	return &timedEngine{Client: cli, times: map[string][]time.Duration{}}
}

func (e *timedEngine) record(op string, t0 time.Time) {
	d := time.Since(t0)
	e.mu.Lock()
	e.times[op] = append(e.times[op], d)
	e.mu.Unlock()
}

// snapshot returns the recorded times and starts afresh.
func (e *timedEngine) snapshot() map[string][]time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.times
	e.times = map[string][]time.Duration{}
	return t
}

// hold makes container creation wait until the returned func is called (or 10 s pass).
func (e *timedEngine) hold() (release func()) {
	ch := make(chan struct{})
	e.mu.Lock()
	e.gate = ch
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		if e.gate == ch {
			e.gate = nil
		}
		e.mu.Unlock()
		close(ch)
	}
}

func (e *timedEngine) ContainerCreate(ctx context.Context, o client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	e.mu.Lock()
	g := e.gate
	e.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
	}
	e.creates.Add(1)
	defer e.record("create", time.Now())
	return e.Client.ContainerCreate(ctx, o)
}

func (e *timedEngine) ContainerAttach(ctx context.Context, id string, o client.ContainerAttachOptions) (client.ContainerAttachResult, error) {
	return timed(e, "attach", e.Client.ContainerAttach)(ctx, id, o)
}

func (e *timedEngine) ContainerStart(ctx context.Context, id string, o client.ContainerStartOptions) (client.ContainerStartResult, error) {
	return timed(e, "start", e.Client.ContainerStart)(ctx, id, o)
}

func (e *timedEngine) ContainerRemove(ctx context.Context, id string, o client.ContainerRemoveOptions) (client.ContainerRemoveResult, error) {
	return timed(e, "remove", e.Client.ContainerRemove)(ctx, id, o)
}

func (e *timedEngine) ContainerKill(ctx context.Context, id string, o client.ContainerKillOptions) (client.ContainerKillResult, error) {
	return timed(e, "kill", e.Client.ContainerKill)(ctx, id, o)
}

func (e *timedEngine) ContainerInspect(ctx context.Context, id string, o client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	return timed(e, "inspect", e.Client.ContainerInspect)(ctx, id, o)
}

// timed wraps a call on one container so that its duration is recorded as op.
func timed[O, R any](e *timedEngine, op string, call func(context.Context, string, O) (R, error)) func(context.Context, string, O) (R, error) {
	return func(ctx context.Context, id string, o O) (R, error) {
		defer e.record(op, time.Now())
		return call(ctx, id, o)
	}
}

// benchFilter selects every container the bench made.
func benchFilter() client.Filters {
	return make(client.Filters).
		Add("label", launcher.LabelRole+"="+backend.RoleSandbox).
		Add("label", launcher.LabelInstance+"="+benchLabel)
}

// reaper is a launcher of the bench's instance, used only for its reaping: Sandboxes
// lists what the bench left, Reap removes it, as the server does at start.
func reaper(cli *client.Client) (*launcher.Launcher, error) {
	be, err := docker.New(cli, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return launcher.New(be, launcher.Options{Instance: benchLabel, Logger: zerolog.Nop()})
}

// sweep removes every container labelled as the bench's (launcher.Reap), and reports
// how many.
func sweep(cli *client.Client) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := reaper(cli)
	if err != nil {
		return 0, err
	}
	defer l.Close(ctx)
	return l.Reap(ctx)
}

// leftovers counts the containers labelled as the bench's; -1 if the engine does not
// say.
func leftovers(cli *client.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := reaper(cli)
	if err != nil {
		return -1
	}
	defer l.Close(ctx)
	ids, err := l.Sandboxes(ctx)
	if err != nil {
		return -1
	}
	return len(ids)
}

// churnTimes are one create+start+wait+remove cycle's phases.
type churnTimes struct{ create, start, wait, remove time.Duration }

// churnOnce runs cmd (`true`) in a hardened container: create, wait (registered
// before start, condition next-exit), start, exit, remove.
func churnOnce(ctx context.Context, cli *client.Client, image, profile string, cmd []string) (t churnTimes, err error) {
	cfg, host := hardenedSpec(image, profile, cmd)
	t0 := time.Now()
	// As in the launcher: a create is never cancelled midway, or the container leaks.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	created, err := cli.ContainerCreate(cctx, client.ContainerCreateOptions{Config: cfg, HostConfig: host})
	cancel()
	if err != nil {
		return t, fmt.Errorf("create: %w", err)
	}
	t.create = time.Since(t0)
	defer func() {
		t1 := time.Now()
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, rerr := cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true}); rerr != nil && !docker.IsGone(rerr) {
			err = errors.Join(err, fmt.Errorf("remove: %w", rerr))
		}
		t.remove = time.Since(t1)
	}()
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	wait := cli.ContainerWait(wctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	t1 := time.Now()
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return t, fmt.Errorf("start: %w", err)
	}
	t.start = time.Since(t1)
	t2 := time.Now()
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return t, fmt.Errorf("wait: exit status %d", r.StatusCode)
		}
	case err := <-wait.Error:
		return t, fmt.Errorf("wait: %w", err)
	}
	t.wait = time.Since(t2)
	return t, nil
}

// idleUsage is the memory (MiB, without inactive page cache) and the CPU time each
// running bench container has used since it started: for an idle pool sandbox, the
// cost of getting it ready.
func idleUsage(ctx context.Context, cli *client.Client) (mem, cpu []float64, err error) {
	f := benchFilter()
	f.Add("status", "running")
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil {
		return nil, nil, err
	}
	for _, c := range list.Items {
		res, err := cli.ContainerStats(ctx, c.ID, client.ContainerStatsOptions{})
		if err != nil {
			continue
		}
		var s container.StatsResponse
		err = json.NewDecoder(res.Body).Decode(&s)
		res.Body.Close()
		if err != nil {
			continue
		}
		used := s.MemoryStats.Usage
		for _, k := range []string{"total_inactive_file", "inactive_file"} {
			if v, ok := s.MemoryStats.Stats[k]; ok && v < used {
				used -= v
				break
			}
		}
		mem = append(mem, float64(used)/float64(launcher.MiB))
		cpu = append(cpu, float64(s.CPUStats.CPUUsage.TotalUsage)/1e6)
	}
	return mem, cpu, nil
}
