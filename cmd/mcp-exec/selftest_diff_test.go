package main

import (
	"errors"
	"testing"
)

func TestKnownDifference(t *testing.T) {
	const exit1 = "\nexit code 1 (signal 0), want 0"
	// the probe's one line of complaints on the Kubernetes test cluster (runc), as printed
	tmp := "/tmp lacks noexec: rw,nosuid,nodev,relatime; /tmp lacks nosuid: rw,relatime; " +
		"exec shebang script in /tmp: succeeded (CompletedProcess(args=['/tmp/mcpexecprobed83d0774c026.sh'], returncode=0, stdout=b'escaped\\n', stderr=b'')), want EACCES/EPERM; " +
		"exec ELF copy in /tmp: succeeded (CompletedProcess(args=['/tmp/mcpexecprobed83d0774c026.true'], returncode=0)), want EACCES/EPERM; " +
		"mmap PROT_EXEC of a file in /tmp: succeeded (<mmap.mmap closed=False, access=ACCESS_READ, length=43432, pos=0, offset=0>), want EPERM/EACCES; " +
		"/dev/shm lacks noexec: rw,nodev"
	// under gVisor, two complaints more
	tmpGVisor := "/tmp is 9p, want tmpfs; " + tmp + "; /dev/shm is 12638248960 bytes, want 67108864"
	v6 := "tcp [2606:4700:4700::1111]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH"
	tests := []struct {
		backend string
		gvisor  bool
		probe   string
		err     string
		want    bool
	}{
		{"kubernetes", false, "tmp_private_noexec_capped", tmp + exit1, true},
		{"kubernetes", false, "tmp_private_noexec_capped", "/tmp lacks noexec: rw,relatime\nexec ELF copy in /tmp: succeeded (CompletedProcess(args=['/tmp/x'], returncode=0)), want EACCES/EPERM" + exit1, true},
		// an unexpected complaint anywhere on the line fails the probe, also after an expected one
		{"kubernetes", false, "tmp_private_noexec_capped", tmp + "; /tmp is not a tmpfs" + exit1, false},
		{"kubernetes", false, "tmp_private_noexec_capped", "/tmp lacks noexec: rw; wrote 80000000 bytes to /tmp, more than its 67108864" + exit1, false},
		{"kubernetes", false, "tmp_private_noexec_capped", "/tmp lacks noexec: rw; filling /tmp failed with EIO, want ENOSPC" + exit1, false},
		{"kubernetes", false, "tmp_private_noexec_capped", "/tmp lacks noexec: rw,relatime and more" + exit1, false},
		{"kubernetes", false, "tmp_private_noexec_capped", "exec ELF copy in /tmp: failed with ENOENT (x), want EACCES/EPERM" + exit1, false},
		{"kubernetes", false, "tmp_private_noexec_capped", "/tmp lacks rw: nodev" + exit1, false},
		{"kubernetes", false, "tmp_private_noexec_capped", "/tmp is 9p, want tmpfs; " + tmp + exit1, false},
		{"kubernetes", true, "tmp_private_noexec_capped", tmpGVisor + exit1, true},
		{"kubernetes", true, "tmp_private_noexec_capped", tmpGVisor + "; /tmp took 90000000 bytes, want about 67108864" + exit1, false},
		{"kubernetes", true, "tmp_private_noexec_capped", "/tmp is overlay, want tmpfs; " + tmp + exit1, false},
		{"kubernetes", true, "tmp_private_noexec_capped", "/tmp is 12638248960 bytes, want 67108864; " + tmp + exit1, false},
		{"kubernetes", true, "root_fs_read_only", "writable mounts: ['/etc/hosts', '/root/termination-log']" + exit1, true},
		{"docker", true, "tmp_private_noexec_capped", tmpGVisor + exit1, false},
		{"kubernetes", false, "root_fs_read_only", "writable mounts: ['/etc/hosts', '/root/termination-log']" + exit1, true},
		// at the old /dev/termination-log the probe did not name it; here it is no difference
		{"kubernetes", false, "root_fs_read_only", "writable mounts: ['/etc/hosts']" + exit1, false},
		{"kubernetes", false, "no_writable_file_outside_wipe", "writable files outside the wipe: ['/dev/termination-log']" + exit1, false},
		{"kubernetes", false, "root_fs_read_only", "writable mounts: ['/etc/hosts', '/usr']" + exit1, false},
		{"kubernetes", false, "root_fs_read_only", "writable mounts: ['/etc/hosts']; / is writable" + exit1, false},
		{"kubernetes", false, "network_only_loopback", "eth0 present", false},
		{"docker", false, "tmp_private_noexec_capped", tmp + exit1, false},
		{"kubernetes", false, "root_fs_read_only", "exit code 1 (signal 0), want 0", false},
		{"kubernetes", false, "root_fs_read_only", "writable mounts: ['/etc/hosts']\nexit code 137 (signal 9), want 0", false},
		{"process", false, "environment_isolated", "HOME is '/tmp/run-1431286802', want /tmp" + exit1, true},
		{"process", false, "environment_isolated", "HOME is '/tmp/run-1431286802', want /tmp; MCP_EXEC_SELFTEST_CANARY_AB visible" + exit1, false},
		{"process", false, "environment_isolated", "HOME is '/tmp/run-1431286802', want /tmp\nMCP_EXEC_SELFTEST_CANARY_AB visible" + exit1, false},
		{"process", false, "environment_isolated", "exit code 1 (signal 0), want 0", false},
		{"process", false, "network_tcp_outside_unreachable", v6 + exit1, true},
		{"process", false, "network_tcp_outside_unreachable", "tcp 1.1.1.1:53: connected" + exit1, false},
		{"process", false, "network_tcp_outside_unreachable", v6 + "; tcp [2001:4860:4860::8888]:443: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH" + exit1, true},
		{"process", false, "network_tcp_outside_unreachable", v6 + "; tcp 8.8.8.8:53: failed with ETIMEDOUT (timed out), want ENETUNREACH" + exit1, false},
		{"process", false, "network_udp_outside_unreachable", "udp sendto [2606:4700:4700::1111]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH; udp sendto [2001:4860:4860::8888]:53: failed with EADDRNOTAVAIL ([Errno 99] Cannot assign requested address), want ENETUNREACH" + exit1, true},
		{"process", false, "tmp_not_persisted", "/tmp holds more than the bootstrap's ['.config', 'outputs'] at start: ['run-3618937163']" + exit1, true},
		{"process", false, "tmp_not_persisted", "/tmp holds more than the bootstrap's ['.config', 'outputs'] at start: ['run-3618937163', 'leftover']" + exit1, false},
		{"process", false, "daemon_not_persisted", "processes other than the bootstrap and the program: [27]" + exit1, true},
		{"process", false, "daemon_not_persisted", "processes other than the bootstrap and the program: [27, 40]" + exit1, false},
		{"process", false, "daemon_not_persisted", "processes other than the bootstrap and the program: [27]; sleep 1000 still running" + exit1, false},
		{"process", false, "seccomp_denies_dangerous_syscalls", "io_uring_setup(1, params) returned 3, want EPERM" + exit1, false},
	}
	for _, tt := range tests {
		if got := knownDifference(tt.backend, tt.gvisor, tt.probe, errors.New(tt.err)); got != tt.want {
			t.Errorf("knownDifference(%s, gvisor %v, %s, %q): got %v, want %v", tt.backend, tt.gvisor, tt.probe, tt.err, got, tt.want)
		}
	}
}
