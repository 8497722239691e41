#!/usr/bin/env node
// End-to-end checks of the exec tool's rich features (files in and out, images,
// progress, cancellation) with the official TypeScript MCP SDK:
//
//   node rich.mjs --transport stdio [--cmd BINARY] --instance NAME [--docker docker]
//   node rich.mjs --transport http  [--url http://127.0.0.1:8080/mcp] [--token T] --instance NAME [--docker docker]
//
// Like client.mjs it prints ONE JSON object on stdout (same shape: ok, transport, sdk,
// server, passed, failed, checks, error, ...), one line per check on stderr, and exits
// 0 only when every check passed (1 otherwise, 2 for a usage error).
//
// The cancellation check lists the server's sandboxes with the docker CLI
// (`docker ps -aq --filter label=dev.mcp-exec.instance=NAME`), so the server must run in
// cold mode (MCP_EXEC_POOL_SIZE=0, MCP_EXEC_SESSION_POOL_SIZE=0): a pool keeps idle sandboxes with that label.
// For stdio the server is spawned with this process's whole environment.
//
// Run `npm ci` in this directory first. e2e/rich_e2e_test.go drives it.

import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

import {
  TRANSPORT_OPTIONS, call, checkTransport, expect, newReport, parseOptions, runAndReport, short, stdioOrHTTPTransport, textOf, toolError, usageExit,
} from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';

// The sandbox must be gone this soon after the abort. The program sleeps 60 s with a
// 120 s timeout, so a cancel that never reached the sandbox leaves it for a minute: the
// bound tells the two apart with room for a loaded machine (2 s, the usual time, failed
// at 2.07 s with a load of 24 on 2 cores). The time taken is in the check's detail.
const CANCEL_CLEANUP_MS = 15_000;
const INSTANCE_LABEL = 'dev.mcp-exec.instance';

const USAGE = 'usage: node rich.mjs --transport stdio|http [--url URL] [--token T] [--cmd BINARY] --instance NAME [--docker PATH]';

function usage(msg) {
  usageExit('rich.mjs', USAGE, msg);
}

const opts = parseOptions('rich.mjs', USAGE, {
  ...TRANSPORT_OPTIONS,
  instance: { type: 'string' },
  docker: { type: 'string' },
});
const transportName = checkTransport(opts, ['stdio', 'http'], usage);
if (!opts.instance) {
  usage('--instance is required: the cancellation check looks for the server\'s sandboxes by it');
}
const token = opts.token ?? '';
const docker = opts.docker ?? 'docker';
const url = transportName === 'stdio' ? undefined : new URL(opts.url ?? 'http://127.0.0.1:8080/mcp');

// ---- helpers ---------------------------------------------------------------------

// runResult checks a successful run that exited 0 and returns structuredContent.
function runResult(result) {
  expect(!result.isError, `isError is ${result.isError}, want falsy; text: ${short(textOf(result))}`);
  const sc = result.structuredContent;
  expect(sc && typeof sc === 'object', `no structuredContent: ${short(result)}`);
  expect(result.content?.[0]?.type === 'text', `content[0] is not text: ${short(result.content)}`);
  expect(Array.isArray(sc.files), `structuredContent.files is ${short(sc.files)}, want an array`);
  expect(sc.exit_code === 0, `exit_code is ${sc.exit_code}, want 0; stderr: ${short(sc.stderr, 2000)}`);
  return sc;
}

function sha256(buf) {
  return createHash('sha256').update(buf).digest('hex');
}

// pngSize checks the PNG signature and the IHDR chunk, and returns the image's size.
function pngSize(buf) {
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  expect(buf.length > 33, `PNG of ${buf.length} bytes is too short`);
  expect(buf.subarray(0, 8).equals(sig), `no PNG signature: ${buf.subarray(0, 8).toString('hex')}`);
  expect(buf.readUInt32BE(8) === 13 && buf.toString('latin1', 12, 16) === 'IHDR',
    `the first chunk is not a 13-byte IHDR: ${buf.subarray(8, 16).toString('hex')}`);
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

const execFileP = promisify(execFile);

// sandboxes lists the ids of every container, running or not, of the server's instance.
async function sandboxes() {
  const { stdout } = await execFileP(docker, ['ps', '-aq', '--filter', `label=${INSTANCE_LABEL}=${opts.instance}`],
    { timeout: 10_000 });
  return stdout.split('\n').map(s => s.trim()).filter(Boolean);
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// Errors the SDK reports outside of any call, e.g. a progress notification for a call
// that has already returned. There must be none, with one exception: the Go SDK answers
// a cancelled call anyway (its JSON-RPC layer always responds; MCP says the receiver
// SHOULD NOT), and the TypeScript SDK reports that answer as one for an unknown ID.
const strayErrors = [];
let cancelledAnswer; // when the answer to the cancelled call came, ms since the epoch

function onSdkError(err) {
  const msg = String(err?.message ?? err);
  // The answer says "context canceled", or, when the cancel came while the sandbox was
  // still starting (seen under gVisor on a loaded machine), the start's own error:
  // either way it is the one answer to the one cancelled call.
  if (/^Received a response for an unknown message ID: .*("context canceled"|starting sandbox)/.test(msg) && cancelledAnswer === null) {
    cancelledAnswer = Date.now();
    return;
  }
  strayErrors.push(msg);
  log(`SDK error: ${msg}`);
}

// ---- the battery -----------------------------------------------------------------

const checks = [
  ['schema', async (client) => {
    const { tools } = await client.listTools(); // also primes the SDK's output validation
    const tool = tools.find(t => t.name === 'exec');
    expect(tool, `no exec tool: ${short(tools.map(t => t.name))}`);
    const f = tool.inputSchema?.properties?.files;
    expect(f?.type === 'array', `inputSchema files: ${short(f)}`);
    const ip = f.items?.properties ?? {};
    expect(ip.name?.type === 'string' && ip.content?.type === 'string', `files items: ${short(f.items)}`);
    expect(JSON.stringify(ip.encoding?.enum) === '["utf-8","base64"]', `files encoding: ${short(ip.encoding)}`);
    expect(!(tool.inputSchema.required ?? []).includes('files'), 'files must be optional');
    const of = tool.outputSchema?.properties?.files;
    expect(of?.type === 'array', `outputSchema files: ${short(of)}`);
    for (const k of ['name', 'mime_type', 'size', 'returned', 'reason']) {
      expect(k in (of.items?.properties ?? {}), `outputSchema files items lack ${k}`);
    }
    for (const s of ['/tmp/outputs', 'plt.show()', 'PNG']) {
      expect(tool.description.includes(s), `description does not mention ${s}`);
    }
  }],

  ['matplotlib_chart', async (client) => {
    // timeout_s: importing matplotlib took over 30 s with the machine loaded 12x; this
    // check is about the figures, not the speed.
    const result = await call(client, {
      timeout_s: 90, // under the client's own 120 s
      code: [
        'import matplotlib.pyplot as plt',
        'fig = plt.figure(figsize=(4, 3), dpi=50)',
        'plt.plot([1, 2, 3], [1, 4, 9])',
        'plt.title("squares")',
        'plt.show()',
        'plt.figure(figsize=(2, 2), dpi=50)',
        'plt.bar(["a", "b"], [3, 5])',
        'print("charted")',
        '# the second figure is left open: it comes back at exit',
      ].join('\n'),
    });
    const sc = runResult(result);
    expect(sc.stdout === 'charted\n', `stdout is ${short(sc.stdout)}`);
    const images = result.content.filter(c => c.type === 'image');
    expect(images.length === 2, `want 2 image blocks, got ${images.length}: ${short(result.content.map(c => c.type))}`);
    const sizes = images.map(img => {
      expect(img.mimeType === 'image/png', `image mimeType is ${img.mimeType}`);
      return pngSize(Buffer.from(img.data, 'base64'));
    });
    expect(sizes[0].width === 200 && sizes[0].height === 150, `first figure is ${short(sizes[0])}, want 200x150`);
    expect(sizes[1].width === 100 && sizes[1].height === 100, `second figure is ${short(sizes[1])}, want 100x100`);
    const figs = sc.files.filter(f => f.returned && f.mime_type === 'image/png');
    expect(figs.length === 2 && figs.every(f => /^figure-\d+\.png$/.test(f.name) && f.size > 0),
      `structured files: ${short(sc.files)}`);
    return `PNG ${sizes.map(s => `${s.width}x${s.height}`).join(', ')}; ${figs.map(f => `${f.name} ${f.size} B`).join(', ')}`;
  }],

  ['csv_in_pandas', async (client) => {
    const rows = ['city,amount'];
    let sum = 0;
    for (let i = 1; i <= 50; i++) {
      rows.push(`c${i},${i * 3}`);
      sum += i * 3;
    }
    const bin = randomBytes(4096);
    const sc = runResult(await call(client, {
      timeout_s: 90, // as matplotlib_chart: pandas' import is slow on a loaded machine
      code: [
        'import hashlib, pandas as pd',
        'df = pd.read_csv("data.csv")',
        'print(int(df["amount"].sum()))',
        'print(open("in/notes ü.txt", encoding="utf-8").read())',
        'print(hashlib.sha256(open("in/blob.bin", "rb").read()).hexdigest())',
      ].join('\n'),
      files: [
        { name: 'data.csv', content: rows.join('\n') + '\n' },
        { name: 'in/notes ü.txt', content: 'ünïcödé ✓', encoding: 'utf-8' },
        { name: 'in/blob.bin', content: bin.toString('base64'), encoding: 'base64' },
      ],
    }));
    const want = `${sum}\nünïcödé ✓\n${sha256(bin)}\n`;
    expect(sc.stdout === want, `stdout is ${short(sc.stdout)}, want ${short(want)}`);
    expect(sc.files.length === 0, `files out: ${short(sc.files)}, want none`);
    return `sum ${sum}`;
  }],

  ['file_out_roundtrip', async (client) => {
    const result = await call(client, {
      code: [
        'import hashlib, os, json',
        'data = os.urandom(200_000)',
        'open("/tmp/outputs/blob.bin", "wb").write(data)',
        'os.makedirs("/tmp/outputs/sub dir", exist_ok=True)',
        'open("/tmp/outputs/sub dir/report.json", "w").write(json.dumps({"n": 3}))',
        'print(hashlib.sha256(data).hexdigest())',
      ].join('\n'),
    });
    const sc = runResult(result);
    const printed = sc.stdout.trim();
    expect(/^[0-9a-f]{64}$/.test(printed), `stdout is ${short(sc.stdout)}, want a SHA-256`);
    const res = result.content.filter(c => c.type === 'resource').map(c => c.resource);
    const blob = res.find(r => r.uri === 'file:///tmp/outputs/blob.bin');
    expect(blob && typeof blob.blob === 'string', `no blob resource for blob.bin: ${short(res)}`);
    const bytes = Buffer.from(blob.blob, 'base64');
    expect(bytes.length === 200_000, `blob.bin came back with ${bytes.length} bytes`);
    expect(sha256(bytes) === printed, `SHA-256 ${sha256(bytes)} of what came back differs from the printed ${printed}`);
    const report = res.find(r => r.uri === 'file:///tmp/outputs/sub%20dir/report.json');
    expect(report && report.text === '{"n": 3}' && report.mimeType === 'application/json',
      `report.json: ${short(report ?? res)}`);
    const names = sc.files.map(f => `${f.name}:${f.returned}`).join(',');
    expect(names === 'blob.bin:true,sub dir/report.json:true', `structured files: ${names}`);
    return `sha256 ${printed.slice(0, 12)}... matches`;
  }],

  ['path_traversal_refused', async (client) => {
    const details = [];
    for (const name of ['../x', '/etc/x', 'a/../../b', '..\\x', 'a/./b']) {
      const text = toolError(await call(client, { code: 'print(1)', files: [{ name, content: 'x' }] }));
      expect(text.includes('files[0].name'), `error for ${JSON.stringify(name)} does not name files[0].name: ${short(text)}`);
      details.push(`${JSON.stringify(name)}: ${short(text, 60)}`);
    }
    return details.join(' | ');
  }],

  ['progress', async (client) => {
    const got = [];
    const t0 = Date.now();
    const sc = runResult(await call(client, {
      code: 'import time\nfor i in range(5):\n    print(f"step {i}", flush=True)\n    time.sleep(1)\nprint("done")',
    }, { onprogress: p => got.push({ ...p, at: Date.now() - t0 }) }));
    expect(sc.stdout.endsWith('done\n'), `stdout is ${short(sc.stdout)}`);
    expect(got.length >= 3, `got ${got.length} progress notifications for a 5 s program, want at least 3: ${short(got)}`);
    for (let i = 1; i < got.length; i++) {
      expect(got[i].progress > got[i - 1].progress, `progress does not increase: ${short(got)}`);
    }
    expect(got.every(p => p.total === undefined), `total is set: ${short(got)}`);
    // Before the program runs, a call that waits for a sandbox (a slow cold start, as under
    // gVisor) is told so: 'waiting for a sandbox (N s)'.
    expect(got.every(p => /^(running \d+ s, \d+ bytes of output|waiting for a sandbox \(\d+ s\))/.test(p.message)), `messages: ${short(got)}`);
    expect(got.some(p => /; last: step \d$/.test(p.message)), `no message quotes the last line: ${short(got)}`);
    return `${got.length} notifications; last: ${short(got[got.length - 1])}`;
  }],

  ['cancel', async (client) => {
    // Earlier calls' sandboxes are removed in the background: let them go first.
    let before = await sandboxes();
    for (let i = 0; before.length > 0 && i < 100; i++) {
      await sleep(100);
      before = await sandboxes();
    }
    expect(before.length === 0, `sandboxes of ${opts.instance} before the call: ${before}; the server must run with MCP_EXEC_POOL_SIZE=0 and MCP_EXEC_SESSION_POOL_SIZE=0`);
    const ac = new AbortController();
    let started;
    const running = new Promise(resolve => { started = resolve; });
    const pending = call(client, { code: 'import time\nprint("sleeping", flush=True)\ntime.sleep(60)', timeout_s: 120 },
      { signal: ac.signal, onprogress: started });
    const outcome = pending.then(r => ({ result: r }), err => ({ err }));
    const first = await Promise.race([running.then(() => 'progress'), outcome.then(() => 'ended'), sleep(30_000).then(() => 'timeout')]);
    expect(first === 'progress', `waiting for the program to run: ${first}`);
    const during = await sandboxes();
    expect(during.length === 1, `sandboxes while running: ${during.length}, want 1`);
    const t0 = Date.now();
    cancelledAnswer = null; // expect the Go SDK's answer from now on
    ac.abort('e2e cancels the call');
    const { err, result } = await outcome;
    expect(err && result === undefined, `the aborted call resolved: ${short(result)}`);
    let left = during;
    while (left.length > 0 && Date.now() - t0 < CANCEL_CLEANUP_MS + 3_000) {
      await sleep(50);
      left = await sandboxes();
    }
    const took = Date.now() - t0;
    expect(left.length === 0, `sandboxes ${left} still there ${took} ms after the abort`);
    expect(took <= CANCEL_CLEANUP_MS, `the sandbox was removed ${took} ms after the abort, want at most ${CANCEL_CLEANUP_MS} ms`);
    // The session is still good.
    const sc = runResult(await call(client, { code: 'print("after")' }));
    expect(sc.stdout === 'after\n', `call after the cancel: ${short(sc)}`);
    const answered = cancelledAnswer ? `${cancelledAnswer - t0} ms` : 'never';
    return `container ${during[0]} gone ${took} ms after the abort; server answered the cancelled call after ${answered} (${short(String(err?.message ?? err), 80)})`;
  }],

  ['no_stray_notifications', async () => {
    await sleep(200); // anything late would have arrived by now
    expect(strayErrors.length === 0, `the SDK reported: ${short(strayErrors)}`);
  }],
];

// ---- main ------------------------------------------------------------------------

function log(line) {
  process.stderr.write(`[rich.mjs ${transportName}] ${line}\n`);
}

const report = newReport(transportName, url, token);

{
  const client = new Client({ name: 'mcp-exec-e2e-rich', version: '1.0.0' }, { capabilities: {} });
  client.onerror = onSdkError;
  await runAndReport(client, stdioOrHTTPTransport(transportName, opts.cmd, url, token), checks, report, log);
}
