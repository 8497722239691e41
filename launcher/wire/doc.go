// Package wire is the protocol between the server and a sandbox's bootstrap (boot.py;
// its Python side is launcher/wire.py): headers and frames over the sandbox's stdin and
// stdout, and nothing else. It imports only the standard library, so backends may use it.
// The protocol's version is 2 (Version), the digit of the one-shot header.
//
// Server to sandbox, on stdin (headers are one ASCII line; sizes in bytes):
//
//	<key hex>                   GateLine    Kubernetes: opens the start gate, the seal's key
//	MCPEXEC2 <code> <files>     ExecHeader  one-shot: code, files, then stdin to its end
//	MCPEXEC3 <c> <f> <t> <s>    ToolsHeader one-shot with tools: code, files, ToolsBlob, s bytes of stdin
//	MCPEXECS <code> <files> <s> CellHeader  a session's call: code, files, s bytes of stdin
//	MCPEXECK                    Kill        kill a session's running call
//	MCPEXECR <key hex>          ResealLine  a shared session's new seal key, between calls
//	Y frame                     ReplyFrame  the answer to a C frame's call (after MCPEXEC3)
//
// Sandbox to server, on stdout: frames of 1 byte kind, u32 length, payload; Decoder reads
// them. R (ready), O and E (output), D (a file), C (calls, reassembled by Calls), then one
// of X (the program ended: Exit) or F (the bootstrap failed) ends the exec or the call.
// Files (AppendFile) are u32 name length, name, u32 size, content; integers big-endian.
package wire
