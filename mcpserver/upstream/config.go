package upstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
)

// Config is the upstreams file: the servers whose tools programs may call, and the
// budget of one exec.
type Config struct {
	Servers []Server // in name order
	Limits  Limits

	// Callers' sessions: a server that is not Shared gets a session of its own for
	// each identity that calls it, at most MaxSessions per server at once, each
	// closed after IdleTimeout without a call. They come from flags, not from the
	// file; 0 is 16 and 5 minutes.
	MaxSessions int
	IdleTimeout time.Duration
	// Vars names settings in messages by their variables too (backend.Vars); nil:
	// by flag alone.
	Vars backend.Vars
}

// Server is one upstream MCP server: a command run as a child of ours (stdio) or a
// streamable-HTTP URL. Env and Headers hold resolved secrets: never log them.
type Server struct {
	Name    string
	Module  string // the Python submodule: Name with '-' as '_'
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
	Tools   []string // allowlist: names or path.Match globs
	Approve []string // allowed tools whose calls a human approves first: names or globs
	// Shared: one session serves every caller, whoever calls (the file's
	// "shared": true). Without it each identity gets its own (Manager).
	Shared bool
}

// Limits bound what one exec may do through the bridge. Zero values take the defaults
// named on each field.
type Limits struct {
	MaxCalls       int           `json:"max_calls"`        // calls per exec; 0 is 100
	MaxArgBytes    int           `json:"max_arg_bytes"`    // one call's JSON arguments; 0 is 256 KiB
	MaxResultBytes int           `json:"max_result_bytes"` // all results of one exec together; 0 is 8 MiB
	CallTimeout    time.Duration `json:"-"`                // call_timeout_s; 0 is 30 s
}

func (l Limits) withDefaults() Limits {
	if l.MaxCalls <= 0 {
		l.MaxCalls = 100
	}
	if l.MaxArgBytes <= 0 {
		l.MaxArgBytes = 256 << 10
	}
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = 8 << 20
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = 30 * time.Second
	}
	return l
}

// The file's JSON: the mcpServers shape clients use, plus "tools" per server and
// "limits".
type fileJSON struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	Limits     struct {
		MaxCalls       int `json:"max_calls"`
		MaxArgBytes    int `json:"max_arg_bytes"`
		MaxResultBytes int `json:"max_result_bytes"`
		CallTimeoutS   int `json:"call_timeout_s"`
	} `json:"limits"`
}

type serverJSON struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Tools   []string          `json:"tools"`
	Approve []string          `json:"approve"`
	Shared  bool              `json:"shared"`
}

// Resolver reads secret references: ${env:NAME} from the environment, ${file:/path}
// from a file (its content without the final newline).
type Resolver struct {
	LookupEnv func(string) (string, bool)
	ReadFile  func(string) ([]byte, error)
}

// Load reads and checks the upstreams file at path, resolving secrets from the
// process's environment and files.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the upstreams file: %w", err)
	}
	return Parse(data, Resolver{LookupEnv: os.LookupEnv, ReadFile: os.ReadFile})
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// Parse checks an upstreams file. Every error names the server and the field.
func Parse(data []byte, r Resolver) (*Config, error) {
	var f fileJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("upstreams file: %w", err)
	}
	if len(f.MCPServers) == 0 {
		return nil, errors.New(`upstreams file: "mcpServers" names no server`)
	}
	lim := Limits{MaxCalls: f.Limits.MaxCalls, MaxArgBytes: f.Limits.MaxArgBytes, MaxResultBytes: f.Limits.MaxResultBytes,
		CallTimeout: time.Duration(f.Limits.CallTimeoutS) * time.Second}
	for k, v := range map[string]int{"max_calls": lim.MaxCalls, "max_arg_bytes": lim.MaxArgBytes,
		"max_result_bytes": lim.MaxResultBytes, "call_timeout_s": f.Limits.CallTimeoutS} {
		if v < 0 {
			return nil, fmt.Errorf("upstreams file: limits.%s is %d; it must be positive (0 or absent: the default)", k, v)
		}
	}
	cfg := &Config{Limits: lim.withDefaults()}
	modules := map[string]string{}
	for name, raw := range f.MCPServers {
		s, err := parseServer(name, raw, r)
		if err != nil {
			return nil, err
		}
		if other, dup := modules[s.Module]; dup {
			return nil, fmt.Errorf("upstreams file: servers %q and %q both become the Python module %q", other, name, s.Module)
		}
		modules[s.Module] = name
		cfg.Servers = append(cfg.Servers, s)
	}
	sort.Slice(cfg.Servers, func(i, j int) bool { return cfg.Servers[i].Name < cfg.Servers[j].Name })
	return cfg, nil
}

func parseServer(name string, raw json.RawMessage, r Resolver) (Server, error) {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("upstreams file: server %q: %s: %s", name, field, fmt.Sprintf(format, a...))
	}
	if !nameRE.MatchString(name) {
		return Server{}, bad("name", "must start with a letter and have only letters, digits, '_' and '-' (at most 64)")
	}
	var j serverJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Server{}, bad("entry", "%v", err)
	}
	s := Server{Name: name, Module: strings.ReplaceAll(name, "-", "_"), Command: j.Command, Args: j.Args, URL: j.URL, Shared: j.Shared}
	switch {
	case j.Command != "" && j.URL != "":
		return Server{}, bad("command", `set "command" (stdio) or "url" (HTTP), not both`)
	case j.Command == "" && j.URL == "":
		return Server{}, bad("command", `set "command" (stdio) or "url" (streamable HTTP)`)
	case j.Command != "" && len(j.Headers) > 0:
		return Server{}, bad("headers", `only for "url" servers`)
	case j.URL != "" && (len(j.Env) > 0 || len(j.Args) > 0):
		return Server{}, bad("env", `"env" and "args" are only for "command" servers`)
	}
	switch j.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	default:
		return Server{}, bad("type", "%q is not stdio or http", j.Type)
	}
	if j.URL != "" {
		u, err := url.Parse(j.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Server{}, bad("url", "must be an http:// or https:// URL")
		}
	}
	if len(j.Tools) == 0 {
		return Server{}, bad("tools", `required: list the tools programs may call (names or globs such as "search_*"); there is no allow-all default`)
	}
	for _, p := range j.Tools {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return Server{}, bad("tools", "%q is not a valid name or glob", p)
		}
	}
	s.Tools = j.Tools
	for _, p := range j.Approve {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return Server{}, bad("approve", "%q is not a valid name or glob", p)
		}
		if !strings.ContainsAny(p, `*?[\`) && !s.Allowed(p) {
			return Server{}, bad("approve", "%q is not in \"tools\": list the tools that need approval among the allowed ones", p)
		}
	}
	s.Approve = j.Approve
	var err error
	if s.Env, err = resolveAll(name, "env", j.Env, r); err != nil {
		return Server{}, err
	}
	if s.Headers, err = resolveAll(name, "headers", j.Headers, r); err != nil {
		return Server{}, err
	}
	return s, nil
}

// resolveAll resolves the secret references in m's values; the error names the key,
// never the value.
func resolveAll(server, field string, m map[string]string, r Resolver) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		got, err := resolve(v, r)
		if err != nil {
			return nil, fmt.Errorf("upstreams file: server %q: %s.%s%w", server, field, k, err)
		}
		out[k] = got
	}
	return out, nil
}

var refRE = regexp.MustCompile(`\$\{([a-z]+):([^}]*)\}`)

// Resolve replaces each ${env:NAME} and ${file:/path} in v. Its error names the
// reference, never a value (the egress profiles' inject rules take their values so).
func (r Resolver) Resolve(v string) (string, error) {
	got, err := resolve(v, r)
	if err != nil {
		return "", errors.New(strings.TrimPrefix(err.Error(), ": "))
	}
	return got, nil
}

// resolve replaces each ${env:NAME} and ${file:/path} in v.
func resolve(v string, r Resolver) (string, error) {
	var err error
	out := refRE.ReplaceAllStringFunc(v, func(ref string) string {
		m := refRE.FindStringSubmatch(ref)
		switch m[1] {
		case "env":
			got, ok := r.LookupEnv(m[2])
			if !ok && err == nil {
				err = fmt.Errorf(": ${env:%s} is not set", m[2])
			}
			return got
		case "file":
			if !strings.HasPrefix(m[2], "/") {
				if err == nil {
					err = fmt.Errorf(": ${file:%s} must be an absolute path", m[2])
				}
				return ""
			}
			b, rerr := r.ReadFile(m[2])
			if rerr != nil && err == nil {
				err = fmt.Errorf(": reading ${file:%s}: %v", m[2], cmp.Or(errors.Unwrap(rerr), rerr))
			}
			return strings.TrimSuffix(string(b), "\n")
		default:
			if err == nil {
				err = fmt.Errorf(": unknown reference ${%s:...}; use ${env:NAME} or ${file:/path}", m[1])
			}
			return ""
		}
	})
	return out, err
}

// Allowed reports whether the server's allowlist names tool.
func (s Server) Allowed(tool string) bool {
	for _, p := range s.Tools {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// NeedsApproval reports whether the server's approve list names tool: its calls wait
// for a human's yes.
func (s Server) NeedsApproval(tool string) bool {
	for _, p := range s.Approve {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}
