package launcher

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/wire"
)

// Job is one program to run in one fresh sandbox.
type Job struct {
	// Code is the program's source, in Language. It reaches the sandbox over the attached stdin
	// stream only: never in the container's command, environment, labels or files.
	Code string
	// Stdin is what the program reads from standard input; it travels like Code.
	Stdin string
	// Timeout is the wall-clock limit, counted from the moment the code has been
	// delivered. Zero means the launcher's default.
	Timeout time.Duration
	// Files are written into the working directory before the program starts. They
	// travel like Code.
	Files []File
	// Progress, when set, is called about once a second while the program runs, from
	// another goroutine.
	Progress func(Progress)
	// Tools, when set, lets the program call tools through the mcptools module
	// (bridge.go); their time counts against Timeout. nil: no module, and the
	// stream protocol is the one without tools.
	Tools *Tools
	// Language is the program's language: "" or LanguagePython, or one of
	// OtherLanguages (wire.Languages), whose interpreter boot.py starts in place of
	// Python. A program with Tools is Python's, JavaScript's or TypeScript's
	// (mcptools.mjs); one in a Session is Python's alone for now.
	Language string
	// Egress names the egress profile the program may use; "" (the
	// default) means no network at all. It is the operator's name, chosen from a
	// fixed list, and reaches the sandbox only as the channel's mount.
	Egress string
	// Audit names the call in the egress audit log of its channel (with Egress set):
	// the server's ids, never caller data.
	Audit backend.AuditLabel

	// internal marks the launcher's own checks, which are not counted as executions.
	internal bool
}

// LanguagePython is the default language: boot.py's own interpreter runs the program.
const LanguagePython = "python"

// OtherLanguages are the languages besides Python a Job may name (the image must carry
// their interpreters: bash, node, and esbuild for TypeScript).
var OtherLanguages = slices.Clone(wire.Languages)

// ErrLanguage: the job's language is unknown, or not available with what else the job
// asks for (tools, a session).
var ErrLanguage = errors.New("language not supported")

func (j Job) python() bool { return j.Language == "" || j.Language == LanguagePython }

// javaScript: node runs the program, TypeScript once esbuild has stripped its types.
func (j Job) javaScript() bool { return j.Language == "javascript" || j.Language == "typescript" }

// checkLanguage refuses a language the bootstrap does not know, and tools for a
// program that is neither Python nor JavaScript or TypeScript (mcptools.py,
// mcptools.mjs).
func (j Job) checkLanguage() error {
	if j.python() {
		return nil
	}
	if !slices.Contains(OtherLanguages, j.Language) {
		return fmt.Errorf("%w: %q (supported: %s, %s)", ErrLanguage, j.Language, LanguagePython, strings.Join(OtherLanguages, ", "))
	}
	if j.Tools != nil && !j.javaScript() {
		return fmt.Errorf("%w: tools are for Python, JavaScript and TypeScript programs only, not %s", ErrLanguage, j.Language)
	}
	return nil
}

// Result is what the program did. A non-zero exit, a timeout or an OOM kill is a
// normal Result, not an error.
type Result struct {
	Stdout   string // valid UTF-8
	Stderr   string // valid UTF-8
	ExitCode int    // the program's exit status; 128+N when killed by signal N
	// Signal is the number of the signal that ended the program, or 0.
	Signal    int
	Duration  time.Duration // from code delivered to program finished
	Truncated bool          // stdout+stderr exceeded the output cap
	TimedOut  bool          // killed by the wall-clock timeout
	OOMKilled bool          // the kernel killed a process of the program for memory
	// Files are what the program left in OutputDir (and its open matplotlib figures),
	// in name order. Files past a cap are listed with Skipped set and no Data.
	Files []OutputFile
	// QueueWait is how long the job waited for a free slot; it is not part of the
	// timeout.
	QueueWait time.Duration
	// EngineWait is how long the job waited for an engine that had gone away; it is
	// not part of the timeout either.
	EngineWait time.Duration
	// Timing says where the rest of the call's time went (metadata only).
	Timing Timing
	// SessionState is what a session kept after the call (SessionKept,
	// SessionRolledBack, SessionLost); "" for Run.
	SessionState string
	// LostLanguage, with SessionLost, names the language whose state alone the call
	// lost ("javascript": its node process went with the call); the session's sandbox,
	// its other languages' state and its files stay. "" when the whole session went.
	LostLanguage string
}

// SessionGone says whether the call lost the whole session (its sandbox is replaced by
// the next call), not only one language's state.
func (r Result) SessionGone() bool { return r.SessionState == SessionLost && r.LostLanguage == "" }

// Timing is where a Run's time went inside the launcher, for debug logs and
// benchmarks. Together with QueueWait and Duration it accounts for the call.
type Timing struct {
	// Warm: the sandbox came from the warm pool (or was a refill the call waited for),
	// not started for this call.
	Warm bool
	// Take is getting a sandbox: taking it from the pool, or creating, attaching and
	// starting one.
	Take time.Duration
	// Create and Start are the backend's create and start (attach included) of a
	// sandbox started for this call; zero when Warm.
	Create, Start time.Duration
	// Deliver is writing the code header, the code and the input files.
	Deliver time.Duration
}

// File is an input file for the program.
type File struct {
	Name string // relative path: no leading "/", no "." or ".." parts; validated by the caller
	Data []byte
}

// OutputFile is a file the program left in OutputDir.
type OutputFile struct {
	Name    string // path relative to OutputDir
	Size    int64
	Data    []byte // nil when Skipped
	Skipped string // why the file was not returned, e.g. over a cap
}

// Progress is what a running program has done so far.
type Progress struct {
	Elapsed     time.Duration
	OutputBytes int64  // stdout+stderr bytes written so far, kept or not
	Tail        string // the last lines of output, valid UTF-8, at most about 512 bytes
	// StdoutTail and StderrTail are Tail for each stream alone.
	StdoutTail, StderrTail string
}

// OutputDir is where a program leaves files to be returned, inside its private /tmp.
const OutputDir = "/tmp/outputs"

// Errors a Runner reports for infrastructure failures, to be matched with errors.Is.
// Their text is written for the person who deploys the server.
var (
	// ErrEngineUnavailable: the container engine did not answer.
	ErrEngineUnavailable = backend.ErrEngineUnavailable
	// ErrImageMissing: the sandbox image is not present in the engine.
	ErrImageMissing = backend.ErrImageMissing
	// ErrSandbox: the sandbox started but broke its protocol (for example the
	// interpreter is missing from the image).
	ErrSandbox = errors.New("sandbox failed")
	// ErrClosed: the launcher is shutting down and takes no new jobs.
	ErrClosed = errors.New("launcher closed")
)
