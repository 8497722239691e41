package launcher

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSpecCommand checks the bootstrap command: fixed text plus what the options say,
// never anything of a job (SpecOf does not see one).
func TestSpecCommand(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"defaults", Options{},
			[]string{"python3", "-I", "-c", bootSource, "parent", "1048576", "", "/tmp/outputs", "8388608", "16777216", bootFilter()}},
		{"custom", Options{Python: "/usr/bin/python3.12", MaxOutputBytes: 4096, Preload: []string{"numpy", "pandas"}, MaxFileBytes: 1 * MiB, MaxFilesBytes: 2 * MiB},
			[]string{"/usr/bin/python3.12", "-I", "-c", bootSource, "parent", "4096", "numpy,pandas", "/tmp/outputs", "1048576", "2097152", bootFilter()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := SpecOf(tt.opts).Command
			if diff := cmp.Diff(tt.want, cmd); diff != "" {
				t.Errorf("Cmd mismatch (-want +got):\n%s", diff)
			}
			// Options that are not part of the command leave it unchanged.
			o := tt.opts
			o.Instance = "inst-q7zx"
			o.Image = "img-q7zx/image:v2"
			o.Memory, o.Pids, o.CPUs, o.TmpfsSize, o.Runtime = 1<<30, 9, 3, 1<<20, "runsc"
			cmd2 := SpecOf(o).Command
			if diff := cmp.Diff(cmd, cmd2); diff != "" {
				t.Errorf("Cmd depends on more than Python, the output caps and Preload (-first +second):\n%s", diff)
			}
			for _, arg := range cmd2 {
				if strings.Contains(arg, "q7zx") {
					t.Errorf("Cmd: got argument %.60q, want no instance or image in it", arg)
				}
			}
		})
	}
	if bootSource == "" {
		t.Fatalf("bootSource: got empty, want boot.py")
	}
}

// TestBootFitsOneArgument: boot.py travels as one argument of `python3 -I -c`, which
// Linux caps at MAX_ARG_STRLEN (32 pages, 128 KiB): past it no sandbox starts at all.
// The margin leaves room to see it coming.
func TestBootFitsOneArgument(t *testing.T) {
	const maxArg, margin = 128 << 10, 16 << 10
	if n := len(bootSource); n > maxArg-margin {
		t.Errorf("boot.py is %d bytes: within %d of MAX_ARG_STRLEN (%d), past which the bootstrap cannot be started", n, margin, maxArg)
	}
}
