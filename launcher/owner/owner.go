// Package owner names the server process that made a sandbox, in a form another
// server on the same engine can check for liveness, and judges from /proc whether the
// process so named is gone.
//
// An ID is the host's name (hashed), the kernel's boot id, the server's PID namespace
// (the inode of /proc/self/ns/pid), its pid and its start time (field 22 of
// /proc/self/stat, in clock ticks since boot). Within one boot and one PID namespace,
// a pid and a start time name one process for ever: a pid reused by a later process
// has a later start time. So a server whose own boot and namespace match an ID's can
// prove that ID's process gone (its /proc entry is absent, or holds another start
// time), and a server on the same host after a reboot can too (a new boot id: no
// process of the old boot lives). Every other server cannot judge: a process in
// another PID namespace (a server in a container) is invisible to it, and so is a
// process on another machine. Judge says Unknown then, never Gone: a sandbox must not
// be removed on a guess, since its owner may be running a program in it.
//
// It imports only the standard library and reads nothing but the server's own
// /proc entries and those of the pids it is asked about.
package owner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ID names one server process. Its String is a label value (at most 63 characters
// of [0-9a-f.], as Kubernetes also allows).
type ID struct {
	Host  string // the first 8 hex digits of the SHA-256 of the host's name
	Boot  string // the first 16 hex digits of the kernel's boot id
	PidNS uint64 // inode of the PID namespace
	Pid   int    // pid in that namespace
	Start uint64 // start time, clock ticks after boot
}

func (o ID) String() string {
	return fmt.Sprintf("%s.%s.%d.%d.%d", o.Host, o.Boot, o.PidNS, o.Pid, o.Start)
}

// IsZero reports whether o names no process.
func (o ID) IsZero() bool { return o == ID{} }

// Parse reads an ID from its String.
func Parse(s string) (ID, error) {
	f := strings.Split(s, ".")
	if len(f) != 5 || len(f[0]) != 8 || len(f[1]) != 16 || !isHex(f[0]) || !isHex(f[1]) {
		return ID{}, fmt.Errorf("owner %q: want host.boot.pidns.pid.start", s)
	}
	ns, err1 := strconv.ParseUint(f[2], 10, 64)
	pid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || pid <= 0 {
		return ID{}, fmt.Errorf("owner %q: want host.boot.pidns.pid.start", s)
	}
	return ID{Host: f[0], Boot: f[1], PidNS: ns, Pid: pid, Start: start}, nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// HostHash is the Host of an ID on a host named name.
func HostHash(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:4])
}

// Proc reads process facts from a /proc file system.
type Proc struct {
	Root string // "" is /proc
	// Signal0 sends signal 0 to pid, to tell a process that /proc hides (hidepid)
	// from one that does not exist; nil is syscall.Kill.
	Signal0 func(pid int) error
}

func (p Proc) path(elem ...string) string {
	root := p.Root
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// Self returns the ID of the process reading p (its "self" entry), on a host named
// host.
func (p Proc) Self(host string) (ID, error) {
	boot, err := os.ReadFile(p.path("sys", "kernel", "random", "boot_id"))
	if err != nil {
		return ID{}, fmt.Errorf("reading the boot id: %w", err)
	}
	b := strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", "")
	if len(b) < 16 || !isHex(b[:16]) {
		return ID{}, fmt.Errorf("reading the boot id: %q is not one", boot)
	}
	ns, err := os.Readlink(p.path("self", "ns", "pid"))
	if err != nil {
		return ID{}, fmt.Errorf("reading the pid namespace: %w", err)
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]"), 10, 64)
	if err != nil {
		return ID{}, fmt.Errorf("reading the pid namespace: %q", ns)
	}
	// The pid as this /proc numbers it: the numbering another server reading it sees.
	self, err := os.Readlink(p.path("self"))
	if err != nil {
		return ID{}, fmt.Errorf("reading /proc/self: %w", err)
	}
	pid, err := strconv.Atoi(self)
	if err != nil || pid <= 0 {
		return ID{}, fmt.Errorf("reading /proc/self: %q is no pid", self)
	}
	start, err := p.start(pid)
	if err != nil {
		return ID{}, err
	}
	return ID{Host: HostHash(host), Boot: b[:16], PidNS: ino, Pid: pid, Start: start}, nil
}

// start reads the start time of pid (field 22 of its stat; the command's name, field
// 2, is in parentheses and may hold spaces and parentheses itself).
func (p Proc) start(pid int) (uint64, error) {
	stat, err := os.ReadFile(p.path(strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("reading the stat of pid %d: no command name", pid)
	}
	f := strings.Fields(s[i+1:]) // fields 3 and on
	if len(f) < 20 {
		return 0, fmt.Errorf("reading the stat of pid %d: %d fields", pid, len(f)+2)
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading the stat of pid %d: %w", pid, err)
	}
	return v, nil
}

// Container returns the engine's id of the container the reader of p runs in, as
// its /etc/hostname mount shows it (Docker: /var/lib/docker/containers/ID/hostname;
// Podman: .../overlay-containers/ID/userdata/hostname), or "" outside a container or
// when the mount does not show one. A peer that cannot see this process (another PID
// namespace) may ask the engine whether that container has stopped or restarted since.
func (p Proc) Container() string {
	b, err := os.ReadFile(p.path("self", "mountinfo"))
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != "/etc/hostname" {
			continue
		}
		for _, c := range strings.Split(f[3], "/") {
			if len(c) == 64 && isHex(c) {
				return c
			}
		}
	}
	return ""
}

// Verdict is what a server can tell about another ID's process.
type Verdict int

const (
	Unknown Verdict = iota // it cannot tell: leave its sandboxes
	Self                   // the ID is the judge's own
	Alive                  // the process runs
	Gone                   // the process has ended: its sandboxes are leftovers
)

func (v Verdict) String() string {
	return [...]string{"unknown", "self", "alive", "gone"}[v]
}

// Judge tells what self, reading p, can prove about o's process.
func (p Proc) Judge(self, o ID) Verdict {
	switch {
	case o == self:
		return Self
	case o.Host != self.Host:
		return Unknown // another machine, as far as it can tell
	case o.Boot != self.Boot:
		return Gone // this host rebooted since: no process of that boot lives
	case o.PidNS != self.PidNS:
		return Unknown // its /proc entry is not ours to see
	}
	start, err := p.start(o.Pid)
	switch {
	case err == nil && start == o.Start:
		return Alive
	case err == nil:
		return Gone // the pid was reused by a later process
	case !errors.Is(err, os.ErrNotExist):
		return Unknown
	}
	// Absent from /proc: gone, unless /proc hides it (hidepid) and it answers.
	signal0 := p.Signal0
	if signal0 == nil {
		signal0 = func(pid int) error { return syscall.Kill(pid, 0) }
	}
	if errors.Is(signal0(o.Pid), syscall.ESRCH) {
		return Gone
	}
	return Unknown
}
