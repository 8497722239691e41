package main

import (
	"errors"
	"testing"
)

func TestKnownDifference(t *testing.T) {
	tmp := "/tmp lacks noexec: rw,relatime\nexec ELF copy in /tmp: succeeded (CompletedProcess(...))\nexit code 1 (signal 0), want 0"
	tests := []struct {
		backend, probe, err string
		want                bool
	}{
		{"kubernetes", "tmp_private_noexec_capped", tmp, true},
		{"kubernetes", "tmp_private_noexec_capped", tmp + "\n/tmp is not a tmpfs", false},
		{"kubernetes", "root_fs_read_only", "writable mounts: ['/etc/hosts']\nexit code 1 (signal 0), want 0", true},
		{"kubernetes", "root_fs_read_only", "writable mounts: ['/etc/hosts', '/usr']\nexit code 1 (signal 0), want 0", false},
		{"kubernetes", "network_only_loopback", "eth0 present", false},
		{"docker", "tmp_private_noexec_capped", tmp, false},
	}
	for _, tt := range tests {
		if got := knownDifference(tt.backend, tt.probe, errors.New(tt.err)); got != tt.want {
			t.Errorf("knownDifference(%s, %s, %q): got %v, want %v", tt.backend, tt.probe, tt.err, got, tt.want)
		}
	}
}
