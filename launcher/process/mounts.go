package process

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The wipe between runs covers the scratch root, /dev/shm, /dev/mqueue and System V IPC
// (Backend.wipe). Every run of the container shares its filesystem, so any other mount a
// program can write to carries what one run leaves there to the next: a tmpfs the
// operator added (docker run --tmpfs /var/cache), a volume, a bind from the host, or
// Kubernetes' /dev/termination-log (a 0666 file on the node's disk that the kubelet also
// copies into the pod's status). The start-up check (Lockdown.Check) refuses them.

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	Point    string
	FSType   string
	ReadOnly bool // the mount's own options or its superblock's say ro
}

// kernelFS are the kernel's own filesystems, which hold no file a program can write
// (the same list as the probe no_writable_file_outside_wipe and the bootstrap's).
var kernelFS = map[string]bool{
	"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true, "mqueue": true,
	"securityfs": true, "debugfs": true, "tracefs": true, "bpf": true, "nsfs": true,
}

// parseMountinfo reads /proc/self/mountinfo's format (proc(5)).
func parseMountinfo(b []byte) []mountEntry {
	var out []mountEntry
	for _, line := range bytes.Split(b, []byte("\n")) {
		left, right, ok := bytes.Cut(line, []byte(" - "))
		if !ok {
			continue
		}
		l, r := strings.Fields(string(left)), strings.Fields(string(right))
		if len(l) < 6 || len(r) < 3 {
			continue
		}
		has := func(opts, o string) bool {
			for _, x := range strings.Split(opts, ",") {
				if x == o {
					return true
				}
			}
			return false
		}
		out = append(out, mountEntry{Point: unescapeMount(l[4]), FSType: r[0], ReadOnly: has(l[5], "ro") || has(r[2], "ro")})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func under(p string, roots ...string) bool {
	for _, r := range roots {
		r = strings.TrimSuffix(r, "/")
		if r == "" {
			continue
		}
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// mountProbe is what mountsOutsideWipe asks of the filesystem (tests give their own).
type mountProbe struct {
	isDir    func(path string) bool
	writable func(path string) bool // by this process's user, which every run shares
	// walkDev returns the first writable directory or regular file on the /dev mount
	// itself ("" if none), skipping the mount points in skip.
	walkDev func(skip map[string]bool) string
}

// mountsOutsideWipe returns, for each read-write mount a run could write to and the wipe
// does not cover, "point (fstype): why". Left alone: read-only mounts, the kernel's
// filesystems, /proc and /sys (the runtime's masks), the wiped directories and what is
// below them, and / (the root lock's). /dev is the runtime's own tmpfs, read-write in
// every container: it counts only if a directory or regular file on it is writable (its
// submounts, such as /dev/termination-log, count on their own). A file mounted
// read-write counts if the user can write it (the kubelet's /etc/hosts, root's and 0644,
// does not); a directory mounted read-write counts whatever its mode, since the
// operator mounted it to be written (and a directory's mode inside may differ from its
// top's).
func mountsOutsideWipe(mounts []mountEntry, wiped []string, p mountProbe) []string {
	var out []string
	skip := map[string]bool{}
	for _, m := range mounts {
		skip[m.Point] = true
	}
	for _, m := range mounts {
		switch {
		case m.ReadOnly, kernelFS[m.FSType], m.Point == "/", under(m.Point, "/proc", "/sys"), under(m.Point, wiped...):
		case m.Point == "/dev":
			if w := p.walkDev(skip); w != "" {
				out = append(out, fmt.Sprintf("/dev (%s): %s is writable", m.FSType, w))
			}
		case !p.isDir(m.Point):
			if p.writable(m.Point) {
				out = append(out, fmt.Sprintf("%s (%s): a file mounted read-write that runs can write", m.Point, m.FSType))
			}
		default:
			out = append(out, fmt.Sprintf("%s (%s): a directory mounted read-write", m.Point, m.FSType))
		}
	}
	return out
}

// hostMountProbe is mountProbe on this process's own filesystem.
var hostMountProbe = mountProbe{
	isDir: func(path string) bool {
		fi, err := os.Stat(path)
		return err == nil && fi.IsDir()
	},
	writable: func(path string) bool { return unix.Access(path, unix.W_OK) == nil },
	walkDev: func(skip map[string]bool) string {
		found := ""
		_ = filepath.WalkDir("/dev", func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: nothing a run can list there either
			}
			if path != "/dev" && skip[path] {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if (d.IsDir() || d.Type().IsRegular()) && unix.Access(path, unix.W_OK) == nil {
				found = path
				return filepath.SkipAll
			}
			return nil
		})
		return found
	},
}
