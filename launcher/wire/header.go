package wire

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Version is the protocol's version: the digit of the one-shot header's magic.
const Version = 2

// Kill is a session's interrupt: the bootstrap kills the running cell.
const Kill = "MCPEXECK\n"

// Cancel is Kill for a call whose result reaches no one (its caller went away, or
// run_cancel): the bootstrap says what the kill lost (the JavaScript state) in the
// session's next JavaScript call instead, which it alone is sure to see (another
// replica may serve it).
const Cancel = "MCPEXECK cancel\n"

// ExecHeader starts a one-shot exec without tools: code bytes, then files bytes, then
// the program's stdin until the stream's end.
func ExecHeader(code, files int) string {
	return "MCPEXEC2 " + strconv.Itoa(code) + " " + strconv.Itoa(files) + "\n"
}

// Languages are the languages besides Python that ExecLanguageHeader may name (boot.py's
// LANGUAGES, which holds each one's interpreter).
var Languages = []string{"bash", "javascript", "typescript"}

// ExecLanguageHeader is ExecHeader for a program in one of Languages: its name goes
// last. Python is ExecHeader itself.
func ExecLanguageHeader(language string, code, files int) string {
	return "MCPEXEC2 " + strconv.Itoa(code) + " " + strconv.Itoa(files) + " " + language + "\n"
}

// ToolsHeader starts a one-shot exec with tools: code, files, tools (ToolsBlob) and
// exactly stdin bytes; the rest of the stream carries only Y frames.
func ToolsHeader(code, files, tools, stdin int) string {
	return "MCPEXEC3 " + strconv.Itoa(code) + " " + strconv.Itoa(files) + " " +
		strconv.Itoa(tools) + " " + strconv.Itoa(stdin) + "\n"
}

// ToolsLanguageHeader is ToolsHeader for a program in JavaScript or TypeScript, whose
// name goes last (boot.py gives it mcptools.mjs in place of mcptools.py).
func ToolsLanguageHeader(language string, code, files, tools, stdin int) string {
	return strings.TrimSuffix(ToolsHeader(code, files, tools, stdin), "\n") + " " + language + "\n"
}

// CellHeader starts one call in a session: code, files and exactly stdin bytes.
func CellHeader(code, files, stdin int) string {
	return "MCPEXECS " + strconv.Itoa(code) + " " + strconv.Itoa(files) + " " + strconv.Itoa(stdin) + "\n"
}

// CellLanguageHeader is CellHeader for a call in one of Languages: its name goes last.
func CellLanguageHeader(language string, code, files, stdin int) string {
	return strings.TrimSuffix(CellHeader(code, files, stdin), "\n") + " " + language + "\n"
}

// CellToolsHeader starts one call in a session with tools (code mode): code, files,
// tools (ToolsBlob) and exactly stdin bytes; until the call's exit frame the stream
// carries Y frames (and Kill), which the bootstrap hands to that call alone.
func CellToolsHeader(code, files, tools, stdin int) string {
	return "MCPEXECT " + strconv.Itoa(code) + " " + strconv.Itoa(files) + " " +
		strconv.Itoa(tools) + " " + strconv.Itoa(stdin) + "\n"
}

// CellToolsLanguageHeader is CellToolsHeader for a call in JavaScript or TypeScript, whose name goes
// last (boot.py hands the call to the session's node with mcptools.mjs).
func CellToolsLanguageHeader(language string, code, files, tools, stdin int) string {
	return strings.TrimSuffix(CellToolsHeader(code, files, tools, stdin), "\n") + " " + language + "\n"
}

// KeptHeader starts a session's kept call (a background run on Kubernetes): as
// CellHeader, but the bootstrap keeps the call's frames in its memory for Fetch rather
// than writing them, and kills the call itself after timeoutMs milliseconds.
func KeptHeader(code, files, stdin int, timeoutMs int64) string {
	return "MCPEXECB " + strconv.Itoa(code) + " " + strconv.Itoa(files) + " " + strconv.Itoa(stdin) + " " +
		strconv.FormatInt(timeoutMs, 10) + "\n"
}

// Fetch asks for a kept call's frames: its progress (O, E, P frames) while it runs, all
// its frames (up to the X frame) once it has ended, as often as asked.
const Fetch = "MCPEXECF\n"

// TailSize is how many bytes of each stream a progress answer carries at most.
const TailSize = 512

// GateLine opens a Kubernetes pod's start gate with its seal key (hex).
func GateLine(key string) string { return key + "\n" }

// ResealLine gives a shared session's bootstrap a new seal key (hex), between cells.
func ResealLine(key string) string { return "MCPEXECR " + key + "\n" }

// AppendFile appends one input file as a header's files bytes carry it: u32 name
// length, name, u32 size, content.
func AppendFile(b []byte, name string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// ToolsBlob is a Tools header's tools bytes: u32 length of the mcptools module's
// source, the source, the catalog JSON.
func ToolsBlob(module string, catalog []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(module)))
	b = append(b, module...)
	return append(b, catalog...)
}

// ReplyFrame is a Y frame: the reply to the call id.
func ReplyFrame(id uint32, reply []byte) []byte {
	f := make([]byte, 0, 9+len(reply))
	f = append(f, FrameReply)
	f = binary.BigEndian.AppendUint32(f, uint32(4+len(reply)))
	f = binary.BigEndian.AppendUint32(f, id)
	return append(f, reply...)
}

// KeptLanguageHeader is KeptHeader for a call in one of Languages: its name goes last.
func KeptLanguageHeader(language string, code, files, stdin int, timeoutMs int64) string {
	return strings.TrimSuffix(KeptHeader(code, files, stdin, timeoutMs), "\n") + " " + language + "\n"
}
