package mcpserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testEgress = []EgressProfile{
	{Name: "deb", Hosts: []string{"deb.debian.org"}, Ports: []int{443}},
	{Name: "pypi", Hosts: []string{"pypi.org", "*.pythonhosted.org"}, Ports: []int{443}},
}

// TestEgressField: with profiles, exec takes "egress" from the enum of their names and
// says what each opens; without, there is no such field (TestListToolsGolden pins the
// tool as it was) and a call naming one is refused before the runner.
func TestEgressField(t *testing.T) {
	s := inputSchema(Options{Egress: testEgress}.withDefaults())
	p := s.Properties["egress"]
	if p == nil {
		t.Fatal("egress: no property with profiles configured")
	}
	if diff := cmp.Diff([]any{"deb", "pypi"}, p.Enum); diff != "" {
		t.Errorf("egress enum (-want +got):\n%s", diff)
	}
	if p.Type != "string" || !strings.Contains(p.Description, "pypi (pypi.org, *.pythonhosted.org; ports 443)") {
		t.Errorf("egress: type %q, description %q", p.Type, p.Description)
	}
	if d := description(Options{Egress: testEgress}.withDefaults()); !strings.Contains(d, "\n\nEgress: ") {
		t.Errorf("description lacks the egress paragraph:\n%s", d)
	}
	if _, ok := inputSchema(Options{}.withDefaults()).Properties["egress"]; ok {
		t.Error("egress: a property without profiles")
	}
	if d := description(Options{}.withDefaults()); strings.Contains(d, "Egress") {
		t.Error("description mentions egress without profiles")
	}

	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{})
	expectToolErrors(t, cs, r, []badCall{
		{"egress without profiles", `{"code":"x","egress":"deb"}`, `unexpected additional properties ["egress"]`},
	}, "egress without profiles")

	r = &fakeRunner{}
	cs = connect(t, t.Context(), r, Options{Egress: testEgress})
	expectToolErrors(t, cs, r, []badCall{
		{"unknown profile", `{"code":"x","egress":"npm"}`, "egress"},
		{"not a string", `{"code":"x","egress":1}`, "egress"},
	}, "bad egress")
	if res := call(t, t.Context(), cs, `{"code":"print(1)","egress":"pypi"}`); res.IsError {
		t.Fatalf("call with a profile: %s", text(t, res))
	}
	if res := call(t, t.Context(), cs, `{"code":"print(1)"}`); res.IsError {
		t.Fatalf("call without a profile: %s", text(t, res))
	}
	jobs := r.calls()
	if len(jobs) != 2 || jobs[0].Egress != "pypi" || jobs[1].Egress != "" {
		t.Errorf("jobs' egress: got %+v", jobs)
	}
}

func TestCheckEgress(t *testing.T) {
	o := Options{Egress: testEgress}
	if err := checkEgress("npm", o); err == nil || err.Error() != `egress is "npm"; it must be one of deb, pypi` {
		t.Errorf("unknown profile: %v", err)
	}
	if err := checkEgress("deb", Options{}); err == nil || !strings.Contains(err.Error(), "MCP_EXEC_EGRESS_PROFILES") {
		t.Errorf("no profiles: %v", err)
	}
	if err := checkEgress("", Options{}); err != nil {
		t.Errorf("absent: %v", err)
	}
}

// TestEgressNotInSession: a call that names a profile and a session is refused, not
// run in the session's sandbox (which has no channel) as if it had asked for nothing.
func TestEgressNotInSession(t *testing.T) {
	o := Options{Egress: testEgress}.withDefaults()
	_, err := newJob(execInput{Code: "x", Egress: "deb", SessionID: "s"}, o)
	var ii *invalidInput
	if !errors.As(err, &ii) || ii.field != "egress" || !strings.Contains(err.Error(), "session_id") {
		t.Errorf("egress with session_id: got %v, want an invalid egress naming session_id", err)
	}
	if _, err := newJob(execInput{Code: "x", Egress: "deb"}, o); err != nil {
		t.Errorf("egress alone: %v", err)
	}
}
