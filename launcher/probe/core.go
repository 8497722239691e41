package probe

import "github.com/mcp-exec/mcp-exec/launcher"

// pyCoreDumps checks RLIMIT_CORE in the program and its bootstrap, that the program
// cannot raise it, and that an aborting child dumps no core.
var pyCoreDumps = py("core_dumps")

// coreDumpsProbe is core_dumps_disabled: every backend sets
// RLIMIT_CORE 0, soft and hard (the Docker/Podman ulimit, the bootstrap on every
// backend, the process backend's wrapper), so that a host core_pattern collector
// never gets a program's memory.
func coreDumpsProbe(mk func(name, claim, body string, check func(launcher.Result) error) Probe) Probe {
	return mk("core_dumps_disabled",
		"RLIMIT_CORE is 0, soft and hard, in the program and the bootstrap; the program cannot raise it, and an aborting child dumps no core",
		pyCoreDumps, nil)
}
