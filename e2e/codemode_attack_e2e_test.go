package e2e_test

// End-to-end tests of code mode against hostile programs: the real binary with
// --upstreams naming the stdio upstream of TestE2ECodeMode (scripts/e2e/upstream.mjs),
// a Go SDK client, the real engine and sandbox image.
//
//   - TestE2ECodeModeFlood runs the server in a memory cgroup of its own and a program
//     that sends 600 calls naming a server of 250,000 characters: the server's peak
//     memory, read from the cgroup, stays far under the limit, the log and the result
//     stay small, and the server answers afterwards.
//   - TestE2ECodeModeApprovalCanonical has a human (the client's elicitation handler)
//     who accepts what looks right: a key given twice after padding is refused before
//     anyone is asked, the question shows the canonical arguments whole, and arguments
//     too long to show are refused without asking.
//
// Needs what TestE2ECodeMode needs; the flood test also a writable memory cgroup
// (root: cgroup v1's memory hierarchy, or v2 with the memory controller). Outside CI
// a missing piece skips the tests; with CI set it fails. Skipped with -short.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/e2e"
)

// e2eCodeModeEnv writes an upstreams file naming upstream.mjs as "records" (lookup
// and echo allowed, echo on the approve list) and returns the server's environment.
func e2eCodeModeEnv(t *testing.T) []string {
	t.Helper()
	dir, node := e2e.Node(t)
	file := filepath.Join(t.TempDir(), "upstreams.json")
	conf := fmt.Sprintf(`{"mcpServers": {"records": {"command": %q, "args": [%q], "tools": ["lookup", "echo"], "approve": ["echo"]}}}`,
		node, filepath.Join(dir, "upstream.mjs"))
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return e2e.Env(append(e2e.BackendEnv(), "MCP_EXEC_UPSTREAMS="+file)...)
}

// e2eElicitingSession speaks MCP 2025-11-25, the last version in which a server may
// ask its client (elicitation) while it serves a call.
var e2eElicitingSession = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// e2eConnect connects a Go SDK client to s over streamable HTTP.
func e2eConnect(t *testing.T, s *e2e.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return s.Connect(t, opts, e2eElicitingSession)
}

// e2eCodeModeResult is exec's structured result in code mode.
type e2eCodeModeResult struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	ToolCalls []struct {
		Server, Tool, Status, Approval string
	} `json:"tool_calls"`
	More []struct {
		Server, Tool, Status string
		Count                int
	} `json:"tool_calls_more"`
	size int // of the whole result's JSON
}

func e2eExecCodeMode(t *testing.T, cs *mcp.ClientSession, code string) e2eCodeModeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": code, "timeout_s": 90}})
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(res)
	if res.IsError {
		t.Fatalf("exec: tool error %.2000s", whole)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out e2eCodeModeResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	out.size = len(whole)
	if out.ExitCode != 0 {
		t.Fatalf("exit code %d; stderr %.2000s", out.ExitCode, out.Stderr)
	}
	return out
}

// The flood's cgroup: the limit of a small server's container, and how much of it
// the flood may take beyond what the server and its upstream (node) hold idle (about
// 30 MiB, charged from their start). The flood took 1.6 GiB without a limit before
// the records were bounded, 250 MiB more than idle with this one, and 5 MiB since.
const (
	floodMemoryLimit  = 256 << 20
	floodMemoryGrowth = 64 << 20
)

func TestE2ECodeModeFlood(t *testing.T) {
	env := e2eCodeModeEnv(t)
	bin := e2e.Build(t)
	cg := e2eMemoryCgroup(t, floodMemoryLimit)
	s := e2e.Serve(t, cg.wrap(t, bin), env, "http", "e2e-codemode-flood-"+strconv.Itoa(os.Getpid()), e2e.Random())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cgroup's peak memory %d MiB (limit %d MiB), %d OOM kills", cg.peak(t)>>20, floodMemoryLimit>>20, cg.ooms(t))
		}
	})
	cs := e2eConnect(t, s, nil)
	idle, procs := cg.usage(t), len(strings.Fields(readTrim(filepath.Join(cg.dir, "cgroup.procs"))))
	logged := len(s.Logs.String())

	began := time.Now()
	out := e2eExecCodeMode(t, cs, `import mcptools
name = "s" * 250000
kinds = {}
for i in range(600):
    try:
        mcptools._call(name, "lookup", {"id": i})
    except mcptools.ToolError as e:
        kinds[type(e).__name__] = kinds.get(type(e).__name__, 0) + 1
print(sorted(kinds.items()))
`)
	took := time.Since(began)
	peak, ooms := cg.peak(t), cg.ooms(t)
	logs := s.Logs.String()[logged:]
	t.Logf("600 calls with a server name of 250,000 characters in %s: cgroup memory (%d processes) %d MiB before, peak %d MiB (limit %d MiB), %d OOM kills; %d bytes logged; a result of %d bytes",
		took.Round(time.Millisecond), procs, idle>>20, peak>>20, floodMemoryLimit>>20, ooms, len(logs), out.size)

	if want := "[('ToolBudgetExceeded', 500), ('ToolDenied', 100)]\n"; out.Stdout != want {
		t.Errorf("stdout %q, want %q", out.Stdout, want)
	}
	if ooms != 0 || peak-idle > floodMemoryGrowth {
		t.Errorf("peak memory %d MiB, %d MiB over the idle server's, with %d OOM kills; want at most %d MiB over, and none",
			peak>>20, (peak-idle)>>20, ooms, floodMemoryGrowth>>20)
	}
	for _, c := range out.ToolCalls {
		if c.Server != "unknown" || c.Tool != "unknown" || c.Status != "denied" {
			t.Errorf("tool_calls entry %+v, want unknown.unknown:denied", c)
			break
		}
	}
	more := fmt.Sprint(out.More)
	if len(out.ToolCalls) != 20 || more != "[{unknown unknown denied 80} {unknown unknown budget 500}]" {
		t.Errorf("%d tool_calls and tool_calls_more %s; want 20, then 80 denied and 500 refused past the budget", len(out.ToolCalls), more)
	}
	if out.size > 16<<10 {
		t.Errorf("the result is %d bytes, want at most 16 KiB", out.size)
	}
	if len(logs) > 64<<10 || strings.Contains(logs, strings.Repeat("s", 100)) {
		t.Errorf("the exec logged %d bytes (want at most 64 KiB, and nothing of the program's names)", len(logs))
	}
	if n := strings.Count(logs, `"message":"tool call"`); n != 100 {
		t.Errorf("the exec logged %d lines of calls, want 100 (limits.max_calls)", n)
	}
	// The server is still there, and its upstream too.
	if out := e2eExecCodeMode(t, cs, "from mcptools import records\nprint(records.lookup(id=3)['name'])\n"); out.Stdout != "record-3\n" {
		t.Errorf("after the flood: stdout %q, want record-3", out.Stdout)
	}
}

func TestE2ECodeModeApprovalCanonical(t *testing.T) {
	env := e2eCodeModeEnv(t)
	bin := e2e.Build(t)
	var mu sync.Mutex
	var asked []string
	// The human accepts a question that shows the text approve-me and nothing else
	// of note.
	opts := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		mu.Unlock()
		if m := req.Params.Message; strings.Contains(m, "approve-me") && !strings.Contains(m, "EXFIL") && !strings.Contains(m, "yyy") {
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	// The program writes its own call messages, as a hostile one would (Python's dicts
	// cannot hold a key twice): the first arguments' first 2,048 bytes hide the second
	// text, and the second arguments spell approve-me with an escape.
	code := `import json, mcptools
class Raw:
    loads = staticmethod(json.loads)
    body = ""
    @staticmethod
    def dumps(obj):
        return Raw.body
mcptools._json = Raw
pad = " " * 2100
for args in ['{"text": "approve-me"' + pad + ', "text": "EXFIL"}',
             '{"text": "approve-\\u006de <&>"' + pad + '}',
             '{"text": "approve-me ' + "y" * 3000 + '"}']:
    Raw.body = '{"server": "records", "tool": "echo", "arguments": ' + args + '}'
    try:
        print("ran:", mcptools._call("records", "echo", {}))
    except mcptools.ToolError as e:
        print(type(e).__name__ + ":", e)
`
	want := `ToolError: the call is refused: the key "text" appears twice in one object (in "arguments")
ran: approve-me <&>
ToolDenied: records.echo needs a human's approval, and its arguments are 3022 bytes as the human would see them (canonical JSON); the approval prompt shows at most 2048 bytes, whole: pass smaller arguments
`
	shown := `Arguments: {"text":"approve-me \u003c\u0026\u003e"}` + "\n"

	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			var cs *mcp.ClientSession
			if transport == "http" {
				s := e2e.Serve(t, bin, env, "http", "e2e-codemode-approval-"+strconv.Itoa(os.Getpid()), e2e.Random())
				cs = e2eConnect(t, s, opts)
			} else {
				instance := "e2e-codemode-approval-stdio-" + strconv.Itoa(os.Getpid())
				t.Cleanup(func() { e2e.AssertNoContainers(t, instance) })
				cmd := exec.Command(bin)
				cmd.Env = append(append([]string{}, env...), "MCP_EXEC_INSTANCE="+instance)
				var err error
				cs, err = mcp.NewClient(&mcp.Implementation{Name: "codemode-attack", Version: "0"}, opts).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, e2eElicitingSession)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cs.Close() })
			}
			out := e2eExecCodeMode(t, cs, code)
			if out.Stdout != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", out.Stdout, want)
			}
			var got []string
			for _, c := range out.ToolCalls {
				got = append(got, c.Server+"."+c.Tool+":"+c.Status+":"+c.Approval)
			}
			if g := strings.Join(got, " "); g != "unknown.unknown:invalid: records.echo:ok:accepted records.echo:unapproved:too_large" {
				t.Errorf("tool_calls: %s", g)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !strings.Contains(asked[0], "records.echo") || !strings.Contains(asked[0], shown) {
				t.Errorf("the human was asked %q; want one question, about records.echo, showing %q", asked, shown)
			}
		})
	}
}

// e2eCgroup is a memory cgroup of the test's: cgroup v1's memory hierarchy, or v2.
type e2eCgroup struct {
	dir string
	v2  bool
}

// e2eMemoryCgroup makes a memory cgroup limited to limit bytes (no swap), removed
// when the test ends (after the processes in it: register it before them).
func e2eMemoryCgroup(t *testing.T, limit int64) *e2eCgroup {
	t.Helper()
	name := "mcp-exec-test-" + e2e.Random()[:12]
	var cg *e2eCgroup
	switch {
	case fileExists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		cg = &e2eCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
	case strings.Contains(readTrim("/sys/fs/cgroup/cgroup.subtree_control"), "memory"):
		cg = &e2eCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
	default:
		e2e.SkipOrFail(t, "no memory cgroup to make: neither cgroup v1's memory hierarchy nor v2 with the memory controller delegated")
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		e2e.SkipOrFail(t, "making a memory cgroup (run as root): %v", err)
	}
	t.Cleanup(func() {
		// The server's children may take a moment to go after it.
		deadline := time.Now().Add(10 * time.Second)
		for os.Remove(cg.dir) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if fileExists(cg.dir) {
			t.Errorf("the cgroup %s is still there (processes: %q)", cg.dir, readTrim(filepath.Join(cg.dir, "cgroup.procs")))
		}
	})
	limits := map[string]string{"memory.limit_in_bytes": "", "memory.memsw.limit_in_bytes": ""}
	if cg.v2 {
		limits = map[string]string{"memory.max": "", "memory.swap.max": "0"}
	}
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max", "memory.swap.max"} {
		v, ok := limits[f]
		if !ok || !fileExists(filepath.Join(cg.dir, f)) {
			continue
		}
		if v == "" {
			v = strconv.FormatInt(limit, 10)
		}
		if err := os.WriteFile(filepath.Join(cg.dir, f), []byte(v), 0o644); err != nil {
			t.Fatalf("setting %s: %v", f, err)
		}
	}
	return cg
}

// wrap returns a script that joins the cgroup and runs bin, so that the server and
// every child it starts are in it from the start.
func (cg *e2eCgroup) wrap(t *testing.T, bin string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "in-cgroup")
	body := fmt.Sprintf("#!/bin/sh\necho $$ > %s || exit 97\nexec %s \"$@\"\n", filepath.Join(cg.dir, "cgroup.procs"), bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func (cg *e2eCgroup) read(t *testing.T, v1, v2 string) int64 {
	t.Helper()
	f := v1
	if cg.v2 {
		f = v2
	}
	n, err := strconv.ParseInt(readTrim(filepath.Join(cg.dir, f)), 10, 64)
	if err != nil {
		t.Fatalf("reading %s: %v", f, err)
	}
	return n
}

func (cg *e2eCgroup) usage(t *testing.T) int64 {
	return cg.read(t, "memory.usage_in_bytes", "memory.current")
}

func (cg *e2eCgroup) peak(t *testing.T) int64 {
	return cg.read(t, "memory.max_usage_in_bytes", "memory.peak")
}

// ooms counts the processes the kernel killed for the cgroup's limit.
func (cg *e2eCgroup) ooms(t *testing.T) int {
	t.Helper()
	f := "memory.oom_control"
	if cg.v2 {
		f = "memory.events"
	}
	for line := range strings.Lines(readTrim(filepath.Join(cg.dir, f))) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}
