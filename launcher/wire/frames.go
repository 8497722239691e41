package wire

// Frame kinds. A frame is 1 byte of kind, a 4-byte big-endian payload length, the payload.
const (
	// Sandbox to server, on the container's stdout.
	FrameReady  = 'R' // (empty) the interpreter is loaded and waits for its code
	FrameStdout = 'O' // a chunk of the program's stdout
	FrameStderr = 'E' // a chunk of the program's stderr
	FrameFile   = 'D' // u32 n, n bytes of JSON {"name","size","skipped"}, the content
	FrameExit   = 'X' // JSON Exit: the program has ended
	FrameFatal  = 'F' // text: the bootstrap itself failed
	FrameCall   = 'C' // a chunk of the program's call stream (Calls)
	// FrameProgress answers Fetch while a kept call runs: JSON {"output_bytes"}, after an
	// O and an E frame holding each stream's last TailSize bytes.
	FrameProgress = 'P'

	// Server to sandbox, on stdin after a Tools header's stdin bytes.
	FrameReply = 'Y' // u32 call id, the reply's JSON
)
