#!/usr/bin/env node
// End-to-end client for mcp-exec, built on the official TypeScript MCP SDK so that the
// server is checked by an implementation other than the Go SDK it is built with.
//
//   node client.mjs --transport stdio [--cmd BINARY]
//   node client.mjs --transport http  [--url http://127.0.0.1:8080/mcp] [--token T]
//   node client.mjs --transport sse   [--url http://127.0.0.1:8080/sse] [--token T]
//
// It connects, runs a fixed battery of checks against the exec tool and prints ONE JSON
// object on stdout (see `report` below). Progress, one line per check, goes to stderr,
// and so does the server's own stderr for stdio. The exit status is 0 only when the
// connection succeeded and every check passed, 1 otherwise, 2 for a usage error.
//
// For stdio the server (BINARY, default "mcp-exec" on PATH) is spawned with this
// process's whole environment, so set MCP_EXEC_* variables (e.g. MCP_EXEC_INSTANCE,
// MCP_EXEC_IMAGE) and DOCKER_HOST for it here. For http and sse the token, if given, is
// sent in the X-MCP-AUTH header of every request: the POSTs, the GET that opens the
// event stream and, for http, the session's DELETE.
//
// Run `npm ci` in this directory first. e2e/e2e_test.go (TestE2E) drives it.


import {
  AUTH_HEADER, TRANSPORT_OPTIONS, call, checkTransport, expect, newReport, parseOptions, runAndReport, short, stdioTransport, textOf, toolError, usageExit,
} from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const STDIN_LIMIT = 1 << 20; // the server's default MCP_EXEC_MAX_STDIN_BYTES

const USAGE = 'usage: node client.mjs --transport stdio|http|sse [--url URL] [--token T] [--cmd BINARY]';

function usage(msg) {
  usageExit('client.mjs', USAGE, msg);
}

const opts = parseOptions('client.mjs', USAGE, TRANSPORT_OPTIONS);
const transportName = checkTransport(opts, ['stdio', 'http', 'sse'], usage);
const token = opts.token ?? '';
const url = transportName === 'stdio' ? undefined
  : new URL(opts.url ?? `http://127.0.0.1:8080/${transportName === 'http' ? 'mcp' : 'sse'}`);

// Every HTTP request the transports make goes through recordingFetch, which makes
// sure the auth header is on it and counts requests by method and status, and how
// many already carried the token when the SDK handed them over (fromSdk) and when
// they left (withToken), so the report shows the header really went everywhere.
const requests = { total: 0, byMethod: {}, statuses: {}, fromSdk: 0, withToken: 0 };

async function recordingFetch(input, init = {}) {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  if (token && headers.get(AUTH_HEADER) === token) requests.fromSdk++;
  if (token) headers.set(AUTH_HEADER, token);
  const method = (init.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  requests.total++;
  requests.byMethod[method] = (requests.byMethod[method] ?? 0) + 1;
  if (token && headers.get(AUTH_HEADER) === token) requests.withToken++;
  const res = await fetch(input, { ...init, headers });
  const key = `${method} ${res.status}`;
  requests.statuses[key] = (requests.statuses[key] ?? 0) + 1;
  return res;
}

function makeTransport() {
  const requestInit = token ? { headers: { [AUTH_HEADER]: token } } : undefined;
  switch (transportName) {
    case 'stdio':
      return stdioTransport(opts.cmd);
    case 'http':
      return new StreamableHTTPClientTransport(url, { requestInit, fetch: recordingFetch });
    case 'sse':
      // The GET that opens the stream goes through eventSourceInit.fetch, the POSTs
      // through fetch; both add the header (and so does requestInit, via the SDK).
      return new SSEClientTransport(url, {
        requestInit,
        fetch: recordingFetch,
        eventSourceInit: { fetch: recordingFetch },
      });
  }
  throw new Error('unreachable');
}

// ---- helpers for checks ----------------------------------------------------------

// runResult checks the shape every successful run shares and returns structuredContent.
function runResult(result) {
  expect(!result.isError, `isError is ${result.isError}, want falsy; text: ${short(textOf(result))}`);
  const sc = result.structuredContent;
  expect(sc && typeof sc === 'object', `no structuredContent: ${short(result)}`);
  expect((result.content ?? []).some(c => c.type === 'text' && c.text.length > 0),
    `no non-empty text content block: ${short(result.content)}`);
  for (const [k, t] of [['stdout', 'string'], ['stderr', 'string'], ['exit_code', 'number'],
    ['duration_ms', 'number'], ['truncated', 'boolean'], ['timed_out', 'boolean']]) {
    expect(typeof sc[k] === t, `structuredContent.${k} is ${short(sc[k])}, want a ${t}`);
  }
  return sc;
}

// ---- the battery -----------------------------------------------------------------

const checks = [
  ['list_tools', async (client) => {
    const { tools } = await client.listTools();
    // exec; run_cancel and run_wait where the backend has background runs (docker and
    // process); session_create and session_close where it has sessions (the docker and
    // kubernetes backends by default; not under gVisor or standalone).
    const names = (Array.isArray(tools) ? tools.map(t => t.name) : []).sort().join(',');
    expect(['exec', 'exec,session_close,session_create', 'exec,run_cancel,run_wait', 'exec,run_cancel,run_wait,session_close,session_create'].includes(names),
      `want exec (and the run and session tools), got ${short(tools?.map(t => t.name))}`);
    const tool = tools.find(t => t.name === 'exec');
    expect(tool.name === 'exec', `tool is named ${short(tool.name)}, want exec`);
    const is = tool.inputSchema ?? {};
    const p = is.properties ?? {};
    expect(is.type === 'object', `inputSchema.type is ${short(is.type)}`);
    expect(p.code?.type === 'string', `inputSchema code: ${short(p.code)}`);
    expect(p.timeout_s?.type === 'integer', `inputSchema timeout_s: ${short(p.timeout_s)}`);
    expect(p.stdin?.type === 'string', `inputSchema stdin: ${short(p.stdin)}`);
    expect(Array.isArray(is.required) && is.required.includes('code'),
      `inputSchema.required is ${short(is.required)}, want it to include code`);
    expect(!is.required.includes('timeout_s') && !is.required.includes('stdin'),
      `timeout_s and stdin must be optional, required is ${short(is.required)}`);
    const op = tool.outputSchema?.properties ?? {};
    for (const k of ['stdout', 'stderr', 'exit_code', 'duration_ms', 'truncated', 'timed_out']) {
      expect(k in op, `outputSchema has no ${k}: ${short(Object.keys(op))}`);
    }
    expect(typeof tool.description === 'string' && tool.description.length > 0, 'tool has no description');
    return `input ${Object.keys(p).join(',')}; output ${Object.keys(op).join(',')}`;
  }],

  ['hello', async (client) => {
    const sc = runResult(await call(client, { code: "print('hello')" }));
    expect(sc.stdout === 'hello\n', `stdout is ${short(sc.stdout)}, want "hello\\n"`);
    expect(sc.exit_code === 0, `exit_code is ${sc.exit_code}, want 0; stderr: ${short(sc.stderr)}`);
    expect(sc.timed_out === false && sc.truncated === false, `flags: ${short(sc)}`);
    return `duration_ms ${sc.duration_ms}`;
  }],

  ['background', async (client) => {
    // Plain tool calls, for clients without tasks: exec answers with a run_id at once,
    // run_wait shows the run's output so far, then its result in exec's own shape.
    const { tools } = await client.listTools();
    if (!tools.some(t => t.name === 'run_wait')) return 'no background runs on this backend';
    const started = await call(client, { code: "import time\nprint('a', flush=True)\ntime.sleep(3)\nprint('b')", background: true });
    const st = started.structuredContent ?? {};
    expect(!started.isError && st.status === 'running' && /^run_/.test(st.run_id ?? '') && typeof st.expires_at === 'string',
      `exec background: ${short(started)}`);
    let polls = 0;
    let sawTail = false;
    for (;;) {
      const w = await client.callTool({ name: 'run_wait', arguments: { run_id: st.run_id, timeout_s: 1 } });
      const sc = w.structuredContent ?? {};
      polls++;
      if (sc.status === 'running') {
        sawTail ||= sc.stdout_tail === 'a\n';
        expect(polls < 60, `still running after ${polls} polls: ${short(sc)}`);
        continue;
      }
      const r = runResult(w);
      expect(r.status === 'completed' && r.run_id === st.run_id && r.stdout === 'a\nb\n' && r.exit_code === 0,
        `run_wait's result: ${short(r)}`);
      break;
    }
    expect(sawTail, 'no run_wait while running showed the stdout tail "a\\n"');
    return `completed after ${polls} run_wait calls`;
  }],

  ['stdin_roundtrip', async (client) => {
    const input = 'line one\nzwei: ünïcödé ✓ 🐍\n\tlast line without newline';
    const sc = runResult(await call(client, {
      code: 'import sys\nsys.stdout.write(sys.stdin.read())',
      stdin: input,
    }));
    expect(sc.exit_code === 0, `exit_code is ${sc.exit_code}; stderr: ${short(sc.stderr)}`);
    expect(sc.stdout === input, `stdout is ${short(sc.stdout)}, want ${short(input)}`);
  }],

  ['exit_code_3', async (client) => {
    const sc = runResult(await call(client, { code: 'import sys\nsys.exit(3)' }));
    expect(sc.exit_code === 3, `exit_code is ${sc.exit_code}, want 3`);
  }],

  ['exception', async (client) => {
    const sc = runResult(await call(client, { code: "raise ValueError('boom')" }));
    expect(sc.exit_code === 1, `exit_code is ${sc.exit_code}, want 1`);
    expect(sc.stderr.includes('ValueError'), `stderr does not mention ValueError: ${short(sc.stderr)}`);
  }],

  ['timeout', async (client) => {
    const t0 = Date.now();
    const sc = runResult(await call(client, { code: 'while True:\n    pass', timeout_s: 1 }));
    expect(sc.timed_out === true, `timed_out is ${sc.timed_out}, want true; ${short(sc)}`);
    expect(sc.exit_code !== 0, `exit_code is 0 after a timeout`);
    return `exit_code ${sc.exit_code}, duration_ms ${sc.duration_ms}, call took ${Date.now() - t0} ms`;
  }],

  ['empty_code', async (client) => {
    const text = toolError(await call(client, { code: '' }));
    expect(/empty/i.test(text), `error text does not mention "empty": ${short(text)}`);
    return short(text, 120);
  }],

  ['negative_timeout', async (client) => {
    const text = toolError(await call(client, { code: 'print(1)', timeout_s: -1 }));
    expect(text.includes('timeout_s'), `error text does not name timeout_s: ${short(text)}`);
    return short(text, 120);
  }],

  ['stdin_too_large', async (client) => {
    const text = toolError(await call(client, { code: 'print(1)', stdin: 'x'.repeat(STDIN_LIMIT + 1) }));
    expect(/limit/i.test(text) && text.includes(String(STDIN_LIMIT)),
      `error text does not state the ${STDIN_LIMIT}-byte limit: ${short(text)}`);
    return short(text, 120);
  }],

  ['unknown_argument', async (client) => {
    let result;
    try {
      result = await call(client, { code: 'print(1)', bogus: true });
    } catch (err) {
      // A protocol error (e.g. -32602 invalid params) is an acceptable refusal too.
      expect(typeof err?.code === 'number', `call failed without a JSON-RPC error: ${err?.stack ?? err}`);
      return `protocol error ${err.code}: ${short(err.message, 120)}`;
    }
    const text = toolError(result);
    return `tool error: ${short(text, 120)}`;
  }],

  ['network_blocked', async (client) => {
    const sc = runResult(await call(client, {
      code: 'import socket\nsocket.create_connection(("1.1.1.1", 53), timeout=2)\nprint("CONNECTED")',
    }));
    expect(sc.exit_code !== 0, `exit_code is 0: the sandbox reached the network; stdout ${short(sc.stdout)}`);
    expect(!sc.stdout.includes('CONNECTED'), 'the sandbox reached the network');
    const last = sc.stderr.trim().split('\n').pop();
    return `exit_code ${sc.exit_code}: ${short(last, 120)}`;
  }],
];

if (token) {
  checks.push(['auth_header_sent', async () => {
    expect(requests.total > 0, 'no HTTP request went through the recording fetch');
    expect(requests.withToken === requests.total,
      `${requests.total - requests.withToken} of ${requests.total} requests lacked the token`);
    if (transportName === 'sse') {
      expect((requests.byMethod.GET ?? 0) >= 1, `no GET (event stream) was recorded: ${short(requests)}`);
    }
    expect((requests.byMethod.POST ?? 0) >= 1, `no POST was recorded: ${short(requests)}`);
    return `${short(requests.byMethod)}; ${requests.fromSdk} of ${requests.total} had it from the SDK already`;
  }]);
}

// ---- main ------------------------------------------------------------------------

function log(line) {
  process.stderr.write(`[client.mjs ${transportName}] ${line}\n`);
}

const report = newReport(transportName, url, token, { requests: transportName === 'stdio' ? undefined : requests });

{
  const client = new Client({ name: 'mcp-exec-e2e', version: '1.0.0' }, { capabilities: {} });
  await runAndReport(client, makeTransport(), checks, report, log);
}
