package mcpserver

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
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
	if d := description(Options{Egress: testEgress}.withDefaults(), limitsOf(launcher.Options{})); !strings.Contains(d, "\n\nEgress: ") {
		t.Errorf("description lacks the egress paragraph:\n%s", d)
	}
	if _, ok := inputSchema(Options{}.withDefaults()).Properties["egress"]; ok {
		t.Error("egress: a property without profiles")
	}
	if d := description(Options{}.withDefaults(), limitsOf(launcher.Options{})); strings.Contains(d, "Egress") {
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
	if err := checkEgress("deb", Options{Vars: testVars}); err == nil || !strings.Contains(err.Error(), "MCP_EXEC_EGRESS_PROFILES") {
		t.Errorf("no profiles: %v", err)
	}
	if err := checkEgress("", Options{}); err != nil {
		t.Errorf("absent: %v", err)
	}
}

// TestEgressNotInSession: a call that names a profile and a session is refused, not
// run with the session's own profile (or none) as if it had asked for that.
func TestEgressNotInSession(t *testing.T) {
	o := Options{Egress: testEgress}.withDefaults()
	_, err := newJob(execInput{Code: "x", Egress: "deb", SessionID: "s"}, o)
	var ii *invalidInput
	if !errors.As(err, &ii) || ii.field != "egress" || !strings.Contains(err.Error(), "session_id") || !strings.Contains(err.Error(), "fixed at session_create") {
		t.Errorf("egress with session_id: got %v, want an invalid egress naming session_id", err)
	}
	if _, err := newJob(execInput{Code: "x", Egress: "deb"}, o); err != nil {
		t.Errorf("egress alone: %v", err)
	}
}

// TestSessionEgress: with profiles, session_create takes "egress" from the same enum
// and hands it to the backend, which binds it to the session; its calls carry no
// egress of their own, and one that names a profile is refused before the session.
// Without profiles there is no such field (the tool list and schemas follow the
// configuration only).
func TestSessionEgress(t *testing.T) {
	f := &fakeSessions{}
	var logs syncbuf.Buffer
	cs := connect(t, t.Context(), &fakeRunner{}, Options{Sessions: sessionOpts(f), Egress: testEgress, Logger: zerolog.New(&logs)})
	p, desc := listedProperty(t, cs, toolSessionCreate, "egress")
	if diff := cmp.Diff([]string{"deb", "pypi"}, p.Enum); diff != "" {
		t.Errorf("session_create egress enum (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(p.Description, egressList(testEgress)) || !strings.Contains(desc, "\n\nEgress: ") {
		t.Errorf("session_create: egress description %q, tool description %q", p.Description, desc)
	}

	res := callNamed(t, cs, toolSessionCreate, map[string]any{"egress": "pypi"})
	if res.IsError || !strings.Contains(text(t, res), "egress: pypi") {
		t.Fatalf("session_create with a profile: %s", text(t, res))
	}
	var out sessionCreateOutput
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if res := callNamed(t, cs, "exec", map[string]any{"code": "print(1)", "session_id": out.SessionID}); res.IsError {
		t.Fatalf("exec in the session without egress: %s", text(t, res))
	}
	// The call's log line names the session's profile (the operator's name), which
	// the call itself did not.
	if !slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(l string) bool {
		return strings.Contains(l, `"message":"exec"`) && strings.Contains(l, `"egress":"pypi"`)
	}) {
		t.Errorf("no exec log line naming the session's profile:\n%s", logs.String())
	}
	res = callNamed(t, cs, "exec", map[string]any{"code": "print(1)", "session_id": out.SessionID, "egress": "deb"})
	if !res.IsError || !strings.Contains(text(t, res), "fixed at session_create") {
		t.Errorf("exec in the session naming a profile: got %q, want the refusal", text(t, res))
	}
	for _, bad := range []map[string]any{{"egress": "npm"}, {"egress": 1}} {
		if res := callNamed(t, cs, toolSessionCreate, bad); !res.IsError || !strings.Contains(text(t, res), "egress") {
			t.Errorf("session_create %v: got %q, want a tool error naming egress", bad, text(t, res))
		}
	}
	f.mu.Lock()
	opened := slices.Clone(f.opened)
	conns := slices.Clone(f.conns)
	f.mu.Unlock()
	if len(opened) != 1 || opened[0].Egress != "pypi" {
		t.Fatalf("sessions opened: got %+v, want one with egress pypi", opened)
	}
	if jobs := conns[0].jobs(); len(jobs) != 1 || jobs[0].Egress != "" {
		t.Errorf("the session's jobs: got %+v, want one without egress of its own", jobs)
	}
	createSession(t, cs) // no egress: none
	if f.opened[1].Egress != "" {
		t.Errorf("session_create without egress: backend got %q", f.opened[1].Egress)
	}

	// Without profiles, session_create has no egress field.
	f = &fakeSessions{}
	cs = connect(t, t.Context(), &fakeRunner{}, Options{Sessions: sessionOpts(f)})
	if res := callNamed(t, cs, toolSessionCreate, map[string]any{"egress": "deb"}); !res.IsError || !strings.Contains(text(t, res), `unexpected additional properties ["egress"]`) {
		t.Errorf("session_create with egress, no profiles: got %q", text(t, res))
	}
	if s := sessionCreateSchema(Options{}); s.Properties["egress"] != nil {
		t.Error("session_create: an egress property without profiles")
	}
	if sessionEgressNote(Options{}) != "" {
		t.Error("session_create's description mentions egress without profiles")
	}
}

// schemaProperty is what the tests read of one property of a listed tool's input schema.
type schemaProperty struct {
	Enum        []string `json:"enum"`
	Description string   `json:"description"`
}

// listedProperty lists cs's tools and returns property prop of tool's input schema
// (zero if it has none) and the tool's description; it fails when there is no tool.
func listedProperty(t *testing.T, cs *mcp.ClientSession, tool, prop string) (schemaProperty, string) {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == tool })
	if i < 0 {
		t.Fatalf("no tool %s", tool)
	}
	raw, _ := json.Marshal(tools.Tools[i].InputSchema)
	var schema struct {
		Properties map[string]schemaProperty `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	return schema.Properties[prop], tools.Tools[i].Description
}

// TestEgressListInject: a profile's hosts with inject rules are named to the model, so
// that it sends no credentials of its own there.
func TestEgressListInject(t *testing.T) {
	got := egressList([]EgressProfile{{Name: "gh", Hosts: []string{"api.github.com", "codeload.github.com"}, Ports: []int{443}, Inject: []string{"api.github.com"}}})
	if want := "Profiles: gh (api.github.com, codeload.github.com; ports 443; credentials set by the server for api.github.com)."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
