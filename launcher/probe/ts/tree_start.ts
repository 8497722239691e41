import { spawn, spawnSync } from 'node:child_process';

// JavaScript's tree probe, as TypeScript (through the bootstrap's esbuild), whose two
// children are esbuild itself: one attached, one detached in a session of its own,
// each reading a FIFO it holds open for writing too, so that neither ever sees the end
// of its input, even once the program is gone. Each must have the program's
// privileges; TOKEN is their argv[0], for tree_check. The program ignores SIGTERM and
// waits out its timeout.
printSandboxID();
process.on('SIGTERM', () => {});
interface Kid { pid: number; detached: boolean }
const fifo: string = '/tmp/probe-esbuild-input';
spawnSync('mkfifo', [fifo]);
const input: number = fs.openSync(fifo, fs.constants.O_RDWR);
const kids: Kid[] = [false, true].map((detached: boolean): Kid => {
  const c = spawn('esbuild', ['--loader=ts'], { argv0: TOKEN, detached, stdio: [input, 'ignore', 'ignore'] });
  c.unref();
  return { pid: c.pid as number, detached };
});
const up = (): Kid[] => kids.filter(({ pid }) => { try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(TOKEN); } catch { return false; } });
for (let i = 0; i < 100 && up().length < 2; i++) await new Promise<void>((r) => setTimeout(r, 50));
for (const { pid, detached } of up()) {
  const st: Record<string, string> = status(String(pid));
  const want: Record<string, string> = { Uid: Array(4).fill(SANDBOX_UID).join(' '), CapEff: '0000000000000000', CapBnd: '0000000000000000', NoNewPrivs: '1', Seccomp: '2' };
  for (const [key, value] of Object.entries(want)) {
    if (st[key] !== value) fail(`esbuild (${detached ? 'detached' : 'attached'}) ${key} = ${st[key]}, want ${value}`);
  }
}
console.log('SPAWNED ' + up().length);
if (FAILS.length) finish();
setInterval(() => {}, 1000);
