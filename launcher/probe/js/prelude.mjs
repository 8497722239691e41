// The verdict machinery of every JavaScript probe (probe.go's Verdict): each failed
// assertion is collected by fail, and finish prints "PROBE FAIL: ..." (exit 1) or
// "PROBE OK". An exception nobody caught ends in a "PROBE FAIL" line too.
import fs from 'node:fs';

const FAILS = [];
const fail = (msg) => FAILS.push(String(msg).split(/\s+/).join(' '));
const note = (msg) => console.log('note: ' + msg);

function finish() {
  if (FAILS.length) {
    console.log('PROBE FAIL: ' + FAILS.join('; '));
    process.exit(1);
  }
  console.log('PROBE OK');
  process.exit(0);
}

process.on('uncaughtException', (e) => {
  console.error(e);
  console.log('PROBE FAIL: unexpected ' + String(e).split(/\s+/).join(' '));
  process.exit(1);
});

// denied(what, fn, ...codes): fn (sync or async) must throw an error whose code is
// one of codes.
async function denied(what, fn, ...codes) {
  let r;
  try {
    r = await fn();
  } catch (e) {
    if (codes.includes(e.code)) console.log(`${what}: denied (${e.code})`);
    else fail(`${what}: failed with ${e.code} (${e.message}), want ${codes.join('/')}`);
    return e.code;
  }
  fail(`${what}: succeeded (${r}), want ${codes.join('/')}`);
}

// status(pid): the fields of /proc/PID/status, whitespace collapsed.
function status(pid) {
  const out = {};
  for (const line of fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim().split(/\s+/).join(' ');
  }
  return out;
}

// The container's id as the engine names it, as sandbox_id.py finds it.
function printSandboxID() {
  const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(' /etc/hostname '));
  for (const text of [mounts.join('\n'), fs.readFileSync('/proc/self/cgroup', 'utf8')]) {
    const m = text.match(/\b([0-9a-f]{64})\b/);
    if (m) {
      console.log('SANDBOX-ID ' + m[1]);
      return;
    }
  }
  console.log('no container id visible');
}

