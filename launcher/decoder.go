package launcher

import "github.com/mcp-exec/mcp-exec/launcher/wire"

// decoder is the wire's decoder of one sandbox's stdout (launcher/wire), with the
// capture its output frames fill. ready and done are its channels, kept as fields for
// the selects that wait on them.
type decoder struct {
	*wire.Decoder
	out         *capture
	ready, done <-chan struct{}
}

func newDecoder(out *capture, maxFile int) *decoder {
	d := wire.NewDecoder(out.add, maxFile)
	return &decoder{Decoder: d, out: out, ready: d.Ready(), done: d.Done()}
}

// outputFiles are the decoder's D frames as the result's files.
func outputFiles(files []wire.File) []OutputFile {
	var out []OutputFile
	for _, f := range files {
		out = append(out, OutputFile{Name: f.Name, Size: f.Size, Data: f.Data, Skipped: f.Skipped})
	}
	return out
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
