package process

import (
	"os/exec"
	"strings"
	"testing"
)

// The wrapper's exec allocates nothing once RLIMIT_DATA is set: an argv far larger
// than the bootstrap's (whose source is on it) still starts under a 256 MiB limit.
// Under -race, with syscall.Exec's conversions made after the limit, this fails with
// ThreadSanitizer's "failed to allocate" (runs of a bootstrap of 65 KB did).
func TestWrapperExecsALargeArgvUnderTheDataLimit(t *testing.T) {
	argv := []string{"/bin/sh", "-c", `echo "ok $#"`, "sh"}
	for range 4 {
		argv = append(argv, strings.Repeat("x", 120<<10)) // each under MAX_ARG_STRLEN (128 KiB)
	}
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: wrapperArgs("exec", Limits{Data: 256 << 20, Files: 64}, argv)}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok 4" {
		t.Fatalf("wrapper exec with a %d KiB argv: err %v, output %q", 4*120, err, out)
	}
}
