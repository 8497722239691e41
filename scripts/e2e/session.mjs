#!/usr/bin/env node
// End-to-end check of sessions with the official TypeScript MCP SDK: a data-analysis
// sequence in ONE session, the way an agent would run it.
//
//   node session.mjs --transport stdio [--cmd BINARY] --instance NAME [--docker docker]
//   node session.mjs --transport http  [--url http://127.0.0.1:8080/mcp] [--token T] --instance NAME [--docker docker]
//
// session_create; a CSV passed as an input file loaded into a pandas DataFrame; later
// calls that query it (the variables kept, execution_count counting up, state "kept");
// a file written to /tmp in one call read in the next; an exception that keeps what
// ran before it; a call that changes the DataFrame and then times out, after which the
// DataFrame and the other variables are as before it (state "rolled_back"); a one-shot
// exec beside the session that sees none of it; session_close (twice: idempotent); and
// an exec on the closed handle, a tool error saying to call session_create.
//
// The session's container is counted with the docker CLI (`docker ps -aq --filter
// label=dev.mcp-exec.instance=NAME`): one while the session is open, none after
// session_close, besides the session pool's --session-pool N idle ones (the server's
// MCP_EXEC_SESSION_POOL_SIZE): with a pool, the session takes one that was there before
// session_create, the pool refills, and session_close removes the taken one. The server
// must run without a warm pool (MCP_EXEC_POOL_SIZE=0), as for rich.mjs: its idle
// sandboxes carry that label too.
//
// Like client.mjs it prints ONE JSON object on stdout, one line per check on stderr,
// and exits 0 only when every check passed (1 otherwise, 2 for a usage error). The
// report adds session_id, for the driver's check of the server's log.
// Run `npm ci` in this directory first. e2e/session_e2e_test.go drives it.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import {
  CALL_TIMEOUT_MS, TRANSPORT_OPTIONS, call, checkTransport, expect, newReport, parseOptions, runAndReport, short, stdioOrHTTPTransport, textOf, toolError, usageExit,
} from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';

const INSTANCE_LABEL = 'dev.mcp-exec.instance';
const USAGE = 'usage: node session.mjs --transport stdio|http [--url URL] [--token T] [--cmd BINARY] --instance NAME [--docker PATH] [--session-pool N]';

function usage(msg) {
  usageExit('session.mjs', USAGE, msg);
}

const opts = parseOptions('session.mjs', USAGE, {
  ...TRANSPORT_OPTIONS,
  instance: { type: 'string' },
  docker: { type: 'string' },
  'session-pool': { type: 'string' },
});
const transportName = checkTransport(opts, ['stdio', 'http'], usage);
if (!opts.instance) {
  usage('--instance is required: the session\'s container is counted by it');
}
const token = opts.token ?? '';
const docker = opts.docker ?? 'docker';
const pooled = Number(opts['session-pool'] ?? '0');
if (!Number.isInteger(pooled) || pooled < 0) {
  usage(`--session-pool must be a whole number, got ${opts['session-pool']}`);
}
let poolBefore = []; // the session pool's idle sandboxes before session_create
const url = transportName === 'stdio' ? undefined : new URL(opts.url ?? 'http://127.0.0.1:8080/mcp');

const execFileP = promisify(execFile);
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// sandboxes lists the ids of every container, running or not, of the server's instance.
async function sandboxes() {
  const { stdout } = await execFileP(docker, ['ps', '-aq', '--filter', `label=${INSTANCE_LABEL}=${opts.instance}`],
    { timeout: 10_000 });
  return stdout.split('\n').map(s => s.trim()).filter(Boolean);
}

// settle polls sandboxes() until there are want of them (earlier one-shot runs'
// containers are removed in the background), for at most ms; it returns the last list.
async function settle(want, ms = 15_000) {
  const t0 = Date.now();
  let list = await sandboxes();
  while (list.length !== want && Date.now() - t0 < ms) {
    await sleep(100);
    list = await sandboxes();
  }
  return list;
}

// ---- the data ----------------------------------------------------------------------

// A small sales table, deterministic, and the answers computed here in JavaScript so
// that pandas' answers in the sandbox are checked against an independent computation.
const REGIONS = ['north', 'south', 'east', 'west'];
const rows = [];
for (let i = 0; i < 400; i++) {
  rows.push({ id: i + 1, region: REGIONS[(i * 7) % 4], units: (i * 13) % 17 + 1, price: ((i * 31) % 50) + 0.5 });
}
const CSV = 'id,region,units,price\n' + rows.map(r => `${r.id},${r.region},${r.units},${r.price}`).join('\n') + '\n';
const revenueByRegion = {};
for (const r of rows) revenueByRegion[r.region] = (revenueByRegion[r.region] ?? 0) + r.units * r.price;
const totalUnits = rows.reduce((a, r) => a + r.units, 0);
const bestRegion = Object.entries(revenueByRegion).sort((a, b) => b[1] - a[1])[0][0];

// ---- the session -------------------------------------------------------------------

let sessionId;   // from session_create
let lastCount = 0; // execution_count of the last call in the session
let created;     // session_create's structured result

// inSession runs code in the session and checks the session part of the result:
// execution_count one more than the last call's, state want (default "kept").
async function inSession(client, args, want = 'kept') {
  const result = await call(client, { ...args, session_id: sessionId });
  expect(!result.isError, `isError is ${result.isError}; text: ${short(textOf(result))}`);
  const sc = result.structuredContent;
  expect(sc && typeof sc === 'object', `no structuredContent: ${short(result)}`);
  const s = sc.session;
  expect(s && typeof s === 'object', `no session in the result: ${short(sc)}`);
  expect(s.id === sessionId, 'session.id is not the session_id the call passed');
  expect(s.execution_count === lastCount + 1, `execution_count is ${s.execution_count}, want ${lastCount + 1}`);
  expect(s.state === want, `state is ${short(s.state)}, want ${want}; stderr: ${short(sc.stderr, 1000)}`);
  expect(typeof s.expires_at === 'string' && !Number.isNaN(Date.parse(s.expires_at)), `expires_at: ${short(s.expires_at)}`);
  lastCount = s.execution_count;
  return sc;
}

// ok checks a call that ended by itself with exit code 0.
function ok(sc) {
  expect(sc.exit_code === 0 && !sc.timed_out, `exit_code ${sc.exit_code}, timed_out ${sc.timed_out}; stderr: ${short(sc.stderr, 1000)}`);
  return sc;
}

function closeTo(a, b) {
  return Math.abs(a - b) < 1e-6 * Math.max(1, Math.abs(b));
}

const checks = [
  ['tools', async (client) => {
    const { tools } = await client.listTools();
    const names = tools.map(t => t.name).sort().join(',');
    // run_wait and run_cancel too where the backend has background runs (docker).
    expect(['exec,session_close,session_create', 'exec,run_cancel,run_wait,session_close,session_create'].includes(names),
      `tools: ${names}, want exec,session_close,session_create (and run_cancel,run_wait)`);
    const exec = tools.find(t => t.name === 'exec');
    expect(exec.inputSchema?.properties?.session_id?.type === 'string', `exec's session_id: ${short(exec.inputSchema?.properties?.session_id)}`);
    const sp = exec.outputSchema?.properties?.session?.properties ?? {};
    for (const k of ['id', 'execution_count', 'state', 'expires_at']) {
      expect(k in sp, `exec's outputSchema session lacks ${k}`);
    }
    const create = tools.find(t => t.name === 'session_create');
    expect(/variables/.test(create.description) && /\/tmp/.test(create.description), 'session_create does not say what persists');
  }],

  ['session_create', async (client) => {
    const before = await settle(pooled, 60_000);
    expect(before.length === pooled, `sandboxes of ${opts.instance} before session_create: ${before}, want the session pool's ${pooled}; the server must run with MCP_EXEC_POOL_SIZE=0`);
    poolBefore = before;
    const t0 = Date.now();
    const result = await client.callTool({ name: 'session_create', arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
    const took = Date.now() - t0;
    expect(!result.isError, `session_create: ${short(textOf(result))}`);
    created = result.structuredContent;
    sessionId = created?.session_id;
    report.session_id = sessionId; // for the driver's check that the server never logs it whole
    // 192 random bits (docs/sessions.md), whatever the encoding: at least 128 bits' worth.
    expect(typeof sessionId === 'string' && sessionId.length >= 22, `session_id: ${short(sessionId)}`);
    expect(!Number.isNaN(Date.parse(created.expires_at)), `expires_at: ${short(created.expires_at)}`);
    for (const k of ['idle_timeout_s', 'max_lifetime_s', 'memory_bytes']) {
      expect(Number.isInteger(created[k]) && created[k] > 0, `${k}: ${short(created[k])}`);
    }
    const during = await settle(pooled + 1, 60_000);
    expect(during.length === pooled + 1, `sandboxes with the session open: ${during.length}, want 1 and the session pool's ${pooled}`);
    return `${took} ms; idle ${created.idle_timeout_s} s, lifetime ${created.max_lifetime_s} s, memory ${created.memory_bytes} B`;
  }],

  ['load_csv', async (client) => {
    const sc = ok(await inSession(client, {
      timeout_s: 90, // pandas' import is slow on a loaded machine
      files: [{ name: 'sales.csv', content: CSV }],
      code: [
        'import pandas as pd',
        'df = pd.read_csv("sales.csv")',
        'df["revenue"] = df["units"] * df["price"]',
        'x = 41',
        'print(len(df), list(df.columns))',
      ].join('\n'),
    }));
    const want = `${rows.length} ['id', 'region', 'units', 'price', 'revenue']\n`;
    expect(sc.stdout === want, `stdout ${short(sc.stdout)}, want ${short(want)}`);
    return `duration_ms ${sc.duration_ms}`;
  }],

  ['query_kept', async (client) => {
    // No import, no read: pd, df and x are the session's.
    const sc = ok(await inSession(client, {
      code: [
        'import json',
        'by = df.groupby("region")["revenue"].sum()',
        'print(json.dumps({"by": {k: float(v) for k, v in by.items()}, "units": int(df["units"].sum()), "best": by.idxmax(), "x1": x + 1}))',
      ].join('\n'),
    }));
    const got = JSON.parse(sc.stdout);
    expect(got.x1 === 42, `x + 1 is ${got.x1}, want 42`);
    expect(got.units === totalUnits, `units ${got.units}, want ${totalUnits}`);
    expect(got.best === bestRegion, `best region ${got.best}, want ${bestRegion}`);
    for (const r of REGIONS) {
      expect(closeTo(got.by[r], revenueByRegion[r]), `revenue of ${r}: ${got.by[r]}, want ${revenueByRegion[r]}`);
    }
    return `duration_ms ${sc.duration_ms}; best ${got.best}`;
  }],

  ['file_in_tmp', async (client) => {
    const write = ok(await inSession(client, {
      code: [
        'top = df.nlargest(5, "revenue")[["id", "revenue"]]',
        'top.to_csv("/tmp/top5.csv", index=False)',
        'print(len(top))',
      ].join('\n'),
    }));
    expect(write.stdout === '5\n', `write: stdout ${short(write.stdout)}`);
    const read = ok(await inSession(client, {
      code: [
        'import csv',
        'got = list(csv.DictReader(open("/tmp/top5.csv")))',
        // The input file of call 1 is still in /tmp too.
        'print(len(got), got[0]["id"], open("sales.csv").readline().strip())',
      ].join('\n'),
    }));
    const best = [...rows].sort((a, b) => b.units * b.price - a.units * a.price || a.id - b.id)[0];
    const want = `5 ${best.id} id,region,units,price\n`;
    expect(read.stdout === want, `read: stdout ${short(read.stdout)}, want ${short(want)}`);
  }],

  ['exception_keeps', async (client) => {
    const sc = await inSession(client, { code: 'y = len(df) * 2\nraise ValueError("bad query")' });
    expect(sc.exit_code === 1 && sc.stderr.includes('ValueError'), `exit_code ${sc.exit_code}; stderr ${short(sc.stderr)}`);
    const after = ok(await inSession(client, { code: 'print(y)' }));
    expect(after.stdout === `${rows.length * 2}\n`, `y after the exception: ${short(after.stdout)}`);
  }],

  ['timeout_rolls_back', async (client) => {
    const t0 = Date.now();
    const sc = await inSession(client, {
      timeout_s: 2,
      code: 'df = df.iloc[:1]\nx = 0\nprint("df-mutated", flush=True)\nwhile True:\n    pass',
    }, 'rolled_back');
    expect(sc.timed_out === true, `timed_out is ${sc.timed_out}; ${short(sc)}`);
    expect(sc.stdout === 'df-mutated\n', `stdout of the timed-out call: ${short(sc.stdout)}`);
    const took = Date.now() - t0;
    const after = ok(await inSession(client, { code: 'print(x, len(df))' }));
    expect(after.stdout === `41 ${rows.length}\n`, `after the timeout: ${short(after.stdout)}, want "41 ${rows.length}"`);
    return `timed-out call ${took} ms; the next call saw x and df as before it`;
  }],

  ['one_shot_isolated', async (client) => {
    // A one-shot exec beside the session: a sandbox of its own, none of the session's state.
    const result = await call(client, { code: 'import os\nprint("df" in globals(), os.path.exists("/tmp/top5.csv"), os.path.exists("/tmp/sales.csv"))' });
    expect(!result.isError, `one-shot: ${short(textOf(result))}`);
    const sc = result.structuredContent;
    expect(sc.session === undefined, `a one-shot result has a session: ${short(sc.session)}`);
    expect(sc.stdout === 'False False False\n', `one-shot sees the session's state: ${short(sc.stdout)}`);
  }],

  ['session_close', async (client) => {
    const close = args => client.callTool({ name: 'session_close', arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
    const first = await close({ session_id: sessionId });
    expect(!first.isError && first.structuredContent?.closed === true, `first close: ${short(first)}`);
    const second = await close({ session_id: sessionId });
    expect(!second.isError && second.structuredContent?.closed === false, `second close: ${short(second)}`);
    const left = await settle(pooled);
    expect(left.length === pooled, `sandboxes left after session_close: ${left}, want the session pool's ${pooled}`);
    // The session took the oldest pooled sandbox: gone with it, never served again.
    const reused = poolBefore.filter(id => left.includes(id));
    expect(pooled === 0 || reused.length === pooled - 1, `pooled sandboxes from before session_create still there after session_close: ${reused}; want the session to have taken one of them`);
    return `${lastCount} calls in the session`;
  }],

  ['closed_handle', async (client) => {
    const text = toolError(await call(client, { code: 'print(x)', session_id: sessionId }));
    expect(/closed/.test(text) && text.includes('session_create'), `error does not say closed and session_create: ${short(text)}`);
    return short(text, 160);
  }],
];

// ---- main ------------------------------------------------------------------------

function log(line) {
  process.stderr.write(`[session.mjs ${transportName}] ${line}\n`);
}

const report = newReport(transportName, url, token, { session_id: undefined });

{
  const client = new Client({ name: 'mcp-exec-e2e-session', version: '1.0.0' }, { capabilities: {} });
  await runAndReport(client, stdioOrHTTPTransport(transportName, opts.cmd, url, token), checks, report, log);
}
