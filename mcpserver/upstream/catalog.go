package upstream

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// The catalog the sandbox's mcptools module builds its functions from (launcher/mcptools.py).
type catalogJSON struct {
	Servers []catalogServer `json:"servers"`
}

type catalogServer struct {
	Name   string        `json:"name"`
	Module string        `json:"module"`
	Tools  []catalogTool `json:"tools"`
}

type catalogTool struct {
	Name        string `json:"name"`
	Function    string `json:"function"`
	Description string `json:"description"`
	InputSchema any    `json:"inputSchema"`
	Approve     bool   `json:"approve,omitempty"` // each call waits for a human's yes
}

// pyKeywords are Python's keywords, which no function may be named.
var pyKeywords = map[string]bool{"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true, "del": true,
	"elif": true, "else": true, "except": true, "finally": true, "for": true, "from": true, "global": true,
	"if": true, "import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true,
	"or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true}

// function is the Python name of a tool: every character that may not be in an
// identifier becomes '_'; a leading digit or a keyword gets a '_' too.
func function(tool string) string {
	var b strings.Builder
	for i, r := range tool {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if pyKeywords[s] || s == "" {
		s += "_"
	}
	return s
}

// entries lists the allowed tools known now, server by server; a tool whose Python
// name another one already has is left out.
func (m *Manager) entries() []catalogServer {
	var out []catalogServer
	for _, c := range m.conns {
		s := catalogServer{Name: c.srv.Name, Module: c.srv.Module, Tools: []catalogTool{}}
		seen := map[string]bool{}
		for _, t := range c.snapshot() {
			fn := function(t.Name)
			if seen[fn] {
				continue
			}
			seen[fn] = true
			s.Tools = append(s.Tools, catalogTool{Name: t.Name, Function: fn, Description: t.Description, InputSchema: t.InputSchema,
				Approve: c.srv.NeedsApproval(t.Name)})
		}
		out = append(out, s)
	}
	return out
}

func (m *Manager) catalog() []byte {
	b, err := json.Marshal(catalogJSON{Servers: m.entries()})
	if err != nil {
		return []byte(`{"servers":[]}`)
	}
	return b
}

// maxIndex bounds the index in the exec tool's description.
const maxIndex = 4096

// Index is the compact list of servers and tools for the exec tool's description:
// how to import them (in JavaScript too, with javascript), and one line per tool,
// which reads the same in both, at most maxIndex bytes.
func (m *Manager) Index(javascript bool) string {
	var b strings.Builder
	langs, js, raises := "Python", "", "raises mcptools.ToolError"
	if javascript {
		imp, ref := jsImport(m.exampleModule())
		langs, raises = "Python or JavaScript", "raises (rejects with) mcptools.ToolError"
		js = "; in JavaScript `" + imp + "`, then `await " + ref + ".<tool>({...})`"
	}
	b.WriteString("Code mode: the program can call the tools of other MCP servers as " + langs + " functions, through the sandbox's own stream (still no network). Import a server's module from mcptools and call its functions with keyword arguments, e.g. `from mcptools import " +
		m.exampleModule() + "`" + js + ". Results are the tool's structured content, else its text (JSON-decoded when it is JSON); a failing tool " + raises + ". mcptools.search(\"text\") and mcptools.describe(\"server.tool\") show signatures in the sandbox; the tools_search tool shows them here. Each run may make " +
		fmt.Sprint(m.cfg.Limits.MaxCalls) + " calls (refused ones count too); tool_calls lists them.\nServers and tools:\n")
	for _, s := range m.entries() {
		fmt.Fprintf(&b, "- %s (from mcptools import %s):", s.Name, s.Module)
		if len(s.Tools) == 0 {
			b.WriteString(" (unavailable now)")
		}
		b.WriteByte('\n')
		for _, t := range s.Tools {
			line := fmt.Sprintf("  %s.%s: %s%s\n", s.Module, t.Function, firstLine(t.Description, 100), approveNote(t))
			if b.Len()+len(line) > maxIndex-40 {
				b.WriteString("  ... (more: use tools_search)\n")
				return b.String()
			}
			b.WriteString(line)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (m *Manager) exampleModule() string {
	if len(m.conns) == 0 {
		return "server"
	}
	return m.conns[0].srv.Module
}

func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// maxSearch bounds the tools one Search returns.
const maxSearch = 20

// Search returns the Python signatures and docstrings of the allowed tools whose
// server, name or description contains query (any case); "" matches all. With
// javascript each also has its call in JavaScript.
func (m *Manager) Search(query string, javascript bool) string {
	q := strings.ToLower(query)
	var b strings.Builder
	n := 0
	for _, s := range m.entries() {
		for _, t := range s.Tools {
			if !strings.Contains(strings.ToLower(s.Name+" "+t.Name+" "+t.Description), q) {
				continue
			}
			if n++; n > maxSearch {
				fmt.Fprintf(&b, "... more than %d tools match: narrow the query\n", maxSearch)
				return b.String()
			}
			b.WriteString(pythonDoc(s, t))
			if javascript {
				b.WriteString(jsDoc(s, t))
			}
			b.WriteString("\n")
		}
	}
	if n == 0 {
		return fmt.Sprintf("no allowed tool matches %q", query)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// pythonDoc renders a tool as the module's function would read in Python.
func pythonDoc(s catalogServer, t catalogTool) string {
	props, required := schemaProps(t.InputSchema)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	var params, args []string
	for _, n := range names {
		p := props[n]
		typ := pyType(p["type"])
		if required[n] {
			params = append(params, n+": "+typ)
		} else {
			params = append(params, n+": "+typ+" = ...")
		}
		desc, _ := p["description"].(string)
		args = append(args, fmt.Sprintf("    %s (%s%s): %s", n, typ, map[bool]string{true: ", required"}[required[n]], firstLine(desc, 200)))
	}
	sig := "(" + strings.Join(append([]string{"*"}, params...), ", ") + ")"
	if len(params) == 0 {
		sig = "()"
	}
	out := fmt.Sprintf("from mcptools import %s\n%s.%s%s\n    %s%s\n", s.Module, s.Module, t.Function, sig, firstLine(t.Description, 500), approveNote(t))
	if len(args) > 0 {
		out += "  Arguments:\n" + strings.Join(args, "\n") + "\n"
	}
	return out
}

// jsImport is how a JavaScript program imports a server's module, and the name it
// then has (launcher/mcptools.mjs).
func jsImport(module string) (imp, ref string) {
	if launcher.JSNamedExport(module) {
		return "import { " + module + " } from \"mcptools\"", module
	}
	return "import mcptools from \"mcptools\"", fmt.Sprintf("mcptools[%q]", module)
}

// jsDoc is a tool's call in JavaScript, as mcptools.mjs's describe writes its
// signature: one object of arguments, the optional ones marked "?".
func jsDoc(s catalogServer, t catalogTool) string {
	props, required := schemaProps(t.InputSchema)
	names := slices.Sorted(maps.Keys(props))
	sort.SliceStable(names, func(i, j int) bool { return required[names[i]] && !required[names[j]] })
	for i, n := range names {
		if !required[n] {
			names[i] += "?"
		}
	}
	imp, ref := jsImport(s.Module)
	return fmt.Sprintf("  JavaScript: %s; await %s.%s({%s})\n", imp, ref, t.Function, strings.Join(names, ", "))
}

func schemaProps(schema any) (map[string]map[string]any, map[string]bool) {
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if b, err := json.Marshal(schema); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	return s.Properties, req
}

func pyType(t any) string {
	switch t {
	case "string":
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "array":
		return "list"
	case "object":
		return "dict"
	}
	return "Any"
}

// approveNote marks a tool whose calls wait for a human's approval.
func approveNote(t catalogTool) string {
	if !t.Approve {
		return ""
	}
	return " (each call asks the human for approval first; denied if the client cannot ask)"
}
