import { spawn } from 'node:child_process';

// Processes stop below Pids, and the program survives to go on. A ceiling well above
// Pids makes a missing limit fail quickly instead of exhausting the host. libuv's
// thread pool starts first: node aborts when it cannot start a thread it needs.
await fs.promises.readFile('/proc/self/status');
const kids = [];
let err = null;
while (kids.length < 4 * PIDS + 64) {
  let c;
  try {
    c = spawn('sleep', ['600'], { stdio: 'ignore' });
  } catch (e) {
    err = e;
    break;
  }
  if (c.pid === undefined) {
    err = await new Promise((resolve) => c.once('error', resolve));
    break;
  }
  c.on('error', () => {});
  kids.push(c);
}
console.log(`processes stopped at ${kids.length}: ${err ? err.code : 'no error'}`);
const gone = kids.map((c) => new Promise((resolve) => c.once('exit', resolve)));
for (const c of kids) c.kill('SIGKILL');
await Promise.all(gone);
if (kids.length >= PIDS) fail(`spawned ${kids.length} processes, want fewer than Pids=${PIDS}`);
if (!err || err.code !== 'EAGAIN') fail(`spawning stopped with ${err && err.code}, want EAGAIN`);
// The limit is a ceiling, not a trap.
const after = spawn('true');
const code = await new Promise((resolve) => { after.on('error', (e) => resolve(e.code)); after.on('exit', resolve); });
if (code !== 0) fail(`a process after the children were killed: ${code}, want exit 0`);
finish();
