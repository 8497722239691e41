package process

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The mount lock (issue 20, item 7): a read-only root is not enough when the
// container has writable mounts besides /tmp and /dev/shm (which the wipe covers):
// a volume, a writable bind, Kubernetes' /dev/termination-log (a 0666 file on the
// node's disk, copied into the pod's status by the kubelet). What run N writes there,
// run N+1 would read. The start-up check reads /proc/self/mountinfo and, for each
// mount that is read-write and not a kernel view (proc, sysfs, cgroup, devpts,
// mqueue):
//
//   - /tmp and /dev/shm pass: the wipe covers them;
//   - a regular file the server's user can write that is empty at start (Kubernetes'
//     /dev/termination-log) is covered: the wipe truncates it (truncateCovered), and
//     the start-up log names it. One that holds data is refused: truncating an
//     operator's file would destroy it, and leaving it would let runs pass data on;
//   - any other mount is refused if the server's user can write anything in it (the
//     mount point, or a file or directory below it, looked for in a bounded walk:
//     mountWalkMax entries, mountWalkTime; one too large to walk is refused too).
//     A mount the user cannot write (Docker's /etc/hosts, /etc/hostname and
//     /etc/resolv.conf: root's, mode 0644) passes.

const (
	mountWalkMax  = 20000
	mountWalkTime = 2 * time.Second
)

// kernelViewFS are filesystem types whose files hold no data a run could leave:
// per-process or per-namespace views of the kernel (mqueue: a run has
// RLIMIT_MSGQUEUE 0, and the wipe empties /dev/mqueue anyway).
var kernelViewFS = map[string]bool{
	"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true,
	"mqueue": true, "securityfs": true, "debugfs": true, "tracefs": true, "bpf": true,
	"fusectl": true, "configfs": true, "pstore": true, "binfmt_misc": true, "nsfs": true,
}

// wipedMounts are covered by the wipe.
var wipedMounts = map[string]bool{"/tmp": true, "/dev/shm": true}

type mountInfo struct {
	point, fstype string
	rw            bool
}

// readMountinfo parses mountinfo (proc(5)): field 5 is the mount point (octal
// escapes), field 6 its options; after the " - " separator come the type, the source
// and the superblock options.
func readMountinfo(path string) ([]mountInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 6 || len(b) < 1 {
			return nil, fmt.Errorf("%s: unexpected line %q", path, sc.Text())
		}
		opts := strings.Split(a[5], ",")
		out = append(out, mountInfo{point: unescapeMount(a[4]), fstype: b[0], rw: opts[0] == "rw"})
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// checkMounts returns the refused mounts (one sentence each) and the covered files.
func checkMounts(mounts []mountInfo) (refused, covered []string) {
	for _, m := range mounts {
		if !m.rw || kernelViewFS[m.fstype] || wipedMounts[m.point] {
			continue
		}
		if why := writableIn(m.point); why != "" {
			if why == "covered" {
				covered = append(covered, m.point)
				continue
			}
			refused = append(refused, fmt.Sprintf("%s (%s, read-write): %s", m.point, m.fstype, why))
		}
	}
	return refused, covered
}

func canWrite(path string) bool { return unix.Access(path, unix.W_OK) == nil }

// writableIn says why the server's user could leave data in the mount at point, or
// "covered" for an empty writable regular file, or "" when it cannot.
func writableIn(point string) string {
	st, err := os.Lstat(point)
	if err != nil {
		return "" // hidden under another mount or out of reach: nothing to write
	}
	if st.Mode().IsRegular() {
		if !canWrite(point) {
			return ""
		}
		if st.Size() == 0 {
			return "covered"
		}
		return fmt.Sprintf("a file of %d bytes the server's user can write", st.Size())
	}
	if !st.IsDir() {
		return ""
	}
	var dev uint64
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		dev = uint64(s.Dev)
	}
	deadline := time.Now().Add(mountWalkTime)
	n := 0
	var found string
	errStop := errors.New("stop")
	err = filepath.WalkDir(point, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fs.SkipDir // unreadable: nothing the user can reach below
		}
		n++
		if n > mountWalkMax || time.Now().After(deadline) {
			found = fmt.Sprintf("more than %d entries or %s to check; mount it read-only", mountWalkMax, mountWalkTime)
			return errStop
		}
		t := d.Type()
		if !(t.IsDir() || t.IsRegular()) {
			return nil // devices, sockets, fifos, links: hold no data
		}
		if t.IsDir() && p != point {
			if info, err := d.Info(); err == nil {
				if s, ok := info.Sys().(*syscall.Stat_t); ok && uint64(s.Dev) != dev {
					return fs.SkipDir // another mount: checked on its own
				}
			}
		}
		if canWrite(p) {
			what := "the file"
			if t.IsDir() {
				what = "the directory"
			}
			found = what + " " + p + " is writable by the server's user"
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return "walking it: " + err.Error()
	}
	return found
}

// covered are the writable file mounts the start-up check accepted, truncated by
// every wipe.
var covered struct {
	sync.Mutex
	files []string
}

func setCovered(files []string) {
	covered.Lock()
	covered.files = append([]string(nil), files...)
	covered.Unlock()
}

// truncateCovered empties the file mounts the start-up check accepted as covered
// (none unless it ran): the wipe calls it with the other wipes.
func truncateCovered() error {
	covered.Lock()
	defer covered.Unlock()
	var errs []error
	for _, f := range covered.files {
		if err := os.Truncate(f, 0); err != nil {
			errs = append(errs, fmt.Errorf("truncating %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}
