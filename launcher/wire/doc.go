// Package wire is the protocol between the server and a sandbox's bootstrap: header lines
// and frames on the sandbox's stdin (→) and stdout (←). Its Python side is the wire
// section of launcher/boot.py; TestBootSpeaksThisWire holds the two together. Standard
// library only, so that backends may import it. Version 2: the one-shot header's digit.
// A frame is 1 byte of kind, a u32 length, the payload; integers are big-endian.
//
//	→ <key hex>                 GateLine    Kubernetes: opens the start gate with the seal's key
//	→ MCPEXEC2 <code> <files>   ExecHeader  one-shot: code, files (AppendFile), stdin to its end
//	→ MCPEXEC2 <c> <f> <lang>   ExecLanguageHeader  the same, for a program in a language of Languages
//	→ MCPEXEC3 <c> <f> <t> <s>  ToolsHeader with tools: code, files, ToolsBlob, s bytes of stdin
//	→ MCPEXEC3 <c> <f> <t> <s> <lang>  ToolsLanguageHeader  the same, for a JavaScript program
//	→ MCPEXECS <c> <f> <s>      CellHeader  a session's call: code, files, s bytes of stdin
//	→ MCPEXECS <c> <f> <s> <lang>  CellLanguageHeader  the same, for a call in a language of Languages
//	→ MCPEXECT <c> <f> <t> <s>  CellToolsHeader  a session's call with tools: as MCPEXEC3
//	→ MCPEXECT <c> <f> <t> <s> <lang>  CellToolsLanguageHeader  the same, for a JavaScript call
//	→ MCPEXECK                  Kill        kill a session's running call
//	→ MCPEXECK cancel           Cancel      the same, its result read by no one (the next JavaScript call says its loss)
//	→ MCPEXECR <key hex>        ResealLine  a shared session's new seal key, between calls
//	→ MCPEXECB <c> <f> <s> <ms> KeptHeader  a kept call (background, Kubernetes): as MCPEXECS, its frames kept for Fetch
//	→ MCPEXECF                  Fetch       a kept call's frames: O, E tails and P while it runs, all up to X once ended
//	→ Y frame                   ReplyFrame  u32 call id, the reply's JSON (after MCPEXEC3's or MCPEXECT's stdin)
//	← R frame                   Decoder     ready: the interpreter waits for its code
//	← O, E frames               Decoder     the program's stdout and stderr, in chunks
//	← D frame                   File        a file the program left: JSON header, content
//	← C frames                  Calls       the program's calls (u32 length, u32 id, JSON), in chunks
//	← X or F frame              Exit        the end: the program's status, or the bootstrap's failure
//	← P frame                   Exit        Fetch's answer while a kept call runs (Running): its output's size
package wire
