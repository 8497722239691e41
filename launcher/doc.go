// Package launcher runs untrusted programs (Python; bash or JavaScript by Job.Language,
// which the bootstrap execs), each in a throwaway sandbox of its own, through a Backend: launcher/docker (Docker or Podman containers), launcher/kube
// (Kubernetes pods) or launcher/process (child processes: the standalone mode). A
// Backend makes, starts, kills, inspects, removes and lists sandboxes from the Spec of
// SpecOf, and applies every field of it. The launcher owns the rest: the bootstrap
// (boot.py, every sandbox's first process) and its protocol (launcher/wire), jobs and
// files, the warm pool, slots and the queue, timeouts, the limits check (VerifyLimits),
// the janitor and the reaper, sessions (Session held, AttachedSession attached), metrics.
//
// The code is hostile (docs/security-model.md). The invariants, each kept where named:
//   - Caller data travels only over a sandbox's attached stdin, output only over its
//     stdout, never in a command, environment, label, log or file on the host; the
//     bootstrap frames all output, so a program forges neither its result nor a tool
//     call (launcher/wire, bridge.go).
//   - Every sandbox is SpecOf (SessionSpec for a session) alone, plus its own egress
//     channel for a job or session with a profile (egress.go); the bootstrap installs
//     launcher/syscalls' filter on itself before it reads any caller data (bootFilter).
//   - One sandbox serves one job or one session and is removed on every path; a
//     launcher removes only its own sandboxes and those of servers proven gone
//     (owners.go, orphans.go); an engine that goes away is waited for (enginewait.go).
//
// A job's path is on the sandbox type; docs/operations.md and docs/engines.md say more.
package launcher
