package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile (p in [0,1]) of ds, or 0 when empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms formats a duration in milliseconds, with a decimal below 100 ms.
func ms(d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	v := float64(d) / float64(time.Millisecond)
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
}

// ratio formats a/b as "0.27x", or "n/a".
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	r := a / b
	if r < 0.1 {
		return strconv.FormatFloat(r, 'f', 3, 64) + "x"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "x"
}

func durRatio(a, b time.Duration) string { return ratio(float64(a), float64(b)) }

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// cpuSample is the host's cumulative busy and total jiffies (/proc/stat).
type cpuSample struct{ busy, total uint64 }

func readCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuSample{}
	}
	var s cpuSample
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return s
}

// busyPct is the share of the host's CPU time spent busy between two samples.
func busyPct(a, b cpuSample) string {
	if b.total <= a.total {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(b.busy-a.busy)/float64(b.total-a.total))
}
