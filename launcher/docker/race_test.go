package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// errProcRace is what Podman 4.3.1 answered to a container list in CI (2026-12-03),
// as the client returns it (there with a capital E).
var errProcRace = errors.New("error response from daemon: read /proc/10001/cgroup: no such process")

// raceClient answers the first fails lists and inspects with err, then succeeds.
type raceClient struct {
	Client // calls the tests do not make panic
	err    error
	fails  int
	calls  int
}

func (c *raceClient) answer() error {
	c.calls++
	if c.calls <= c.fails {
		return c.err
	}
	return nil
}

func (c *raceClient) ContainerList(context.Context, client.ContainerListOptions) (client.ContainerListResult, error) {
	if err := c.answer(); err != nil {
		return client.ContainerListResult{}, err
	}
	return client.ContainerListResult{Items: []container.Summary{
		{ID: "a", Labels: map[string]string{backend.LabelInstance: "i"}},
		{ID: "b", Labels: map[string]string{backend.LabelInstance: "other"}},
	}}, nil
}

func (c *raceClient) ContainerInspect(context.Context, string, client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	if err := c.answer(); err != nil {
		return client.ContainerInspectResult{}, err
	}
	return client.ContainerInspectResult{Container: container.InspectResponse{
		State: &container.State{ExitCode: 3},
	}}, nil
}

func (c *raceClient) DaemonHost() string { return "unix:///fake" }

// TestListRidesOutPodmanProcRace: a list that meets Podman's /proc race is asked
// again and answers; one that keeps failing, or fails otherwise, returns its error
// after a bounded number of tries.
func TestListRidesOutPodmanProcRace(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		fails     int
		wantErr   bool
		wantCalls int
	}{
		{"race twice", errProcRace, 2, false, 3},
		{"race stays", errProcRace, 100, true, procRaceTries},
		{"other error", errors.New("error response from daemon: boom"), 100, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := &raceClient{err: tc.err, fails: tc.fails}
			b, err := New(fc, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			ids, err := b.List(t.Context(), "i")
			if (err != nil) != tc.wantErr || fc.calls != tc.wantCalls {
				t.Fatalf("got ids %q, err %v after %d calls; want error %v after %d", ids, err, fc.calls, tc.wantErr, tc.wantCalls)
			}
			if !tc.wantErr && (len(ids) != 1 || ids[0] != "a") {
				t.Fatalf("ids: got %q, want [a]", ids)
			}
		})
	}
}

// TestInspectRidesOutPodmanProcRace: the same for the exit an inspect reads.
func TestInspectRidesOutPodmanProcRace(t *testing.T) {
	fc := &raceClient{err: errProcRace, fails: 1}
	b, err := New(fc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	exit, err := b.Inspect(t.Context(), "a")
	if err != nil || exit.Code != 3 || fc.calls != 2 {
		t.Fatalf("got %+v, %v after %d calls; want code 3 after 2", exit, err, fc.calls)
	}
}

// TestProcRaceRetryEndsWithContext: a cancelled context ends the tries at once.
func TestProcRaceRetryEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n := 0
	_, err := RetryProcRace(ctx, func() (struct{}, error) { n++; return struct{}{}, errProcRace })
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("got %v after %d calls", err, n)
	}
}
