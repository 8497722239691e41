package mcpserver

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// toolName is the one tool this server offers.
const toolName = "exec"

// execInput is the tool's arguments. The schema the SDK validates against is
// inferred from it (see inputSchema), and struct inference already forbids
// unknown properties.
type execInput struct {
	Code string `json:"code" jsonschema:"The complete Python program to run. Print results to stdout."`
	// Language is in the schema only when languages are configured (language.go).
	Language string `json:"language,omitempty" jsonschema:"The language of code (languageSchema fills in the names)."`
	// TimeoutS is a pointer so that an explicit 0 (invalid) differs from absent
	// (the default).
	TimeoutS *wholeSeconds `json:"timeout_s,omitempty" jsonschema:"Wall-clock limit in whole seconds (inputSchema fills in the numbers)."`
	Stdin    string        `json:"stdin,omitempty" jsonschema:"Text the program reads from standard input. Optional; empty when absent."`
	Files    []inputFile   `json:"files,omitempty" jsonschema:"Input files (inputSchema fills in the limits)."`
	Egress   string        `json:"egress,omitempty" jsonschema:"An egress profile's name (egressSchema fills in the names, or drops the field)."`
	// SessionID is in the schema only when sessions are on (sessions.go).
	SessionID string `json:"session_id,omitempty" jsonschema:"Run in this session (from session_create) instead of a new sandbox: the program sees what the session's earlier calls left. Optional."`
	// Background is in the schema only when background runs are on (runs.go).
	Background bool `json:"background,omitempty" jsonschema:"Answer at once with a run_id and let the program run on, even if this client disconnects; run_wait gives its result. Optional. With session_id the session stays busy until the run ends."`
}

// execOutput is the structured result. No omitempty: a model should always
// see every field, including exit_code 0 and the false flags.
type execOutput struct {
	Stdout     string `json:"stdout" jsonschema:"What the program wrote to standard output."`
	Stderr     string `json:"stderr" jsonschema:"What the program wrote to standard error (tracebacks land here)."`
	ExitCode   int    `json:"exit_code" jsonschema:"The program's exit status; 128+N when killed by signal N."`
	DurationMS int64  `json:"duration_ms" jsonschema:"How long the program ran, in milliseconds."`
	Truncated  bool   `json:"truncated" jsonschema:"True when stdout and stderr together exceeded the output cap and were cut."`
	TimedOut   bool   `json:"timed_out" jsonschema:"True when the program was killed for exceeding its timeout."`
	OOMKilled  bool   `json:"oom_killed" jsonschema:"True when the program was killed for running out of memory."`
	// Files is never nil, so that it is always an array on the wire.
	Files []fileInfo `json:"files" jsonschema:"Every file the program left in /tmp/outputs (open matplotlib figures among them, as figure-N.png), in name order; the returned ones follow the text as image or resource content, in this order."`
	// Session is set for a call with session_id (sessions.go).
	Session *sessionInfo `json:"session,omitempty" jsonschema:"The session the call ran in, for a call with session_id."`
}

// wholeSeconds is timeout_s. The schema has already checked that it is a
// whole number, but not that it fits an int64: the SDK re-encodes arguments
// through float64, so 1e300 arrives as "1e+300". Saturating here lets such
// values be capped like any other too-large timeout instead of failing with a
// decoder message that names Go types.
type wholeSeconds int64

func (s *wholeSeconds) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("timeout_s is %s; it must be a whole number of seconds", b)
	}
	switch {
	case f >= math.MaxInt64:
		*s = math.MaxInt64
	case f <= math.MinInt64:
		*s = math.MinInt64
	default:
		*s = wholeSeconds(f)
	}
	return nil
}

// inputSchema is the schema inferred from execInput with two corrections.
// The inferred type of a pointer field is ["null","integer"], and we want
// models to see (and the validator to enforce) a plain integer. And the
// timeout_s description states the configured range, which a struct tag can't.
// There is deliberately no minimum: our own check gives a clearer message.
func inputSchema(o Options) *jsonschema.Schema {
	s, err := jsonschema.For[execInput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: inferring input schema: %v", err)) // a bug in execInput
	}
	ts := s.Properties["timeout_s"]
	ts.Types, ts.Type = nil, "integer"
	ts.Description = fmt.Sprintf("Wall-clock limit in whole seconds, from 1 to %s. Optional; absent means %s. Larger values are lowered to %s.",
		seconds(o.MaxTimeout), seconds(o.DefaultTimeout), seconds(o.MaxTimeout))
	// files is a plain array, like timeout_s a plain integer. Its limits are
	// stated but not encoded (no maxItems): our own checks give clearer messages.
	fs := s.Properties["files"]
	fs.Types, fs.Type = nil, "array"
	fs.Description = fmt.Sprintf("Files to create in the working directory (/tmp) before the program starts. Optional. At most %d files, %s each and %s together (decoded).",
		o.MaxFiles, size(o.MaxFileBytes), size(o.MaxFilesBytes))
	enc := fs.Items.Properties["encoding"]
	enc.Enum = []any{encodingUTF8, encodingBase64}
	enc.Default = json.RawMessage(`"` + encodingUTF8 + `"`)
	egressSchema(s, o)
	languageSchema(s, o)
	if !sessionsOn(o) {
		delete(s.Properties, "session_id")
	}
	if o.Runs.Max <= 0 {
		delete(s.Properties, "background")
	}
	return s
}

// outputSchema is the schema inferred from execOutput, with files a plain
// array: it is never null.
func outputSchema() *jsonschema.Schema {
	s, err := jsonschema.For[execOutput](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: inferring output schema: %v", err)) // a bug in execOutput
	}
	fs := s.Properties["files"]
	fs.Types, fs.Type = nil, "array"
	return s
}

// invalidInput is a rejected argument. Its message names the field and the
// limit so the model can fix the call; field alone is what gets logged.
type invalidInput struct {
	field string
	msg   string
}

func (e *invalidInput) Error() string { return e.msg }

// newJob checks in against the limits and builds the job the runner gets.
func newJob(in execInput, o Options) (launcher.Job, error) {
	if strings.TrimSpace(in.Code) == "" {
		return launcher.Job{}, &invalidInput{"code", `code is empty: send the program to run in "code"`}
	}
	if err := checkSize("code", in.Code, o.MaxCodeBytes, o.Vars.Var(SettingMaxCodeBytes)); err != nil {
		return launcher.Job{}, err
	}
	if err := checkSize("stdin", in.Stdin, o.MaxStdinBytes, o.Vars.Var(SettingMaxStdinBytes)); err != nil {
		return launcher.Job{}, err
	}
	timeout, err := effectiveTimeout(in.TimeoutS, o)
	if err != nil {
		return launcher.Job{}, err
	}
	files, err := newFiles(in.Files, o)
	if err != nil {
		return launcher.Job{}, err
	}
	if err := checkEgress(in.Egress, o); err != nil {
		return launcher.Job{}, err
	}
	if err := checkLanguage(in, o); err != nil {
		return launcher.Job{}, err
	}
	if in.Egress != "" && in.SessionID != "" {
		// A session's channel is bound to the profile session_create named, when its
		// sandbox was made: a call cannot change it (nor add one to a session without).
		return launcher.Job{}, &invalidInput{"egress", "egress cannot be used with session_id: a session's egress profile is fixed at session_create, and every call in the session uses it; leave egress out, or call session_create with the egress you need"}
	}
	return launcher.Job{Code: in.Code, Stdin: in.Stdin, Timeout: timeout, Files: files, Egress: in.Egress, Language: in.Language}, nil
}

func checkSize(field, s string, limit int, setting string) error {
	if len(s) <= limit {
		return nil
	}
	msg := fmt.Sprintf("%s is %d bytes; the limit is %d bytes (%s)", field, len(s), limit, setting)
	return &invalidInput{field, msg}
}

// effectiveTimeout applies the default and the cap. It compares seconds
// before multiplying, because a huge timeout_s times time.Second would
// overflow time.Duration into a negative or tiny value.
func effectiveTimeout(secs *wholeSeconds, o Options) (time.Duration, error) {
	if secs == nil {
		return o.DefaultTimeout, nil
	}
	maxS := wholeSeconds(o.MaxTimeout / time.Second)
	if *secs < 1 {
		msg := fmt.Sprintf("timeout_s is %d; it must be a whole number of seconds from 1 to %d (absent means %s)",
			*secs, maxS, seconds(o.DefaultTimeout))
		return 0, &invalidInput{"timeout_s", msg}
	}
	if *secs >= maxS {
		return o.MaxTimeout, nil
	}
	return time.Duration(*secs) * time.Second, nil
}

// seconds renders d as a number of seconds without a unit, e.g. "30" or "1.5".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// size renders a byte count the way a person would write a limit.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// description is written for the model choosing and calling the tool: what
// it can import, what it cannot do, how files go in and out, and the limits it
// will run into.
func description(o Options, l runnerLimits) string {
	return baseDescription(o, l) + languageDescription(o) + egressDescription(o)
}

func baseDescription(o Options, l runnerLimits) string {
	return fmt.Sprintf(`Run a %s in a fresh, locked-down sandbox and return its stdout, stderr, exit code and the files it writes to /tmp/outputs.

Available: the Python standard library plus PyYAML, Jinja2, Pillow, numpy, pandas and matplotlib (headless, Agg backend).

Isolation: there is no network at all (no pip install, no HTTP, no DNS). Nothing persists between calls: each call runs in a new container, so every call must define and import everything it needs, and pass again any file it needs. The working directory /tmp is private and writable; the rest of the filesystem is read-only.

Input: put the whole program in "code". Pass data for standard input in "stdin" (stdin is empty otherwise). To give the program files, list them in "files" as {"name": "data.csv", "content": "..."} (add "encoding": "base64" for binary content): they appear in the working directory /tmp under those relative names before the program starts, so open("data.csv") works.

Output: print results to stdout. Files the program writes to /tmp/outputs (it exists; subdirectories are fine) come back to you when it ends: PNG, JPEG, GIF and WebP files as images, other files as embedded resources (as text when they are text). Open matplotlib figures come back as PNG images by themselves, whether the program calls plt.show() or just leaves them open; there is no need to save them.

Limits: timeout_s defaults to %s s and is capped at %s s. stdout and stderr together are capped at %s; beyond that they are cut and "truncated" is true. code is limited to %s and stdin to %s. Input files: at most %d, each at most %s and %s together (decoded). Files in /tmp/outputs come back up to %s each and %s together; the others are listed with the reason but not returned.

Result: stdout, stderr, exit_code, duration_ms, truncated, timed_out, oom_killed, and files (every file found in /tmp/outputs: name, mime_type, size, returned, reason). A program that fails (non-zero exit_code, timed_out, oom_killed) is a normal result: read stderr and fix the code. A tool error means the arguments were invalid (the message says which limit or rule) or the sandbox itself is unavailable (retrying with other code will not help).`,
		whatRuns(o, l), seconds(o.DefaultTimeout), seconds(o.MaxTimeout),
		size(l.MaxOutputBytes), size(o.MaxCodeBytes), size(o.MaxStdinBytes),
		o.MaxFiles, size(o.MaxFileBytes), size(o.MaxFilesBytes),
		size(l.MaxOutputFileBytes), size(l.MaxOutputFilesBytes))
}

// annotations: the tool changes nothing outside its own throwaway sandbox
// (not destructive, closed world), but it is not read-only or idempotent in
// the MCP sense: programs may be random or time-dependent. The title names the
// languages (languageTitle).
func annotations(o Options) *mcp.ToolAnnotations {
	f := false
	return &mcp.ToolAnnotations{
		Title:           "Run " + languageTitle(o) + " in a sandbox",
		ReadOnlyHint:    false,
		DestructiveHint: &f,
		IdempotentHint:  false,
		OpenWorldHint:   &f,
	}
}
