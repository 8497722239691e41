package process

import (
	"os"
	"strings"
	"testing"
)

// TestSwapCheck feeds the swap lock the files of each case: swap beyond the memory
// limit is a missing lock only when the host has swap; with none it is a note.
func TestSwapCheck(t *testing.T) {
	const noSwap, swap = "MemTotal: 24000000 kB\nSwapTotal:       0 kB\n", "MemTotal: 24000000 kB\nSwapTotal:  2097148 kB\n"
	v1 := func(mem, memsw, info string) map[string]string {
		m := map[string]string{memV1: mem + "\n", meminfo: info}
		if memsw != "" {
			m[memswV1] = memsw + "\n"
		}
		return m
	}
	v2 := func(swapMax, info string) map[string]string {
		return map[string]string{swapMaxV2: swapMax + "\n", meminfo: info}
	}
	for _, tc := range []struct {
		name          string
		files         map[string]string
		missing, note string // substrings; "" means empty
	}{
		{"v1 memsw twice the limit, host swap", v1("268435456", "536870912", swap), "memory.memsw.limit_in_bytes is 536870912, more than memory.limit_in_bytes 268435456, and the host has 2097148 kB of swap", ""},
		{"v1 memsw twice the limit, no host swap", v1("268435456", "536870912", noSwap), "", "but the host has no swap (SwapTotal 0 kB"},
		{"v1 memsw equal, host swap", v1("268435456", "268435456", swap), "", ""},
		{"v1 memsw equal, no host swap", v1("268435456", "268435456", noSwap), "", ""},
		{"v1 no swap accounting, host swap", v1("268435456", "", swap), "", "swap accounting off"},
		{"v1 no swap accounting, no host swap", v1("268435456", "", noSwap), "", ""},
		{"v1 memsw twice, meminfo unreadable", map[string]string{memV1: "1", memswV1: "2"}, "the host's swap is unknown", ""},
		{"v2 swap.max max, host swap", v2("max", swap), "memory.swap.max is max, want 0, and the host has 2097148 kB", ""},
		{"v2 swap.max 268435456, host swap", v2("268435456", swap), "memory.swap.max is 268435456", ""},
		{"v2 swap.max max, no host swap", v2("max", noSwap), "", "memory.swap.max is max, want 0, but the host has no swap"},
		{"v2 swap.max 0, host swap", v2("0", swap), "", ""},
		{"no memory cgroup", map[string]string{meminfo: swap}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(p string) ([]byte, error) {
				if v, ok := tc.files[p]; ok {
					return []byte(v), nil
				}
				return nil, os.ErrNotExist
			}
			missing, note := swapCheck(read)
			if (tc.missing == "") != (missing == "") || !strings.Contains(missing, tc.missing) {
				t.Errorf("missing: got %q, want %q", missing, tc.missing)
			}
			if (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("note: got %q, want %q", note, tc.note)
			}
		})
	}
}
