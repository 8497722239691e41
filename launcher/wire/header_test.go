package wire

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestGolden: each encoder's bytes are those the server wrote before this package
// existed (testdata/golden.txt, recorded from the code it replaced): the protocol has
// not changed under the bootstrap's feet.
func TestGolden(t *testing.T) {
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	code, stdin := "print('héllo')\n", "in put\n"
	files := AppendFile(nil, "a.txt", []byte("hi"))
	files = AppendFile(files, "dir/b", nil)
	files = AppendFile(files, "c", []byte{0, 1, 2, 255})
	tools := ToolsBlob("# module\n", []byte(`{"servers":[]}`))
	got := map[string][]byte{
		"files":         files,
		"files-none":    nil,
		"exec":          []byte(ExecHeader(len(code), len(files))),
		"exec-empty":    []byte(ExecHeader(0, 0)),
		"exec-bash":     []byte(ExecLanguageHeader("bash", len(code), len(files))),
		"tools-blob":    tools,
		"tools":         []byte(ToolsHeader(len(code), len(files), len(tools), len(stdin))),
		"cell":          []byte(CellHeader(len(code), len(files), len(stdin))),
		"cell-empty":    []byte(CellHeader(0, 0, 0)),
		"cell-tools":    []byte(CellToolsHeader(len(code), len(files), len(tools), len(stdin))),
		"cell-tools-js": []byte(CellToolsLanguageHeader("javascript", len(code), len(files), len(tools), len(stdin))),
		"kill":          []byte(Kill),
		"gate":          []byte(GateLine(key)),
		"reseal":        []byte(ResealLine(key)),
		"reply":         ReplyFrame(0x01020304, []byte(`{"result":1}`)),
	}
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		name, want, _ := strings.Cut(sc.Text(), " ")
		b, ok := got[name]
		if !ok {
			t.Errorf("golden %q: no encoder in the test", name)
			continue
		}
		seen++
		if g := hex.EncodeToString(b); g != want {
			t.Errorf("%s: got %s, want %s", name, g, want)
		}
	}
	if seen != len(got) {
		t.Errorf("got %d golden entries, want %d", seen, len(got))
	}
}
