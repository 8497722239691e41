package main

import (
	"sync"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/probe"
)

// TestRunProbesExclusiveAlone: an Exclusive probe runs once every other probe (and
// the limits check) has ended, and nothing runs beside it; the rest run at most
// parallel at a time, and every probe runs once.
func TestRunProbesExclusiveAlone(t *testing.T) {
	probes := []probe.Probe{{Name: "a"}, {Name: "x", Exclusive: true}, {Name: "b"}, {Name: "c"}, {Name: "y", Exclusive: true}, {Name: "d"}}
	var mu sync.Mutex
	running, most := 0, 0
	ran := map[string]int{}
	enter := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		ran[name]++
		running++
		most = max(most, running)
	}
	leave := func(name string, exclusive bool) {
		mu.Lock()
		defer mu.Unlock()
		if exclusive && running != 1 {
			t.Errorf("%s ran beside %d others", name, running-1)
		}
		running--
	}
	work := func(name string, exclusive bool) {
		enter(name)
		time.Sleep(20 * time.Millisecond) // long enough that overlaps happen
		leave(name, exclusive)
	}
	runProbes(probes, 2, func() { work("limits", false) }, func(i int, pr probe.Probe) {
		if probes[i].Name != pr.Name {
			t.Errorf("index %d is %s, got %s", i, probes[i].Name, pr.Name)
		}
		work(pr.Name, pr.Exclusive)
	})
	for _, n := range []string{"limits", "a", "b", "c", "d", "x", "y"} {
		if ran[n] != 1 {
			t.Errorf("%s ran %d times, want 1", n, ran[n])
		}
	}
	if most > 3 { // the limits check beside 2 probes
		t.Errorf("%d ran at once, want at most 3", most)
	}
}

// TestCPUProbesExclusive: the probe whose evidence is its sandbox's CPU share from
// the host is marked to run alone.
func TestCPUProbesExclusive(t *testing.T) {
	found := false
	for _, pr := range probe.All(probe.Params{CPUs: 1}) {
		if pr.Name == "cpu_quota_host" {
			found = true
			if !pr.Exclusive {
				t.Error("cpu_quota_host is not Exclusive")
			}
		}
	}
	if !found {
		t.Error("no probe cpu_quota_host")
	}
}
