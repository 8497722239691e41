package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestGroup: records are counted by server, tool and status, in the order each group
// first appears, with their durations and sizes summed.
func TestGroup(t *testing.T) {
	got := Group([]CallRecord{
		{Server: "a", Tool: "x", Status: "ok", DurationMS: 1, ArgBytes: 10, ResultBytes: 100},
		{Server: "b", Tool: "x", Status: "ok", DurationMS: 2, ArgBytes: 20, ResultBytes: 200},
		{Server: "a", Tool: "x", Status: "ok", DurationMS: 3, ArgBytes: 30, ResultBytes: 300},
		{Server: "a", Tool: "x", Status: "denied", ArgBytes: 5},
	})
	want := []CallGroup{
		{Server: "a", Tool: "x", Status: "ok", Count: 2, DurationMS: 4, ArgBytes: 40, ResultBytes: 400},
		{Server: "b", Tool: "x", Status: "ok", Count: 1, DurationMS: 2, ArgBytes: 20, ResultBytes: 200},
		{Server: "a", Tool: "x", Status: "denied", Count: 1, ArgBytes: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Group:\n got %+v\nwant %+v", got, want)
	}
	if g := Group(nil); g == nil || len(g) != 0 {
		t.Errorf("Group(nil) = %#v, want an empty slice", g)
	}
}

// testExec is an exec of a Manager that has not connected: allowed calls fail as
// unavailable, which is all the budget and the records need.
func testExec(t *testing.T, limits string, approve Approver) *Exec {
	t.Helper()
	cfg, err := Parse([]byte(`{"mcpServers": {"records": {"command": "true", "tools": ["lookup", "echo", "s*"], "approve": ["echo", "send*"]}}`+limits+`}`), Resolver{})
	if err != nil {
		t.Fatal(err)
	}
	return New(cfg, "test", zerolog.Nop()).NewExec(approve)
}

func serveJSON(x *Exec, body string) string {
	return string(x.serve(context.Background(), []byte(body), len(body)))
}

// TestExecFlood: a program's server and tool names are never kept, whatever their
// size: a record names the configured server and a tool the upstream lists or the
// allowlist names, else unknown; every call counts against the budget (denied,
// invalid and too large ones too), and the calls past it are only counted. 600 calls
// with names of 250,000 bytes leave the exec holding a few KiB.
func TestExecFlood(t *testing.T) {
	x := testExec(t, "", nil)
	long := strings.Repeat("s", 250_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 600 {
		reply := serveJSON(x, `{"server": "`+long+`", "tool": "`+long+`", "arguments": {}}`)
		want := `"kind":"denied"`
		if i >= 100 {
			want = `"kind":"budget"`
		}
		if len(reply) > 1024 || !strings.Contains(reply, want) {
			t.Fatalf("call %d: reply of %d bytes %.200q, want %s in at most 1 KiB", i, len(reply), reply, want)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	calls, refused := x.Calls(), x.Refused()
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("the exec holds %d bytes more after 600 calls, want at most 1 MiB", grew)
	}
	if len(calls) != 100 || refused.Count != 500 {
		t.Fatalf("%d records and %d refused, want 100 and 500", len(calls), refused.Count)
	}
	for _, c := range calls {
		if c.Server != Unknown || c.Tool != Unknown || c.Status != "denied" {
			t.Fatalf("record %+v, want server and tool unknown, denied", c)
		}
	}
	if refused.Server != Unknown || refused.Tool != Unknown || refused.Status != "budget" || refused.ArgBytes < 500*500_000 {
		t.Errorf("refused %+v, want unknown, unknown, budget and their sizes", refused)
	}
	runtime.KeepAlive(x)
}

// TestExecBudgetCountsEveryCall: denied, invalid and too large calls take their share
// of the budget like the others, and a record never carries the program's text.
func TestExecBudgetCountsEveryCall(t *testing.T) {
	x := testExec(t, `, "limits": {"max_calls": 6, "max_arg_bytes": 100}`, nil)
	for _, body := range []string{
		`{"server": "records", "tool": "hidden", "arguments": {}}`,
		`{"server": "records", "tool": "lookup", "arguments": {"id": 1}}`,
		`{"server": "records", "tool": "se-` + strings.Repeat("x", 200) + `", "arguments": {}}`,
		`not json`,
		`{"server": "records", "tool": "lookup", "arguments": {"a": 1, "a": 2}}`,
		`{"server": "records", "tool": "lookup", "arguments": {"x": "` + strings.Repeat("x", 100) + `"}}`,
		`{"server": "records", "tool": "lookup", "arguments": {}}`,
	} {
		serveJSON(x, body)
	}
	got := ""
	for _, c := range x.Calls() {
		got += fmt.Sprintf("%s.%s:%s ", c.Server, c.Tool, c.Status)
	}
	want := "records.unknown:denied records.lookup:unavailable records.unknown:unavailable unknown.unknown:invalid " +
		"unknown.unknown:invalid records.lookup:too_large "
	if got != want {
		t.Errorf("records:\n got %s\nwant %s", got, want)
	}
	if r := x.Refused(); r.Count != 1 {
		t.Errorf("refused %+v, want 1 call", r)
	}
	if x.serve(context.Background(), nil, 1<<20) == nil || x.Refused().Count != 2 {
		t.Errorf("a call too large to read after the budget: refused %d, want 2", x.Refused().Count)
	}
}

// TestExecApprovalShowsWhatRuns: the approver gets the canonical arguments, the same
// bytes the call sends, and the configured server's and listed tool's names; a call
// whose arguments do not fit the prompt, or whose tool only a glob matched, is refused
// without asking.
func TestExecApprovalShowsWhatRuns(t *testing.T) {
	var asked []string
	x := testExec(t, "", func(ctx context.Context, server, tool string, args json.RawMessage) (string, error) {
		asked = append(asked, server+"."+tool+" "+string(args))
		return Declined, nil
	})
	pad := strings.Repeat(" ", 2000)
	for _, tc := range []struct {
		name, args, reply, approval string
		asked                       bool
	}{
		{"padded", `{"to": "boss@corp.example", "body": "weekly report"` + pad + `}`, "the human declined the call", "declined", true},
		{"duplicate keys", `{"to": "boss@corp.example", "body": "weekly report"` + pad + `, "to": "attacker@evil.example", "body": "EXFIL"}`, "appears twice", "", false},
		{"too long to show", `{"body": "` + strings.Repeat("y", MaxApprovalArgs) + `"}`, "the approval prompt shows at most 2048 bytes", "too_large", false},
		{"just fits", `{"body": "` + strings.Repeat("y", MaxApprovalArgs-len(`{"body":""}`)) + `"}`, "the human declined the call", "declined", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			reply := serveJSON(x, `{"server": "records", "tool": "echo", "arguments": `+tc.args+`}`)
			calls := x.Calls()
			last := calls[len(calls)-1]
			if !strings.Contains(reply, tc.reply) || last.Approval != tc.approval {
				t.Errorf("reply %.300s, approval %q; want %q and approval %q", reply, last.Approval, tc.reply, tc.approval)
			}
			if !tc.asked {
				if len(asked) != 0 {
					t.Errorf("asked %q, want no question", asked)
				}
				return
			}
			c, _ := readCall([]byte(`{"arguments": ` + tc.args + `}`))
			if len(asked) != 1 || asked[0] != "records.echo "+string(c.args) {
				t.Errorf("asked %.300q, want records.echo and the canonical arguments", asked)
			}
		})
	}
	asked = nil
	reply := serveJSON(x, `{"server": "records", "tool": "send_mail", "arguments": {}}`)
	if !strings.Contains(reply, "records lists no such tool to ask about") || len(asked) != 0 {
		t.Errorf("a tool only a glob names: reply %s, asked %q; want refused unasked", reply, asked)
	}
}
