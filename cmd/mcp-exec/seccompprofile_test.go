package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSeccompProfileCmd: `mcp-exec seccomp-profile` prints the OCI profile that denies clone3
// with ENOSYS (glibc then falls back to clone, whose flags the profile inspects); --gvisor
// prints the one for a gVisor RuntimeClass, where clone3 is allowed (runsc answers a denial
// with EPERM, and no thread could start), with unshare still denied.
func TestSeccompProfileCmd(t *testing.T) {
	type rule struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet *uint    `json:"errnoRet"`
	}
	profile := func(args ...string) []rule {
		t.Helper()
		var out, errOut bytes.Buffer
		if rc := run(context.Background(), append([]string{"seccomp-profile"}, args...), nil, &out, &errOut, func(string) string { return "" }); rc != 0 {
			t.Fatalf("seccomp-profile %v: exit %d: %s", args, rc, errOut.String())
		}
		var p struct {
			DefaultAction string `json:"defaultAction"`
			Syscalls      []rule `json:"syscalls"`
		}
		if err := json.Unmarshal(out.Bytes(), &p); err != nil {
			t.Fatalf("seccomp-profile %v: %v", args, err)
		}
		if p.DefaultAction != "SCMP_ACT_ERRNO" {
			t.Errorf("seccomp-profile %v: defaultAction %s, want SCMP_ACT_ERRNO", args, p.DefaultAction)
		}
		return p.Syscalls
	}
	actions := func(rules []rule, name string) []string {
		var out []string
		for _, r := range rules {
			if slices.Contains(r.Names, name) {
				a := r.Action
				if r.ErrnoRet != nil {
					a += "/" + map[uint]string{38: "ENOSYS", 1: "EPERM"}[*r.ErrnoRet]
				}
				out = append(out, a)
			}
		}
		return out
	}
	runc, gvisor := profile(), profile("--gvisor")
	if got := actions(runc, "clone3"); !slices.Equal(got, []string{"SCMP_ACT_ERRNO/ENOSYS"}) {
		t.Errorf("clone3 in the profile: %v, want SCMP_ACT_ERRNO/ENOSYS", got)
	}
	if got := actions(gvisor, "clone3"); !slices.Equal(got, []string{"SCMP_ACT_ALLOW"}) {
		t.Errorf("clone3 in the gVisor profile: %v, want SCMP_ACT_ALLOW only", got)
	}
	for _, name := range []string{"unshare", "setns", "io_uring_setup", "ptrace", "bpf"} {
		if got := actions(gvisor, name); len(got) != 0 {
			t.Errorf("%s in the gVisor profile: %v, want no rule (denied by default)", name, got)
		}
	}
	var out, errOut bytes.Buffer
	if rc := run(context.Background(), []string{"seccomp-profile", "--gvisr"}, nil, &out, &errOut, func(string) string { return "" }); rc != 2 || !strings.Contains(errOut.String(), `unknown argument "--gvisr"`) {
		t.Errorf("seccomp-profile --gvisr: exit %d, stderr %q; want 2 naming the argument", rc, errOut.String())
	}
}
