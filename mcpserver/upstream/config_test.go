package upstream

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func testResolver() Resolver {
	return Resolver{
		LookupEnv: func(k string) (string, bool) {
			v, ok := map[string]string{"TOKEN": "tok-123"}[k]
			return v, ok
		},
		ReadFile: func(p string) ([]byte, error) {
			if p == "/run/secrets/key" {
				return []byte("file-secret\n"), nil
			}
			return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrNotExist}
		},
	}
}

func TestParse(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers": {
  "git-hub": {"url": "https://api.example/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}, "tools": ["search_*", "get_issue", "create_*"], "approve": ["create_*"]},
  "files": {"type": "stdio", "command": "/usr/bin/fs-mcp", "args": ["--root", "/srv"], "env": {"KEY": "${file:/run/secrets/key}"}, "tools": ["read"]}
 }, "limits": {"max_calls": 5, "call_timeout_s": 7}}`), testResolver())
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 2 || cfg.Servers[0].Name != "files" || cfg.Servers[1].Module != "git_hub" {
		t.Fatalf("servers: %+v", cfg.Servers)
	}
	if got := cfg.Servers[1].Headers["Authorization"]; got != "Bearer tok-123" {
		t.Errorf("header: %q", got)
	}
	if got := cfg.Servers[0].Env["KEY"]; got != "file-secret" {
		t.Errorf("env from file: %q", got)
	}
	want := Limits{MaxCalls: 5, MaxArgBytes: 256 << 10, MaxResultBytes: 8 << 20, CallTimeout: 7 * time.Second}
	if cfg.Limits != want {
		t.Errorf("limits: %+v, want %+v", cfg.Limits, want)
	}
	gh := cfg.Servers[1]
	for tool, allowed := range map[string]bool{"search_code": true, "get_issue": true, "delete_repo": false, "get_issues": false} {
		if gh.Allowed(tool) != allowed {
			t.Errorf("Allowed(%q) = %v, want %v", tool, !allowed, allowed)
		}
	}
	for tool, approve := range map[string]bool{"create_issue": true, "search_code": false} {
		if gh.NeedsApproval(tool) != approve {
			t.Errorf("NeedsApproval(%q) = %v, want %v", tool, !approve, approve)
		}
	}
}

// TestParseErrors: each bad file fails naming the server and the field, and never
// the value of a secret.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"no servers", `{"mcpServers": {}}`, `"mcpServers" names no server`},
		{"approve not allowed", `{"mcpServers": {"a": {"command": "x", "tools": ["t"], "approve": ["u"]}}}`, `server "a": approve: "u" is not in "tools"`},
		{"approve bad glob", `{"mcpServers": {"a": {"command": "x", "tools": ["t"], "approve": ["["]}}}`, `server "a": approve: "[" is not a valid name or glob`},
		{"unknown field", `{"mcpServers": {"a": {"command": "x", "tools": ["t"], "cwd": "/"}}}`, `server "a": entry: json: unknown field "cwd"`},
		{"no allowlist", `{"mcpServers": {"a": {"command": "x"}}}`, `server "a": tools: required`},
		{"empty allowlist", `{"mcpServers": {"a": {"command": "x", "tools": []}}}`, `server "a": tools: required`},
		{"bad glob", `{"mcpServers": {"a": {"command": "x", "tools": ["[a"]}}}`, `server "a": tools: "[a" is not a valid name or glob`},
		{"both", `{"mcpServers": {"a": {"command": "x", "url": "http://h/", "tools": ["t"]}}}`, `server "a": command: set "command" (stdio) or "url" (HTTP), not both`},
		{"neither", `{"mcpServers": {"a": {"tools": ["t"]}}}`, `server "a": command: set "command"`},
		{"bad url", `{"mcpServers": {"a": {"url": "ftp://h/", "tools": ["t"]}}}`, `server "a": url: must be an http:// or https:// URL`},
		{"headers on stdio", `{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}, "tools": ["t"]}}}`, `server "a": headers: only for "url" servers`},
		{"bad name", `{"mcpServers": {"1a": {"command": "x", "tools": ["t"]}}}`, `server "1a": name: must start with a letter`},
		{"module clash", `{"mcpServers": {"a-b": {"command": "x", "tools": ["t"]}, "a_b": {"command": "x", "tools": ["t"]}}}`, `both become the Python module "a_b"`},
		{"unset env", `{"mcpServers": {"a": {"url": "http://h/", "headers": {"X": "${env:NOPE}"}, "tools": ["t"]}}}`, `server "a": headers.X: ${env:NOPE} is not set`},
		{"missing file", `{"mcpServers": {"a": {"command": "x", "env": {"K": "${file:/nope}"}, "tools": ["t"]}}}`, `server "a": env.K: reading ${file:/nope}: file does not exist`},
		{"relative file", `{"mcpServers": {"a": {"command": "x", "env": {"K": "${file:rel}"}, "tools": ["t"]}}}`, `server "a": env.K: ${file:rel} must be an absolute path`},
		{"unknown ref", `{"mcpServers": {"a": {"command": "x", "env": {"K": "${vault:k}"}, "tools": ["t"]}}}`, `server "a": env.K: unknown reference ${vault:...}`},
		{"negative limit", `{"mcpServers": {"a": {"command": "x", "tools": ["t"]}}, "limits": {"max_calls": -1}}`, `limits.max_calls is -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), testResolver())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "tok-123") || strings.Contains(err.Error(), "file-secret") {
				t.Errorf("the error reveals a secret: %v", err)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load("/nonexistent/upstreams.json"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

func TestFunctionNames(t *testing.T) {
	for in, want := range map[string]string{"search-issues": "search_issues", "get.item": "get_item", "9lives": "_9lives", "class": "class_", "ok_1": "ok_1"} {
		if got := function(in); got != want {
			t.Errorf("function(%q) = %q, want %q", in, got, want)
		}
	}
}
