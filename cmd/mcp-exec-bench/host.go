package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// hostPython is the host interpreter(s) for the baseline (a).
type hostPython struct {
	path    string // runs print(1); "" when no python3 was found
	wrapper string // the python3 on PATH when it is a wrapper script (pyenv shim) around path
	pandas  string // runs the pandas snippet; "" when no host interpreter has pandas
	version string
	notes   []string
}

// findHostPython resolves the baseline interpreter: flagPath, else python3 on PATH.
// A wrapper script (such as a pyenv shim) is resolved to the interpreter it runs,
// since the floor is the interpreter, not the wrapper; the wrapper is measured too.
// When that interpreter has no pandas, other usual interpreters are tried for the
// pandas snippet alone.
func findHostPython(ctx context.Context, flagPath string) hostPython {
	var h hostPython
	p := flagPath
	if p == "" {
		lp, err := exec.LookPath("python3")
		if err != nil {
			h.notes = append(h.notes, "no python3 on PATH: the host baseline (a) is skipped")
			return h
		}
		p = lp
	}
	if isScript(p) {
		out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.executable)").Output()
		if real := strings.TrimSpace(string(out)); err == nil && real != "" {
			h.wrapper = p
			h.notes = append(h.notes, fmt.Sprintf("`%s` is a wrapper script; (a) measures the interpreter it runs, `%s`, and the wrapper is shown separately", p, real))
			p = real
		}
	}
	h.path = p
	if out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.version.split()[0])").Output(); err == nil {
		h.version = strings.TrimSpace(string(out))
	}
	candidates := []string{p}
	if flagPath == "" {
		candidates = append(candidates, "/usr/bin/python3", "/usr/local/bin/python3")
	}
	seen := map[string]bool{}
	for _, c := range candidates {
		r, err := filepath.EvalSymlinks(c)
		if err != nil || seen[r] {
			continue
		}
		seen[r] = true
		cmd := exec.CommandContext(ctx, c, "-c", "import pandas, sys; print(pandas.__version__, sys.version.split()[0])")
		out, err := cmd.Output()
		if err != nil {
			continue
		}
		h.pandas = c
		if c != p {
			h.notes = append(h.notes, fmt.Sprintf("`%s` has no pandas; the host pandas baseline uses `%s` (pandas, python %s)", p, c, strings.TrimSpace(string(out))))
		} else {
			h.notes = append(h.notes, fmt.Sprintf("host pandas, python: %s", strings.TrimSpace(string(out))))
		}
		break
	}
	if h.pandas == "" {
		h.notes = append(h.notes, "no host interpreter has pandas (Debian: apt-get install python3-pandas): the pandas baseline (a) and its target are n/a")
	}
	return h
}

func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 2)
	n, _ := f.Read(b)
	return n == 2 && string(b) == "#!"
}

// runHost runs `python -c code` and checks its output.
func runHost(ctx context.Context, python string, sn snippet) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, python, "-c", sn.code)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -c: %w: %s", python, err, tail(errb.String(), 300))
	}
	if out.String() != sn.want {
		return fmt.Errorf("%s -c: stdout %q, want %q", python, out.String(), sn.want)
	}
	return nil
}

// runDocker runs the code with `docker run --rm -i ... python3 -`, code on stdin.
func runDocker(ctx context.Context, docker string, args []string, sn snippet) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, docker, args...)
	cmd.Stdin = strings.NewReader(sn.code + "\n")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker run: %w: %s", err, tail(errb.String(), 300))
	}
	if out.String() != sn.want {
		return fmt.Errorf("docker run: stdout %q, want %q (stderr %q)", out.String(), sn.want, tail(errb.String(), 300))
	}
	return nil
}
