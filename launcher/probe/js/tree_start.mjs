import { spawn } from 'node:child_process';

// Two children that outlive the program's own end unless the sandbox kills them: one
// attached, one detached in a session of its own; TOKEN is their argv[0], for
// tree_check. The program ignores SIGTERM and waits out its timeout.
printSandboxID();
process.on('SIGTERM', () => {});
const pids = [false, true].map((detached) => {
  const c = spawn('sleep', ['600'], { argv0: TOKEN, detached, stdio: 'ignore' });
  c.unref();
  return c.pid;
});
const up = () => pids.filter((p) => { try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').startsWith(TOKEN); } catch { return false; } });
for (let i = 0; i < 100 && up().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
console.log('SPAWNED ' + up().length);
setInterval(() => {}, 1000);
