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
		{"kubernetes", "root_fs_read_only", "exit code 1 (signal 0), want 0", false},
		{"process", "environment_isolated", "HOME is '/tmp/run-1431286802', want /tmp\nexit code 1 (signal 0), want 0", true},
		{"process", "environment_isolated", "HOME is '/tmp/run-1431286802', want /tmp\nMCP_EXEC_SELFTEST_CANARY_AB visible\nexit code 1 (signal 0), want 0", false},
		{"process", "environment_isolated", "exit code 1 (signal 0), want 0", false},
		{"process", "network_tcp_outside_unreachable", "tcp [2606:4700:4700::1111]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH\nexit code 1 (signal 0), want 0", true},
		{"process", "network_tcp_outside_unreachable", "tcp 1.1.1.1:53: connected\nexit code 1 (signal 0), want 0", false},
		{"process", "network_tcp_outside_unreachable", "tcp [2606:4700:4700::1111]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH; tcp [2001:4860:4860::8888]:443: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH\nexit code 1 (signal 0), want 0", true},
		{"process", "network_tcp_outside_unreachable", "tcp [2606:4700:4700::1111]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH; tcp 8.8.8.8:53: failed with ETIMEDOUT (timed out), want ENETUNREACH\nexit code 1 (signal 0), want 0", false},
		{"process", "network_udp_outside_unreachable", "udp sendto [2606:4700:4700::1111]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH; udp sendto [2001:4860:4860::8888]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH\nexit code 1 (signal 0), want 0", true},
		{"process", "tmp_not_persisted", "/tmp holds more than the bootstrap's ['.config', 'outputs'] at start: ['run-3618937163']\nexit code 1 (signal 0), want 0", true},
		{"process", "tmp_not_persisted", "/tmp holds more than the bootstrap's ['.config', 'outputs'] at start: ['run-3618937163', 'leftover']\nexit code 1 (signal 0), want 0", false},
		{"process", "daemon_not_persisted", "processes other than the bootstrap and the program: [27]\nexit code 1 (signal 0), want 0", true},
		{"process", "daemon_not_persisted", "processes other than the bootstrap and the program: [27, 40]\nexit code 1 (signal 0), want 0", false},
		{"process", "seccomp_denies_dangerous_syscalls", "io_uring_setup(1, params) returned 3, want EPERM\nexit code 1 (signal 0), want 0", false},
	}
	for _, tt := range tests {
		if got := knownDifference(tt.backend, tt.probe, errors.New(tt.err)); got != tt.want {
			t.Errorf("knownDifference(%s, %s, %q): got %v, want %v", tt.backend, tt.probe, tt.err, got, tt.want)
		}
	}
}
