package wire

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBootSpeaksThisWire: the Python side of the wire (boot.py's wire section) names the
// same frame kinds and header magics as this package, so that neither side can change one
// alone.
func TestBootSpeaksThisWire(t *testing.T) {
	src, err := os.ReadFile("../boot.py")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^((?:FRAME|HEADER)_[A-Z_]+) = b"([^"]*)"$`).FindAllStringSubmatch(string(src), -1) {
		got[m[1]] = m[2]
	}
	magic := func(header string) string { return strings.Fields(header)[0] }
	want := map[string]string{
		"FRAME_READY":       string(rune(FrameReady)),
		"FRAME_STDOUT":      string(rune(FrameStdout)),
		"FRAME_STDERR":      string(rune(FrameStderr)),
		"FRAME_FILE":        string(rune(FrameFile)),
		"FRAME_EXIT":        string(rune(FrameExit)),
		"FRAME_FATAL":       string(rune(FrameFatal)),
		"FRAME_CALL":        string(rune(FrameCall)),
		"FRAME_REPLY":       string(rune(FrameReply)),
		"FRAME_PROGRESS":    string(rune(FrameProgress)),
		"HEADER_EXEC":       magic(ExecHeader(0, 0)),
		"HEADER_TOOLS":      magic(ToolsHeader(0, 0, 0, 0)),
		"HEADER_CELL":       magic(CellHeader(0, 0, 0)),
		"HEADER_CELL_TOOLS": magic(CellToolsHeader(0, 0, 0, 0)),
		"HEADER_KILL":       magic(Kill),
		"HEADER_RESEAL":     magic(ResealLine("k")),
		"HEADER_KEPT":       magic(KeptHeader(0, 0, 0, 0)),
		"HEADER_FETCH":      magic(Fetch),
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("boot.py %s: got %q (defined: %v), want %q", name, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("boot.py defines %d FRAME_/HEADER_ constants, want %d: %v", len(got), len(want), got)
	}
	if m := regexp.MustCompile(`(?m)^TAIL = (\d+)$`).FindStringSubmatch(string(src)); m == nil || m[1] != strconv.Itoa(TailSize) {
		t.Errorf("boot.py TAIL: got %v, want %d", m, TailSize)
	}
	if !strings.HasPrefix(ExecHeader(0, 0), "MCPEXEC"+string(rune('0'+Version))+" ") {
		t.Errorf("ExecHeader %q does not carry Version %d", ExecHeader(0, 0), Version)
	}
	block := regexp.MustCompile(`(?ms)^LANGUAGES = \{\n(.*?)^\}`).FindStringSubmatch(string(src))
	var langs []string
	if block != nil {
		for _, m := range regexp.MustCompile(`(?m)^    b"([a-z]+)": \[`).FindAllStringSubmatch(block[1], -1) {
			langs = append(langs, m[1])
		}
	}
	if !slices.Equal(langs, Languages) {
		t.Errorf("boot.py LANGUAGES: got %q, want %q", langs, Languages)
	}
	if m := regexp.MustCompile(`(?m)^\s+if buf\[0:1\] != b"(.)"`).FindStringSubmatch(mustRead(t, "../mcptools.py")); m == nil || m[1] != string(rune(FrameReply)) {
		t.Errorf("mcptools.py: got reply frame kind %v, want %q", m, FrameReply)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
