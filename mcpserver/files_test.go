package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// Minimal file heads: enough for the signature checks.
var (
	pngHead  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpegHead = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	gifHead  = []byte("GIF89a\x01\x00\x01\x00")
	webpHead = []byte("RIFF\x24\x00\x00\x00WEBPVP8 ")
)

func TestCallFilesOut(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{})
	notUTF8 := []byte("caf\xe9\n")
	r.set(launcher.Result{Stdout: "done\n", Duration: 5e6, Files: []launcher.OutputFile{
		{Name: "a.csv", Size: 8, Data: []byte("x,y\n1,2\n")},
		{Name: "big.bin", Size: 9 << 20, Skipped: "over the per-file cap of 8388608 bytes"},
		{Name: "data.json", Size: 9, Data: []byte(`{"a": 1}` + "\n")},
		{Name: "empty.txt", Size: 0, Data: []byte{}},
		{Name: "figure-1.png", Size: int64(len(pngHead)), Data: pngHead},
		{Name: "latin1.txt", Size: int64(len(notUTF8)), Data: notUTF8},
		{Name: "misnamed.dat", Size: int64(len(gifHead)), Data: gifHead},
		{Name: "photo.jpg", Size: int64(len(jpegHead)), Data: jpegHead},
		{Name: "plot.svg", Size: 11, Data: []byte("<svg></svg>")},
		{Name: "raw.bin", Size: 4, Data: []byte{0, 1, 2, 0xff}},
		{Name: "sub dir/ü #1?.webp", Size: int64(len(webpHead)), Data: webpHead},
		{Name: "truncated.png", Size: 3, Data: []byte("abc")},
		{Name: "weird\nname.txt", Size: 2, Data: []byte("hi")},
	}}, nil)
	res := call(t, t.Context(), cs, `{"code":"x"}`)
	if res.IsError {
		t.Fatalf("isError: got true, want false")
	}

	// Content: the text first, then one block per returned file, in order.
	type block struct {
		Type, MIMEType, URI, Text string
		Data, Blob                []byte
	}
	var got []block
	for _, c := range res.Content[1:] {
		switch c := c.(type) {
		case *mcp.ImageContent:
			got = append(got, block{Type: "image", MIMEType: c.MIMEType, Data: c.Data})
		case *mcp.EmbeddedResource:
			got = append(got, block{Type: "resource", MIMEType: c.Resource.MIMEType, URI: c.Resource.URI, Text: c.Resource.Text, Blob: c.Resource.Blob})
		default:
			t.Errorf("content block %T, want image or resource", c)
		}
	}
	want := []block{
		{Type: "resource", MIMEType: "text/csv; charset=utf-8", URI: "file:///tmp/outputs/a.csv", Text: "x,y\n1,2\n"},
		{Type: "resource", MIMEType: "application/json", URI: "file:///tmp/outputs/data.json", Text: "{\"a\": 1}\n"},
		{Type: "resource", MIMEType: "text/plain; charset=utf-8", URI: "file:///tmp/outputs/empty.txt", Blob: []byte{}},
		{Type: "image", MIMEType: "image/png", Data: pngHead},
		{Type: "resource", MIMEType: "text/plain; charset=utf-8", URI: "file:///tmp/outputs/latin1.txt", Blob: notUTF8},
		{Type: "image", MIMEType: "image/gif", Data: gifHead},
		{Type: "image", MIMEType: "image/jpeg", Data: jpegHead},
		{Type: "resource", MIMEType: "image/svg+xml", URI: "file:///tmp/outputs/plot.svg", Text: "<svg></svg>"},
		{Type: "resource", MIMEType: "application/octet-stream", URI: "file:///tmp/outputs/raw.bin", Blob: []byte{0, 1, 2, 0xff}},
		{Type: "image", MIMEType: "image/webp", Data: webpHead},
		{Type: "resource", MIMEType: "image/png", URI: "file:///tmp/outputs/truncated.png", Blob: []byte("abc")}, // no signature: not an image
		{Type: "resource", MIMEType: "text/plain; charset=utf-8", URI: "file:///tmp/outputs/weird%0Aname.txt", Text: "hi"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file content blocks (-want +got):\n%s", diff)
	}

	// The escaped URI of the nested file, checked on the wire too.
	raw, err := json.Marshal(res.Content)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"blob":null`) {
		t.Errorf("content JSON has a null blob: %s", raw)
	}

	out := structured(t, res)
	wantFiles := []fileInfo{
		{Name: "a.csv", MIMEType: "text/csv; charset=utf-8", Size: 8, Returned: true},
		{Name: "big.bin", MIMEType: "application/octet-stream", Size: 9 << 20, Reason: "over the per-file cap of 8388608 bytes"},
		{Name: "data.json", MIMEType: "application/json", Size: 9, Returned: true},
		{Name: "empty.txt", MIMEType: "text/plain; charset=utf-8", Size: 0, Returned: true},
		{Name: "figure-1.png", MIMEType: "image/png", Size: int64(len(pngHead)), Returned: true},
		{Name: "latin1.txt", MIMEType: "text/plain; charset=utf-8", Size: 5, Returned: true},
		{Name: "misnamed.dat", MIMEType: "image/gif", Size: int64(len(gifHead)), Returned: true},
		{Name: "photo.jpg", MIMEType: "image/jpeg", Size: int64(len(jpegHead)), Returned: true},
		{Name: "plot.svg", MIMEType: "image/svg+xml", Size: 11, Returned: true},
		{Name: "raw.bin", MIMEType: "application/octet-stream", Size: 4, Returned: true},
		{Name: "sub dir/ü #1?.webp", MIMEType: "image/webp", Size: int64(len(webpHead)), Returned: true},
		{Name: "truncated.png", MIMEType: "image/png", Size: 3, Returned: true},
		{Name: "weird\nname.txt", MIMEType: "text/plain; charset=utf-8", Size: 2, Returned: true},
	}
	if diff := cmp.Diff(wantFiles, out.Files); diff != "" {
		t.Errorf("structured files (-want +got):\n%s", diff)
	}

	txt := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{
		"--- stdout ---\ndone\n--- stderr (empty) ---\n--- files in /tmp/outputs (13) ---\n",
		"a.csv (text/csv; charset=utf-8, 8 bytes): returned as a resource\n",
		"big.bin (9437184 bytes): NOT returned: over the per-file cap of 8388608 bytes\n",
		"figure-1.png (image/png, 16 bytes): returned as an image\n",
		"sub dir/ü #1?.webp (image/webp, 16 bytes): returned as an image\n",
		"truncated.png (image/png, 3 bytes): returned as a resource\n",
		`"weird\nname.txt" (text/plain; charset=utf-8, 2 bytes): returned as a resource`,
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text block:\n%s\nwant it to contain %q", txt, want)
		}
	}
}

// TestFileURIEscapesSegments checks the nested, oddly named file's address.
func TestFileURIEscapesSegments(t *testing.T) {
	tests := []struct{ name, want string }{
		{"a.csv", "file:///tmp/outputs/a.csv"},
		{"sub dir/ü #1?.webp", "file:///tmp/outputs/sub%20dir/%C3%BC%20%231%3F.webp"},
		{"a/b/c%.txt", "file:///tmp/outputs/a/b/c%25.txt"},
	}
	for _, tt := range tests {
		if got := fileURI(tt.name); got != tt.want {
			t.Errorf("fileURI(%q): got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDetectType(t *testing.T) {
	tests := []struct {
		name      string
		data      []byte
		wantType  string
		wantImage bool
	}{
		{"x.png", pngHead, "image/png", true},
		{"x", pngHead, "image/png", true},
		{"x.txt", jpegHead, "image/jpeg", true}, // the signature wins
		{"x.gif", []byte("GIF87a"), "image/gif", true},
		{"x.webp", []byte("RIFF"), "image/webp", false}, // too short for the signature: typed by extension, not an image
		{"x.JPG", []byte("??"), "image/jpeg", false},
		{"x.png", []byte{}, "image/png", false},
		{"x.bmp", []byte("BM"), "image/bmp", false}, // not a type clients show
		{"noext", []byte("plain words\n"), "text/plain; charset=utf-8", false},
		{"noext", []byte{0, 0, 0}, "application/octet-stream", false},
		{"x.csv", []byte("a,b\n"), "text/csv; charset=utf-8", false},
		{"x.pdf", []byte("%PDF-1.7"), "application/pdf", false},
		{"x.html", []byte("<p>"), "text/html; charset=utf-8", false},
	}
	for _, tt := range tests {
		gotType, gotImage := detectType(tt.name, tt.data)
		if gotType != tt.wantType || gotImage != tt.wantImage {
			t.Errorf("detectType(%q, %q): got (%q, %t), want (%q, %t)", tt.name, tt.data, gotType, gotImage, tt.wantType, tt.wantImage)
		}
	}
}

func TestIsText(t *testing.T) {
	for mt, want := range map[string]bool{
		"text/plain; charset=utf-8": true, "text/csv": true, "application/json": true, "application/ld+json": true,
		"application/xml": true, "image/svg+xml": true, "application/yaml": true, "application/x-ndjson": true,
		"application/octet-stream": false, "image/png": false, "application/pdf": false, "": false, "bad type": false,
	} {
		if got := isText(mt); got != want {
			t.Errorf("isText(%q): got %t, want %t", mt, got, want)
		}
	}
}

func TestCallFilesIn(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{MaxFiles: 4, MaxFileBytes: 10, MaxFilesBytes: 20})
	b64 := base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff, 0xfe})
	args := `{"code":"x","files":[` +
		`{"name":"data.csv","content":"a,b\n1,2\n"},` +
		`{"name":"in/bin.dat","content":"` + b64 + `","encoding":"base64"},` +
		`{"name":"outputs/echo.txt","content":"é","encoding":"utf-8"},` +
		`{"name":"in/.hidden ünï","content":""}]}`
	res := call(t, t.Context(), cs, args)
	if res.IsError {
		t.Fatalf("isError: got true (%q), want false", text(t, res))
	}
	want := []launcher.Job{{Code: "x", Timeout: 30e9, Files: []launcher.File{
		{Name: "data.csv", Data: []byte("a,b\n1,2\n")},
		{Name: "in/bin.dat", Data: []byte{0, 1, 2, 0xff, 0xfe}},
		{Name: "outputs/echo.txt", Data: []byte("é")},
		{Name: "in/.hidden ünï", Data: []byte{}},
	}}}
	if diff := cmp.Diff(want, r.calls(), jobOpts...); diff != "" {
		t.Errorf("jobs run (-want +got):\n%s", diff)
	}
	// Exactly at the caps: 4 files, one of 10 bytes, 20 bytes together.
	r.reset()
	args = `{"code":"x","files":[{"name":"a","content":"0123456789"},{"name":"b","content":"01234"},` +
		`{"name":"c","content":"0123"},{"name":"d","content":"` + base64.StdEncoding.EncodeToString([]byte("x")) + `","encoding":"base64"}]}`
	if res := call(t, t.Context(), cs, args); res.IsError {
		t.Fatalf("files at the caps: got isError true (%q), want false", text(t, res))
	}
	if n := len(r.calls()); n != 1 {
		t.Fatalf("runner calls: got %d, want 1", n)
	}
}

func TestCallFilesInvalid(t *testing.T) {
	r := &fakeRunner{}
	cs := connect(t, t.Context(), r, Options{MaxFiles: 3, MaxFileBytes: 10, MaxFilesBytes: 15})
	file := func(name string) string {
		b, _ := json.Marshal(name)
		return fmt.Sprintf(`{"code":"x","files":[{"name":%s,"content":"x"}]}`, b)
	}
	tests := []badCall{
		{"empty name", file(""), "files[0].name is empty"},
		{"absolute", file("/etc/x"), `files[0].name "/etc/x" is absolute`},
		{"parent", file("../x"), `files[0].name "../x" contains ".."`},
		{"parent inside", file("a/../../b"), `files[0].name "a/../../b" contains ".."`},
		{"parent at end", file("a/.."), `contains ".."`},
		{"dot", file("./x"), `files[0].name "./x" contains "."`},
		{"dot inside", file("a/./b"), `contains "."`},
		{"lone dot", file("."), `contains "."`},
		{"empty segment", file("a//b"), "has an empty part"},
		{"trailing slash", file("a/"), "has an empty part"},
		{"backslash", file(`a\b`), "contains a backslash"},
		{"backslash traversal", file(`..\x`), "contains a backslash"},
		{"NUL", file("a\x00b"), "contains a NUL or control character"},
		{"newline", file("a\nb"), "contains a NUL or control character"},
		{"DEL", file("a\x7fb"), "contains a NUL or control character"},
		{"C1 control", file("a\u0085b"), "contains a NUL or control character"},
		{"long segment", file(strings.Repeat("s", 256)), "has a part of 256 bytes; the limit is 255 bytes per part"},
		{"long name 1025", file(strings.Repeat(strings.Repeat("s", 255)+"/", 4) + "abcd"), "is 1028 bytes long; the limit is 1024 bytes"},
		{"outputs is reserved", file("outputs"), `files[0].name "outputs" is reserved: /tmp/outputs is the directory`},
		{"duplicate", `{"code":"x","files":[{"name":"a","content":""},{"name":"a","content":""}]}`,
			`files[1].name "a" duplicates files[0]`},
		{"file then dir", `{"code":"x","files":[{"name":"a","content":""},{"name":"a/b","content":""}]}`,
			`files[1].name "a/b" is inside the file files[0]`},
		{"dir then file", `{"code":"x","files":[{"name":"a/b/c","content":""},{"name":"a/b","content":""}]}`,
			`files[1].name "a/b" is a directory of files[0]`},
		{"dir then file top", `{"code":"x","files":[{"name":"a/b","content":""},{"name":"a","content":""}]}`,
			`files[1].name "a" is a directory of files[0]`},
		{"bad base64", `{"code":"x","files":[{"name":"a","content":"not base64!","encoding":"base64"}]}`,
			`files[0] "a": content is not valid base64`},
		{"base64 without padding", `{"code":"x","files":[{"name":"a","content":"eA","encoding":"base64"}]}`,
			"content is not valid base64"},
		{"bad encoding", `{"code":"x","files":[{"name":"a","content":"x","encoding":"latin-1"}]}`, "encoding"},
		{"too many files", `{"code":"x","files":[{"name":"a","content":""},{"name":"b","content":""},{"name":"c","content":""},{"name":"d","content":""}]}`,
			"files has 4 entries; the limit is 3 files per call"},
		{"file too big", `{"code":"x","files":[{"name":"a","content":"01234567890"}]}`,
			`files[0] "a" is 11 bytes (decoded); the limit is 10 bytes per file`},
		{"base64 file too big", `{"code":"x","files":[{"name":"a","content":"` + base64.StdEncoding.EncodeToString(make([]byte, 11)) + `","encoding":"base64"}]}`,
			`files[0] "a" is 11 bytes (decoded); the limit is 10 bytes per file`},
		{"multibyte file too big", `{"code":"x","files":[{"name":"a","content":"éééééé"}]}`,
			`files[0] "a" is 12 bytes (decoded)`},
		{"sum too big", `{"code":"x","files":[{"name":"a","content":"0123456789"},{"name":"b","content":"012345"}]}`,
			`files are 16 bytes together (decoded) by files[1] "b"; the limit is 15 bytes for all files of a call`},
		{"name missing", `{"code":"x","files":[{"content":"x"}]}`, "name"},
		{"content missing", `{"code":"x","files":[{"name":"a"}]}`, "content"},
		{"unknown file field", `{"code":"x","files":[{"name":"a","content":"","mode":"0755"}]}`, "mode"},
		{"files not an array", `{"code":"x","files":{"name":"a","content":""}}`, "files"},
		{"files null", `{"code":"x","files":null}`, "files"},
		{"content not a string", `{"code":"x","files":[{"name":"a","content":1}]}`, "content"},
	}
	expectToolErrors(t, cs, r, tests, "bad files")
}

// TestCheckConflicts covers orders and depths the table above does not.
func TestCheckConflicts(t *testing.T) {
	tests := []struct {
		names []string
		ok    bool
	}{
		{[]string{"a", "b", "c/d", "c/e", "c/f/g"}, true},
		{[]string{"a/b", "a/c", "ab", "a.b"}, true},
		{[]string{"A", "a"}, true}, // the sandbox's file system is case-sensitive
		{[]string{"c/f/g", "c/f"}, false},
		{[]string{"c/f/g", "c"}, false},
		{[]string{"c", "c/f/g"}, false},
		{[]string{"c/f", "c/f/g/h"}, false},
		{[]string{"x/y", "x/y"}, false},
	}
	for _, tt := range tests {
		seen := map[string]int{}
		var err error
		for i, n := range tt.names {
			if err = checkConflicts(seen, i, n); err != nil {
				break
			}
		}
		if (err == nil) != tt.ok {
			t.Errorf("checkConflicts(%q): got %v, want ok %t", tt.names, err, tt.ok)
		}
	}
}
