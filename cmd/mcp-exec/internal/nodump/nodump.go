// Package nodump makes the process non-dumpable (PR_SET_DUMPABLE 0) in its init, for
// every subcommand of mcp-exec: a same-user process can then no longer open its
// /proc/<pid>/environ, mem, fd or maps, nor ptrace it. cmd/mcp-exec imports it, and it
// imports nothing but syscall, so that its init runs as early as Go allows (init's
// comment says how early). It is a second layer: the token must not be in an
// environment a program could read at all (docs/transports-and-auth.md, "The token").
// One process is left dumpable, the process backend's run wrapper (wrapperArg0).
package nodump

import "syscall"

// wrapperArg0 is launcher/process's wrapperArg0: were they to differ, every standalone
// run would fail at its oom_score_adj (the TestStandalone* tests). The run wrapper
// (launcher/process/wrap.go) stays dumpable because it must write its own
// /proc/self/oom_score_adj (a non-dumpable process's /proc files belong to root), and
// then execs the run's bootstrap at once, which execve makes dumpable again anyway. Its
// environment is the run's fixed list and its arguments the run's limits: nothing of
// the server's.
const wrapperArg0 = "mcp-exec-sandbox"

// Err is the error of the prctl call, nil when the process is non-dumpable (or is the
// run wrapper). main refuses to go on when it is set.
var Err error

// init runs as early as Go allows: Go initializes packages in dependency order, the
// lowest import path first among those ready (the spec, since Go 1.21), and this one is
// ready as soon as syscall is. The window that remains, between execve and here, is the
// Go runtime's own start and the init of the standard packages that sort before this
// one's path and do not wait for syscall: microseconds, and a process opening
// /proc/<pid>/environ in it keeps its descriptor (so MCP_EXEC_AUTH_TOKEN is refused by
// the process backend).
func init() {
	if isWrapper() {
		return
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		Err = e
	}
}

// isWrapper reports whether argv[0] is the run wrapper's, read from
// /proc/self/cmdline (os, which holds os.Args, would be initialized later).
func isWrapper() bool {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var b [len(wrapperArg0) + 1]byte
	n, _ := syscall.Read(fd, b[:])
	return n == len(b) && string(b[:len(wrapperArg0)]) == wrapperArg0 && b[len(wrapperArg0)] == 0
}
