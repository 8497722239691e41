#!/usr/bin/env node
// End-to-end check of code mode with the official TypeScript MCP SDK, as an agent
// would use it: the server runs with --upstreams naming one stdio upstream, "records"
// (upstream.mjs, tools lookup and echo allowed, secret not), and this client
//
//   - lists the tools: exec (with tool_calls in its output schema) and tools_search;
//   - reads the index of upstream tools in exec's description;
//   - asks tools_search for the lookup tool's Python signature;
//   - runs ONE exec whose program calls records.lookup in a loop and prints a one-line
//     summary, and checks that the result is the summary and its tool_calls metadata,
//     not the records (the bytes reaching the client stay small);
//   - runs the same program in JavaScript (import { records } from "mcptools"), where
//     exec offers it, two of its calls at once (Promise.all);
//   - calls records.echo, which the file's "approve" list names, twice: this client
//     answers the elicitation (the human) with accept, then decline;
//   - where the server has sessions (not on the process backend): loads a table once
//     in a session, then three calls that each call records.lookup and records.echo
//     and use the table; each call has its own tool_calls and is asked its own
//     approval (none is reused); then, in that session, the same in JavaScript, the
//     second call calling through the module object the first kept in a global, and
//     through require.
//
//   node codemode.mjs --transport stdio [--cmd BINARY]
//   node codemode.mjs --transport http  [--url http://127.0.0.1:8080/mcp] [--token T]
//
// Like client.mjs it prints ONE JSON object on stdout, one line per check on stderr,
// and exits 0 only when every check passed. For stdio the server is spawned with this
// process's whole environment (set MCP_EXEC_UPSTREAMS there).
//
// Run `npm ci` in this directory first. e2e/codemode_e2e_test.go drives it.

import {
  AUTH_HEADER, TRANSPORT_OPTIONS, call, checkTransport, expect, newReport, parseOptions, runAndReport, short, stdioTransport, textOf, usageExit,
} from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const USAGE = 'usage: node codemode.mjs --transport stdio|http [--url URL] [--token T] [--cmd BINARY]';
const CALLS = 25;
const MAX_RESULT_BYTES = 8192; // the exec's whole result: a summary and metadata, not 25 records

const opts = parseOptions('codemode.mjs', USAGE, TRANSPORT_OPTIONS);
const transportName = checkTransport(opts, ['stdio', 'http'], (msg) => usageExit('codemode.mjs', USAGE, msg));
const token = opts.token ?? '';
const url = transportName === 'stdio' ? undefined : new URL(opts.url ?? 'http://127.0.0.1:8080/mcp');

function makeTransport() {
  if (transportName === 'stdio') return stdioTransport(opts.cmd);
  return new StreamableHTTPClientTransport(url, {
    requestInit: token ? { headers: { [AUTH_HEADER]: token } } : undefined,
  });
}

// The summary the program must print, computed here from upstream.mjs's records.
function expectedSummary() {
  const rows = Array.from({ length: CALLS }, (_, i) => ({ id: i, name: `record-${i}`, score: (i * 7) % 10 }));
  const best = rows.reduce((a, r) => (r.score > a.score || (r.score === a.score && r.id > a.id) ? r : a));
  const total = rows.reduce((s, r) => s + r.score, 0);
  return `${CALLS} records, total score ${total}, best ${best.name}\nsecret denied\n`;
}

const PROGRAM = `import mcptools
from mcptools import records
rows = [records.lookup(id=i) for i in range(${CALLS})]
best = max(rows, key=lambda r: (r["score"], r["id"]))
print(f"{len(rows)} records, total score {sum(r['score'] for r in rows)}, best {best['name']}")
try:
    mcptools._call("records", "secret", {})
except mcptools.ToolDenied:
    print("secret denied")
`;

// The same program in JavaScript (where exec's "language" offers it): two of the calls
// at once, and the denied one a call frame written on mcptools' own pipe by hand (the
// module has no function for a tool outside the allowlist), answered on its reply fd.
const JS_PROGRAM = `import { records } from "mcptools";
import { readdirSync, readlinkSync, readFileSync, readSync, writeSync } from "node:fs";
const rows = [];
for (let i = 0; i < ${CALLS - 2}; i++) rows.push(await records.lookup({ id: i }));
rows.push(...await Promise.all([records.lookup({ id: ${CALLS - 2} }), records.lookup({ id: ${CALLS - 1} })]));
const best = rows.reduce((a, r) => (r.score > a.score || (r.score === a.score && r.id > a.id) ? r : a));
console.log(\`\${rows.length} records, total score \${rows.reduce((s, r) => s + r.score, 0)}, best \${best.name}\`);
const mod = readdirSync("/proc/self/fd").find((f) => { try { return readlinkSync("/proc/self/fd/" + f).startsWith("/memfd:mcptools"); } catch { return false; } });
const [, callFd, replyFd] = readFileSync("/proc/self/fd/" + mod, "utf8").match(/_callFd = (\\d+), _replyFd = (\\d+)/).map(Number);
const body = Buffer.from(JSON.stringify({ server: "records", tool: "secret", arguments: {} }));
const msg = Buffer.alloc(8 + body.length); msg.writeUInt32BE(body.length, 0); msg.writeUInt32BE(1000, 4); body.copy(msg, 8);
writeSync(callFd, msg);
let buf = Buffer.alloc(0);
while (buf.length < 5 || buf.length < 5 + buf.readUInt32BE(1)) {
  const chunk = Buffer.alloc(65536);
  const n = readSync(replyFd, chunk);
  if (n === 0) throw new Error("no reply");
  buf = Buffer.concat([buf, chunk.subarray(0, n)]);
}
const reply = JSON.parse(buf.subarray(9, 5 + buf.readUInt32BE(1)));
console.log("secret " + reply.error?.kind);
`;

// The same in TypeScript: types, an interface, typed callbacks (esbuild strips them in
// the sandbox; the import of "mcptools" is rewritten after).
const TS_PROGRAM = JS_PROGRAM
  .replace('const rows = [];', 'interface Row { id: number; name: string; score: number }\nconst rows: Row[] = [];')
  .replace('const best = rows.reduce((a, r) =>', 'const best: Row = rows.reduce((a: Row, r: Row): Row =>');

// checkLoopResult checks an exec of PROGRAM, JS_PROGRAM or TS_PROGRAM: the summary, and its
// tool_calls metadata rather than the records. Returns the result's size.
function checkLoopResult(res) {
  expect(!res.isError, `isError: ${short(textOf(res))}`);
  const sc = res.structuredContent;
  expect(sc?.exit_code === 0, `exit_code ${sc?.exit_code}; stderr: ${short(sc?.stderr, 2000)}`);
  expect(sc.stdout === expectedSummary(), `stdout ${JSON.stringify(sc.stdout)}, want ${JSON.stringify(expectedSummary())}`);
  // tool_calls lists the first 20 calls; tool_calls_more counts the rest by tool
  // and status. The secret call names a tool outside the allowlist: its record says
  // unknown, never the program's text.
  const calls = sc.tool_calls ?? [];
  const more = sc.tool_calls_more ?? [];
  const count = (tool, status) => calls.filter(c => c.server === 'records' && c.tool === tool && c.status === status).length +
    more.filter(g => g.server === 'records' && g.tool === tool && g.status === status).reduce((n, g) => n + g.count, 0);
  expect(calls.length === 20 && count('lookup', 'ok') === CALLS && count('unknown', 'denied') === 1 && more.length === 2,
    `tool_calls: ${short(calls.map(c => `${c.tool}:${c.status}`))}; tool_calls_more: ${short(more)}`);
  expect([...calls, ...more].every(c => !('arguments' in c) && !('result' in c)), 'tool_calls carry arguments or results');
  const size = JSON.stringify(res).length;
  expect(size <= MAX_RESULT_BYTES, `the result is ${size} bytes, want at most ${MAX_RESULT_BYTES}`);
  return size;
}

let execTool;
let sessionsOn = false;
let tableSession; // session_table_then_three_calls's, for javascript_session_calls_in_a_loop

// The human: accepts the call whose arguments say approve-me, declines the others.
const questions = [];
function answerElicitation(req) {
  questions.push(req.params.message);
  return { action: req.params.message.includes('approve-me') ? 'accept' : 'decline', content: {} };
}

const checks = [
  ['list_tools', async (client) => {
    const { tools } = await client.listTools();
    const names = tools.map(t => t.name).sort();
    // Exact per configuration: run_wait and run_cancel wherever background runs are on
    // (every backend but Kubernetes), the session tools unless --max-sessions is 0.
    const runsOn = process.env.MCP_EXEC_BACKEND !== 'kubernetes';
    sessionsOn = process.env.MCP_EXEC_MAX_SESSIONS !== '0';
    const want = ['exec', ...(runsOn ? ['run_cancel', 'run_wait'] : []),
      ...(sessionsOn ? ['session_close', 'session_create'] : []), 'tools_search'].join(',');
    expect(names.join(',') === want, `tools are ${names}, want ${want}`);
    execTool = tools.find(t => t.name === 'exec');
    expect(execTool.outputSchema?.properties?.tool_calls, `exec's output schema has no tool_calls: ${short(execTool.outputSchema)}`);
    return names.join(', ');
  }],

  ['index_in_description', async () => {
    const d = execTool.description;
    for (const want of ['Code mode', 'from mcptools import records', 'records.lookup: Look up record id', 'records.echo: Echo the text back.']) {
      expect(d.includes(want), `exec's description lacks ${JSON.stringify(want)}: ${short(d.slice(d.indexOf('Code mode')), 600)}`);
    }
    expect(!d.includes('secret'), 'the index names a tool the allowlist leaves out');
    return `${d.length} chars`;
  }],

  ['tools_search', async (client) => {
    const res = await client.callTool({ name: 'tools_search', arguments: { query: 'lookup' } });
    const text = textOf(res);
    expect(!res.isError && text.includes('records.lookup(*, id: int)'), `tools_search: ${short(text)}`);
    return short(text.split('\n')[1], 80);
  }],

  ['exec_calls_in_a_loop', async (client) => {
    const size = checkLoopResult(await call(client, { code: PROGRAM }));
    return `${CALLS} calls, ${size} bytes reached the client`;
  }],

  ['javascript_calls_in_a_loop', async (client) => {
    if (!execTool.inputSchema?.properties?.language?.enum?.includes('javascript')) return 'no javascript on this server';
    const size = checkLoopResult(await call(client, { code: JS_PROGRAM, language: 'javascript' }));
    return `${CALLS} calls from JavaScript, ${size} bytes reached the client`;
  }],

  ['typescript_calls_in_a_loop', async (client) => {
    if (!execTool.inputSchema?.properties?.language?.enum?.includes('typescript')) return 'no typescript on this server';
    const size = checkLoopResult(await call(client, { code: TS_PROGRAM, language: 'typescript' }));
    return `${CALLS} calls from TypeScript, ${size} bytes reached the client`;
  }],

  ['approval_by_elicitation', async (client) => {
    const res = await call(client, { code: `import mcptools
from mcptools import records
print(records.echo(text="approve-me"))
try:
    records.echo(text="decline-me")
except mcptools.ToolDenied as e:
    print("denied:", e)
` });
    const sc = res.structuredContent;
    expect(sc?.exit_code === 0, `exit_code ${sc?.exit_code}; stderr: ${short(sc?.stderr, 2000)}`);
    const want = 'approve-me\ndenied: records.echo needs a human\'s approval, and the human declined the call\n';
    expect(sc.stdout === want, `stdout ${JSON.stringify(sc.stdout)}, want ${JSON.stringify(want)}`);
    const got = (sc.tool_calls ?? []).map(c => `${c.tool}:${c.status}:${c.approval}`).join(' ');
    expect(got === 'echo:ok:accepted echo:declined:declined', `tool_calls: ${got}`);
    expect(questions.length === 2 && questions.every(q => q.includes('records.echo')), `questions: ${short(questions)}`);
    return `asked ${questions.length} times: accepted, declined`;
  }],

  ['session_table_then_three_calls', async (client) => {
    if (!sessionsOn) return 'no sessions on this backend';
    const created = await client.callTool({ name: 'session_create', arguments: {} });
    expect(!created.isError, `session_create: ${short(textOf(created))}`);
    const sessionId = created.structuredContent.session_id;
    const load = await call(client, { code: 'table = {i: f"row-{i}" for i in range(10)}\nprint(len(table))\n', session_id: sessionId });
    expect(!load.isError && load.structuredContent?.stdout === '10\n', `loading the table: ${short(textOf(load))}`);
    const asked = questions.length;
    for (const i of [1, 2, 3]) {
      const res = await call(client, {
        code: `from mcptools import records
r = records.lookup(id=${i})
print(r["name"], table[r["score"]], records.echo(text="approve-me ${i}"))
`, session_id: sessionId,
      });
      const sc = res.structuredContent;
      const want = `record-${i} row-${(i * 7) % 10} approve-me ${i}\n`;
      expect(!res.isError && sc?.stdout === want, `call ${i}: stdout ${JSON.stringify(sc?.stdout)}, want ${JSON.stringify(want)}; ${short(textOf(res), 2000)}`);
      expect(sc.session?.execution_count === i + 1 && sc.session?.state === 'kept', `call ${i}: session ${short(sc.session)}`);
      const got = (sc.tool_calls ?? []).map(c => `${c.tool}:${c.status}`).join(' ');
      expect(got === 'lookup:ok echo:ok', `call ${i}: tool_calls ${got}, want this call's two`);
      expect(questions.length === asked + i, `call ${i}: ${questions.length - asked} approvals asked, want one per call`);
    }
    tableSession = sessionId; // closed by javascript_session_calls_in_a_loop
    return 'a table loaded once, three calls with tools used it, an approval asked in each';
  }],

  ['javascript_session_calls_in_a_loop', async (client) => {
    if (!sessionsOn) return 'no sessions on this backend';
    const sessionId = tableSession;
    expect(sessionId, 'no session left by session_table_then_three_calls');
    tableSession = undefined;
    if (!execTool.inputSchema?.properties?.language?.enum?.includes('javascript')) {
      await client.callTool({ name: 'session_close', arguments: { session_id: sessionId } });
      return 'no javascript on this server';
    }
    // In the Python check's session (one session per run). The first call keeps the
    // module's object in a global; the second calls through it and through require,
    // each call with its own tool_calls and approval.
    const programs = [`import { records } from "mcptools";
globalThis.kept = records;
const rows = [];
for (let i = 0; i < ${CALLS}; i++) rows.push(await records.lookup({ id: i }));
console.log(rows.length, await records.echo({ text: "approve-me js 1" }));
`, `const rows2 = await Promise.all([kept.lookup({ id: 1 }), require("mcptools").records.lookup({ id: 2 })]);
console.log(rows.length + rows2.length, rows2.map((r) => r.name).join(","), await kept.echo({ text: "approve-me js 2" }));
`];
    const asked = questions.length;
    const wants = [[`${CALLS} approve-me js 1\n`, CALLS], [`${CALLS + 2} record-1,record-2 approve-me js 2\n`, 2]];
    for (const [i, code] of programs.entries()) {
      const res = await call(client, { code, language: 'javascript', session_id: sessionId });
      const sc = res.structuredContent;
      const [want, lookups] = wants[i];
      expect(!res.isError && sc?.stdout === want, `call ${i + 1}: stdout ${JSON.stringify(sc?.stdout)}, want ${JSON.stringify(want)}; ${short(textOf(res), 2000)}`);
      expect(sc.session?.state === 'kept' && sc.session?.execution_count === i + 5, `call ${i + 1}: session ${short(sc.session)}`);
      const all = [...(sc.tool_calls ?? []), ...(sc.tool_calls_more ?? [])];
      const count = (tool) => all.filter(c => c.tool === tool && c.status === 'ok').reduce((n, c) => n + (c.count ?? 1), 0);
      expect(count('lookup') === lookups && count('echo') === 1, `call ${i + 1}: tool_calls ${short(all)}, want ${lookups} lookups and an echo`);
      expect(questions.length === asked + i + 1, `call ${i + 1}: ${questions.length - asked} approvals asked, want one per call`);
    }
    const closed = await client.callTool({ name: 'session_close', arguments: { session_id: sessionId } });
    expect(!closed.isError, `session_close: ${short(textOf(closed))}`);
    return `${CALLS + 2} calls from two JavaScript calls in Python's session, a kept module object, an approval asked in each`;
  }],
];

function log(line) {
  process.stderr.write(`[codemode.mjs ${transportName}] ${line}\n`);
}

const report = newReport(transportName, url, token);
const client = new Client({ name: 'mcp-exec-e2e-codemode', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (req) => answerElicitation(req));
await runAndReport(client, makeTransport(), checks, report, log);
