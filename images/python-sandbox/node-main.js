// The main of the image's start-up snapshot (node.blob, built by the Dockerfile; boot.py
// starts node with it): it runs the program as `node FILE` would, CommonJS or ES module
// by its syntax, FILE the memory file boot.py names /dev/fd/N.
//
// Started ahead in a warm-pool sandbox (--pool-prestart javascript, boot.py's _ahead),
// node finds MCP_EXEC_AHEAD="GATE,STDIN,MCPTOOLS,CALLS,REPLY" (descriptors) in its
// environment, and waits on the GATE pipe before it reads FILE, which is empty until the
// call's code comes: then one byte, "G" for a program without tools or "T" for one with
// them (code mode, boot.py's _tools), and the descriptors the call must not have are
// closed. With tools, STDIN (a memory file holding the program's stdin) becomes
// descriptor 0 and MCPTOOLS, CALLS and REPLY stay open, as when node starts after the
// code. boot.py starts the waiting only when this file names MCP_EXEC_AHEAD.
const v8 = require('v8');

v8.startupSnapshot.setDeserializeMainFunction(() => {
  const ahead = process.env.MCP_EXEC_AHEAD;
  if (ahead !== undefined) {
    delete process.env.MCP_EXEC_AHEAD; // not the program's (its children's either)
    wait(require('fs'), ahead.split(',').map(Number));
  }
  require('module').runMain();
});

function wait(fs, [gate, stdin, mcptools, calls, reply]) {
  const b = Buffer.alloc(1);
  const n = fs.readSync(gate, b, 0, 1, null);
  fs.closeSync(gate);
  if (n !== 1) {
    process.exit(70); // the sandbox's child went away without a call: EXIT_FAILED
  }
  if (b[0] === 0x54) { // "T"
    fs.closeSync(0);
    if (fs.openSync('/dev/fd/' + stdin, 'r') !== 0) { // the lowest free descriptor
      process.exit(70);
    }
    fs.closeSync(stdin);
    return;
  }
  for (const fd of [stdin, mcptools, calls, reply]) {
    fs.closeSync(fd);
  }
}
