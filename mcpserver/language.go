package mcpserver

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// languageSchema sets exec's "language" property to the enum of Options.Languages, or
// drops it when none are configured (Python alone, the tool as it always was).
func languageSchema(s *jsonschema.Schema, o Options) {
	if len(o.Languages) == 0 {
		delete(s.Properties, "language")
		return
	}
	p := s.Properties["language"]
	p.Enum = nil
	for _, l := range o.Languages {
		p.Enum = append(p.Enum, l)
	}
	p.Default = []byte(`"` + launcher.LanguagePython + `"`)
	s.Properties["code"].Description = "The complete program to run, in \"language\" (Python when absent). Print results to stdout."
}

// languageDescription is what exec's description adds when languages are configured:
// what each one is run with and what is Python's alone.
func languageDescription(o Options) string {
	if len(o.Languages) == 0 {
		return ""
	}
	var lines []string
	for _, l := range o.Languages {
		switch l {
		case "bash":
			lines = append(lines, `"bash": the script runs with bash -e -o pipefail (it stops at the first failing command, of a pipeline too); coreutils, grep, sed, awk, jq, sqlite3, file, gzip, xz, zip and unzip are there (curl too, useful only with an egress profile).`)
		case "javascript":
			lines = append(lines, `"javascript": Node.js 20, standard library only (no npm packages); ES modules (import, top-level await) or CommonJS (require), told apart by the syntax.`)
		case "typescript":
			lines = append(lines, `"typescript": run as JavaScript by the same Node.js once esbuild has removed the types (no type checking); interfaces, enums, generics, import type, ES modules and top-level await work; stack traces name the TypeScript lines.`)
		}
	}
	tools := " Upstream tools are for Python only."
	if js := jsLanguages(o); len(js) > 0 {
		tools = fmt.Sprintf(` Upstream tools are for Python and %s (import { server } from "mcptools"; await server.tool({...})), not bash.`, strings.Join(js, " and "))
	}
	return fmt.Sprintf("\n\nLanguages: %q (the default) and, with \"language\", %s. Stdin, files in and /tmp/outputs, the limits and the result are the same for each; matplotlib figures are Python's. %s In a session every language keeps its own state (Python's and JavaScript's globals; bash's variables, functions and directory) and /tmp is shared.%s",
		launcher.LanguagePython, strings.Join(quoted(otherLanguages(o)), ", "), strings.Join(lines, " "), tools)
}

// languageTitle names what exec runs, for its title: "Python", or with other languages
// configured "Python, JavaScript or bash" (in their configured order).
func languageTitle(o Options) string {
	names := []string{"Python"}
	for _, l := range otherLanguages(o) {
		names = append(names, cmp.Or(languageNames[l], l))
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// whatRuns is the object of the description's first sentence: the Python program it
// always was, or with other languages configured a program in any of them.
func whatRuns(o Options, l runnerLimits) string {
	if len(otherLanguages(o)) == 0 {
		return fmt.Sprintf("Python 3 program (%s)", l.Python)
	}
	return fmt.Sprintf("program in %s (Python 3, %s, by default; \"language\" chooses, see Languages below)", languageTitle(o), l.Python)
}

// languageNames are the languages node runs, as titles and descriptions name them.
var languageNames = map[string]string{"javascript": "JavaScript", "typescript": "TypeScript"}

// jsLanguages are the configured languages node runs ("JavaScript", "TypeScript"): code
// mode's besides Python.
func jsLanguages(o Options) []string {
	var names []string
	for _, l := range o.Languages {
		if n := languageNames[l]; n != "" {
			names = append(names, n)
		}
	}
	return names
}

func otherLanguages(o Options) []string {
	return slices.DeleteFunc(slices.Clone(o.Languages), func(l string) bool { return l == launcher.LanguagePython })
}

func quoted(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return q
}

// checkLanguage refuses a language that is not configured (the schema's enum says so
// too, in the validator's words) and one that the call's other arguments, or the
// server's code mode, do not allow: code mode is Python's, JavaScript's and
// TypeScript's, in a session too.
func checkLanguage(in execInput, o Options) error {
	if in.Language == "" || in.Language == launcher.LanguagePython {
		return nil
	}
	if !slices.Contains(o.Languages, in.Language) {
		supported := append([]string{launcher.LanguagePython}, otherLanguages(o)...)
		return &invalidInput{"language", fmt.Sprintf("language %q is not available on this server; it runs %s (%s)",
			in.Language, strings.Join(quoted(supported), ", "), o.Vars.Var(SettingLanguages))}
	}
	if o.Upstreams != nil && in.Language != "javascript" && in.Language != "typescript" {
		runs := append([]string{"Python"}, jsLanguages(o)...)
		return &invalidInput{"language", fmt.Sprintf("language %q is not available while this server gives programs upstream tools (code mode): its exec runs %s only; write %s (leave language out for Python)",
			in.Language, strings.Join(runs, " and "), strings.Join(runs, " or "))}
	}
	return nil
}
