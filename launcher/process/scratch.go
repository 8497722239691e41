package process

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// newRunDir makes a fresh private directory (mode 0700) under root.
func newRunDir(root string) (string, error) {
	dir, err := os.MkdirTemp(root, "run-")
	if err != nil {
		return "", fmt.Errorf("making a run directory under %s: %w", root, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", errors.Join(fmt.Errorf("making %s private: %w", dir, err), os.Remove(dir))
	}
	return dir, nil
}

// removeTree removes path and everything below it, even what the program made
// unreadable or unwritable (it runs as the same user, so it can only have removed its
// own permissions, which the owner may restore).
func removeTree(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() || errors.Is(err, fs.ErrPermission) {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	// A directory chmodded 000 is walked only once its permissions are back: walk again.
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// wipeDir removes every entry of dir owned by uid whose path is not in keep.
func wipeDir(dir string, uid int, keep map[string]bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if keep[p] {
			continue
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil || int(st.Uid) != uid {
			continue
		}
		if err := removeTree(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// wipeIPC removes the System V shared memory segments, message queues and semaphore
// sets owned by uid: they live in the container's IPC namespace, not in any process,
// and would otherwise outlast the run that made them.
func wipeIPC(uid int) error {
	var errs []error
	for _, k := range []struct {
		file  string
		idCol int
		rm    func(id int) error
	}{
		{"/proc/sysvipc/shm", 1, func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
		{"/proc/sysvipc/msg", 1, func(id int) error { return ipcRm(unix.SYS_MSGCTL, id) }},
		{"/proc/sysvipc/sem", 1, func(id int) error { return ipcRm(unix.SYS_SEMCTL, id) }},
	} {
		ids, err := ipcIDs(k.file, k.idCol, uid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			if err := k.rm(id); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
				errs = append(errs, fmt.Errorf("removing %s id %d: %w", filepath.Base(k.file), id, err))
			}
		}
	}
	return errors.Join(errs...)
}

func ipcRm(trap uintptr, id int) error {
	if _, _, e := unix.Syscall(trap, uintptr(id), unix.IPC_RMID, 0); e != 0 {
		return e
	}
	return nil
}

// ipcIDs reads the ids of the objects of a /proc/sysvipc table owned by uid. The
// tables have a header line; the owner's uid is the column named "uid".
func ipcIDs(file string, idCol, uid int) ([]int, error) {
	f, err := os.Open(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	uidCol := -1
	var ids []int
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if uidCol < 0 {
			for i, h := range fields {
				if h == "uid" {
					uidCol = i
				}
			}
			if uidCol < 0 {
				return nil, fmt.Errorf("reading %s: no uid column", file)
			}
			continue
		}
		if len(fields) <= uidCol || len(fields) <= idCol {
			continue
		}
		u, err1 := strconv.Atoi(fields[uidCol])
		id, err2 := strconv.Atoi(fields[idCol])
		if err1 == nil && err2 == nil && u == uid {
			ids = append(ids, id)
		}
	}
	return ids, sc.Err()
}

// rebase rewrites a path under from (or from itself) to the same path under to.
func rebase(s, from, to string) string {
	if s == from {
		return to
	}
	if strings.HasPrefix(s, from+"/") {
		return to + s[len(from):]
	}
	return s
}

// rebaseEnv rewrites the values of env that are paths under from.
func rebaseEnv(env []string, from, to string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			out[i] = kv
			continue
		}
		out[i] = k + "=" + rebase(v, from, to)
	}
	return out
}

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func cutSpace(s string) (string, string, bool) { return strings.Cut(s, " ") }
