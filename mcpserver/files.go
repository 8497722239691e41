package mcpserver

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// The files of a call: those it brings and those its program leaves.
type (
	// inputFile is one entry of the "files" argument.
	inputFile struct {
		Name     string `json:"name" jsonschema:"Path of the file relative to the working directory /tmp, e.g. data.csv or in/data.csv. No leading /, no . or .. parts, no backslashes."`
		Content  string `json:"content" jsonschema:"The file's content: the text itself, or base64 when encoding is base64."`
		Encoding string `json:"encoding,omitempty" jsonschema:"How content is encoded: utf-8 (the default: content is the text) or base64 (for binary files)."`
	}

	// fileInfo describes one file the program left in /tmp/outputs.
	fileInfo struct {
		Name     string `json:"name" jsonschema:"Path relative to /tmp/outputs."`
		MIMEType string `json:"mime_type" jsonschema:"The file's MIME type, from its content or its extension."`
		Size     int64  `json:"size" jsonschema:"Size in bytes."`
		Returned bool   `json:"returned" jsonschema:"True when the file's content is in the result (as an image or an embedded resource)."`
		Reason   string `json:"reason,omitempty" jsonschema:"Why the file was not returned (for example a size cap); absent when returned."`
	}
)

// Limits on input file names. They are the usual limits of Linux file systems
// (NAME_MAX) and, for the whole path, well below PATH_MAX.
const (
	maxNameSegment = 255
	maxNameBytes   = MaxFileNameBytes
)

// MaxFileNameBytes is the longest input file name accepted, in bytes; the HTTP
// layer counts it when it sizes the largest legal request.
const MaxFileNameBytes = 1024

// outputsName is launcher.OutputDir relative to the working directory: a
// directory the sandbox creates, so no input file may take its name.
var outputsName = strings.TrimPrefix(launcher.OutputDir, launcher.WorkDir+"/")

// Input file encodings.
const (
	encodingUTF8   = "utf-8"
	encodingBase64 = "base64"
)

// newFiles checks the "files" argument against the naming rules and the caps
// and decodes it into the runner's files, in the order given.
func newFiles(in []inputFile, o Options) ([]launcher.File, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > o.MaxFiles {
		return nil, &invalidInput{"files", fmt.Sprintf("files has %d entries; the limit is %d files per call", len(in), o.MaxFiles)}
	}
	files := make([]launcher.File, 0, len(in))
	seen := make(map[string]int, len(in))
	total := 0
	for i, f := range in {
		if err := checkFileName(i, f.Name); err != nil {
			return nil, err
		}
		if err := checkConflicts(seen, i, f.Name); err != nil {
			return nil, err
		}
		data, err := decodeFile(i, f, o.MaxFileBytes)
		if err != nil {
			return nil, err
		}
		total += len(data)
		if total > o.MaxFilesBytes {
			return nil, &invalidInput{"files", fmt.Sprintf("files are %d bytes together (decoded) by files[%d] %q; the limit is %d bytes for all files of a call",
				total, i, f.Name, o.MaxFilesBytes)}
		}
		files = append(files, launcher.File{Name: f.Name, Data: data})
	}
	return files, nil
}

// checkFileName enforces the naming rules: a relative path of non-empty
// segments, none of them "." or "..", without backslashes or control
// characters, within the length limits.
func checkFileName(i int, name string) error {
	bad := func(why string) error {
		return &invalidInput{"files", fmt.Sprintf("files[%d].name %s %s: it must be a relative path like data.csv or in/data.csv (no leading /, no . or .. parts, no empty parts, no backslashes, no control characters)",
			i, quoteName(name), why)}
	}
	switch {
	case name == "":
		return &invalidInput{"files", fmt.Sprintf("files[%d].name is empty: give each file a relative path like data.csv", i)}
	case strings.HasPrefix(name, "/"):
		return bad("is absolute")
	case strings.Contains(name, "\\"):
		return bad("contains a backslash")
	case strings.ContainsFunc(name, unicode.IsControl):
		return bad("contains a NUL or control character")
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case len(name) > maxNameBytes:
		return bad(fmt.Sprintf("is %d bytes long; the limit is %d bytes", len(name), maxNameBytes))
	case name == outputsName:
		return &invalidInput{"files", fmt.Sprintf("files[%d].name %q is reserved: %s is the directory whose files come back after the run (a name like %s/data.csv is fine)",
			i, name, launcher.OutputDir, outputsName)}
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch {
		case seg == "":
			return bad("has an empty part (a leading, trailing or doubled /)")
		case seg == "..":
			return bad(`contains ".."`)
		case seg == ".":
			return bad(`contains "."`)
		case len(seg) > maxNameSegment:
			return bad(fmt.Sprintf("has a part of %d bytes; the limit is %d bytes per part", len(seg), maxNameSegment))
		}
	}
	return nil
}

// checkConflicts refuses a name given twice, and a name that another one
// needs as a directory ("a" and "a/b"). seen maps each name and each of its
// directories to the index that introduced it; directories are stored with a
// trailing slash.
func checkConflicts(seen map[string]int, i int, name string) error {
	conflict := func(j int, why string) error {
		return &invalidInput{"files", fmt.Sprintf("files[%d].name %s %s files[%d]: every file needs a path of its own", i, quoteName(name), why, j)}
	}
	if j, ok := seen[name]; ok {
		return conflict(j, "duplicates")
	}
	if j, ok := seen[name+"/"]; ok {
		return conflict(j, "is a directory of")
	}
	for k := 0; k < len(name); k++ {
		if name[k] != '/' {
			continue
		}
		if j, ok := seen[name[:k]]; ok {
			return conflict(j, "is inside the file")
		}
	}
	seen[name] = i
	for k := 0; k < len(name); k++ {
		if name[k] == '/' {
			if _, ok := seen[name[:k+1]]; !ok {
				seen[name[:k+1]] = i
			}
		}
	}
	return nil
}

// decodeFile returns the bytes of f, checked against the per-file cap.
func decodeFile(i int, f inputFile, maxBytes int) ([]byte, error) {
	var data []byte
	switch f.Encoding {
	case "", encodingUTF8:
		data = []byte(f.Content)
	case encodingBase64:
		var err error
		data, err = base64.StdEncoding.DecodeString(f.Content)
		if err != nil {
			return nil, &invalidInput{"files", fmt.Sprintf("files[%d] %s: content is not valid base64 (%v); send standard base64 with padding, or use encoding utf-8 for text",
				i, quoteName(f.Name), err)}
		}
	default:
		return nil, &invalidInput{"files", fmt.Sprintf("files[%d] %s: encoding is %s; it must be %q (the default) or %q",
			i, quoteName(f.Name), quoteName(f.Encoding), encodingUTF8, encodingBase64)}
	}
	if len(data) > maxBytes {
		return nil, tooBig(i, f.Name, len(data), maxBytes)
	}
	return data, nil
}

// quoteName quotes a caller's file name for an error message, cut to a
// readable length.
func quoteName(name string) string {
	const max = 80
	if len(name) <= max {
		return strconv.Quote(name)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]) + "..."
}

func tooBig(i int, name string, n, limit int) error {
	return &invalidInput{"files", fmt.Sprintf("files[%d] %s is %d bytes (decoded); the limit is %d bytes per file", i, quoteName(name), n, limit)}
}

// outputFiles turns what the program left in launcher.OutputDir into content
// blocks (images as images, everything else as embedded resources, in name
// order), the structured list of every file, returned or not, and for each
// file whether it went back as an image.
func outputFiles(files []launcher.OutputFile) (content []mcp.Content, infos []fileInfo, images []bool) {
	infos = make([]fileInfo, 0, len(files))
	images = make([]bool, 0, len(files))
	for _, f := range files {
		info := fileInfo{Name: f.Name, Size: f.Size}
		if f.Skipped != "" {
			info.MIMEType = typeByName(f.Name)
			info.Reason = f.Skipped
			infos, images = append(infos, info), append(images, false)
			continue
		}
		info.Returned = true
		info.Size = int64(len(f.Data))
		mt, image := detectType(f.Name, f.Data)
		info.MIMEType = mt
		infos, images = append(infos, info), append(images, image)
		if image {
			content = append(content, &mcp.ImageContent{Data: f.Data, MIMEType: mt})
			continue
		}
		rc := &mcp.ResourceContents{URI: fileURI(f.Name), MIMEType: mt}
		if len(f.Data) > 0 && isText(mt) && utf8.Valid(f.Data) {
			rc.Text = string(f.Data)
		} else {
			// Blob, never nil: an empty file is sent as an empty blob, because an
			// empty text would be left out of the JSON and leave neither.
			rc.Blob = append([]byte{}, f.Data...)
		}
		content = append(content, &mcp.EmbeddedResource{Resource: rc})
	}
	return content, infos, images
}

// fileURI is the file's address inside the sandbox, each path segment
// escaped.
func fileURI(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "file://" + launcher.OutputDir + "/" + strings.Join(segs, "/")
}

// Image types a client can show, with their signatures.
var imageTypes = []struct {
	mime  string
	match func([]byte) bool
}{
	{"image/png", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }},
	{"image/jpeg", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\xff\xd8\xff")) }},
	{"image/gif", func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a"))
	}},
	{"image/webp", func(b []byte) bool {
		return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP"
	}},
}

// detectType returns a file's MIME type and whether it goes back as an image.
// Only a file with the signature of an image type goes back as one: every
// valid PNG, JPEG, GIF or WebP file has it, and a client (or the model behind
// it) may reject a whole result over an image that does not decode. Without a
// signature the type comes from the extension (so a broken "chart.png" is an
// image/png resource), then from the content.
func detectType(name string, data []byte) (mimeType string, image bool) {
	for _, it := range imageTypes {
		if it.match(data) {
			return it.mime, true
		}
	}
	if mt := typeByExt(name); mt != "" {
		return mt, false
	}
	return http.DetectContentType(data), false
}

// typeByName is the MIME type of a file known only by name.
func typeByName(name string) string {
	if mt := typeByExt(name); mt != "" {
		return mt
	}
	return "application/octet-stream"
}

// commonTypes are consulted before the system's tables, which differ between
// machines and often lack these.
var commonTypes = map[string]string{
	".csv":     "text/csv; charset=utf-8",
	".tsv":     "text/tab-separated-values; charset=utf-8",
	".txt":     "text/plain; charset=utf-8",
	".log":     "text/plain; charset=utf-8",
	".md":      "text/markdown; charset=utf-8",
	".py":      "text/x-python; charset=utf-8",
	".json":    "application/json",
	".jsonl":   "application/jsonl",
	".ndjson":  "application/x-ndjson",
	".yaml":    "application/yaml",
	".yml":     "application/yaml",
	".xml":     "application/xml",
	".html":    "text/html; charset=utf-8",
	".htm":     "text/html; charset=utf-8",
	".svg":     "image/svg+xml",
	".pdf":     "application/pdf",
	".png":     "image/png",
	".jpg":     "image/jpeg",
	".jpeg":    "image/jpeg",
	".gif":     "image/gif",
	".webp":    "image/webp",
	".zip":     "application/zip",
	".gz":      "application/gzip",
	".parquet": "application/vnd.apache.parquet",
	".npy":     "application/octet-stream",
}

func typeByExt(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if ext == "" {
		return ""
	}
	if mt, ok := commonTypes[ext]; ok {
		return mt
	}
	return mime.TypeByExtension(ext)
}

// isText reports whether a file of type mt is sent as text (if it is valid
// UTF-8): text/* and the JSON, XML, CSV, YAML and JavaScript families.
func isText(mt string) bool {
	base, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return false
	}
	if strings.HasPrefix(base, "text/") {
		return true
	}
	sub := base[strings.IndexByte(base, '/')+1:]
	if strings.HasSuffix(sub, "+json") || strings.HasSuffix(sub, "+xml") {
		return true
	}
	switch sub {
	case "json", "jsonl", "x-ndjson", "ndjson", "xml", "csv", "yaml", "x-yaml", "javascript", "x-javascript", "ecmascript", "toml":
		return true
	}
	return false
}
