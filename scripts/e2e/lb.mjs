#!/usr/bin/env node
// Load-balancer client for mcp-exec: one MCP client (the official TypeScript SDK) over
// streamable HTTP makes N exec calls through a load balancer in front of stateless
// replicas, and checks every result.
//
//   node lb.mjs --url http://127.0.0.1:8080/mcp [--token T] [--calls 50]
//               [--concurrency 4] [--upstream-header X-Upstream]
//
// Call i runs `print(i*i)` and must return exactly that on stdout with exit code 0.
// When the balancer names the replica that answered in a response header (nginx:
// `add_header X-Upstream $upstream_addr always;`), the report counts the requests
// each replica answered, per JSON-RPC method. It prints ONE JSON object on stdout;
// progress goes to stderr. Exit status: 0 when every call was right, 1 otherwise,
// 2 for a usage error. e2e/lb_test.go drives it.


import { CALL_TIMEOUT_MS, parseOptions, usageExit } from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const USAGE = 'usage: node lb.mjs --url URL [--token T] [--calls N] [--concurrency C] [--upstream-header NAME]';

function usage(msg) {
  usageExit('lb.mjs', USAGE, msg);
}

const opts = parseOptions('lb.mjs', USAGE, {
  url: { type: 'string' },
  token: { type: 'string' },
  calls: { type: 'string', default: '50' },
  concurrency: { type: 'string', default: '4' },
  'upstream-header': { type: 'string', default: 'X-Upstream' },
});
if (!opts.url) usage('--url is required');
const calls = Number(opts.calls);
const concurrency = Number(opts.concurrency);
if (!Number.isInteger(calls) || calls < 1) usage(`--calls must be a positive integer, got ${opts.calls}`);
if (!Number.isInteger(concurrency) || concurrency < 1) usage(`--concurrency must be a positive integer, got ${opts.concurrency}`);
const token = opts.token ?? '';
const upstreamHeader = opts['upstream-header'];

const report = {
  ok: false,
  url: opts.url,
  calls,
  concurrency,
  correct: 0,
  failures: [],
  // upstream -> JSON-RPC method (or "GET", "DELETE") -> responses
  upstreams: {},
  statuses: {},
  session_id: undefined,
  server: undefined,
  error: undefined,
  duration_ms: undefined,
};

function methodsOf(body) {
  if (typeof body !== 'string') return [];
  try {
    const msg = JSON.parse(body);
    return (Array.isArray(msg) ? msg : [msg]).map(m => m?.method ?? (m?.result !== undefined ? 'response' : '?'));
  } catch {
    return ['?'];
  }
}

async function countingFetch(input, init = {}) {
  const headers = new Headers(init.headers ?? undefined);
  if (token) headers.set('X-MCP-AUTH', token);
  const method = (init.method ?? 'GET').toUpperCase();
  const res = await fetch(input, { ...init, headers });
  const up = res.headers.get(upstreamHeader) ?? '(none)';
  const kinds = method === 'POST' ? methodsOf(init.body) : [method];
  report.upstreams[up] ??= {};
  for (const k of kinds) report.upstreams[up][k] = (report.upstreams[up][k] ?? 0) + 1;
  const key = `${method} ${res.status}`;
  report.statuses[key] = (report.statuses[key] ?? 0) + 1;
  return res;
}

function log(line) {
  process.stderr.write(`[lb.mjs] ${line}\n`);
}

async function one(client, i) {
  const want = `${i * i}\n`;
  try {
    const r = await client.callTool({ name: 'exec', arguments: { code: `print(${i}*${i})` } }, undefined,
      { timeout: CALL_TIMEOUT_MS });
    const sc = r.structuredContent ?? {};
    if (r.isError || sc.stdout !== want || sc.exit_code !== 0) {
      report.failures.push({ i, isError: r.isError, stdout: sc.stdout, exit_code: sc.exit_code,
        stderr: String(sc.stderr ?? '').slice(0, 300), text: JSON.stringify(r.content ?? []).slice(0, 300) });
      return;
    }
    report.correct++;
  } catch (err) {
    report.failures.push({ i, error: String(err?.message ?? err).slice(0, 300) });
  }
}

async function main() {
  const t0 = Date.now();
  const client = new Client({ name: 'mcp-exec-lb', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
    requestInit: token ? { headers: { 'X-MCP-AUTH': token } } : undefined,
    fetch: countingFetch,
  });
  try {
    await client.connect(transport);
    report.server = client.getServerVersion();
    report.session_id = transport.sessionId ?? null;
    log(`connected to ${JSON.stringify(report.server)}, session ${report.session_id}`);
    let next = 0;
    const worker = async () => {
      while (next < calls) await one(client, next++);
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, calls) }, worker));
    report.ok = report.correct === calls;
  } catch (err) {
    report.error = String(err?.stack ?? err);
  } finally {
    try {
      await client.close();
    } catch (err) {
      log(`closing: ${err?.message ?? err}`);
    }
    report.duration_ms = Date.now() - t0;
  }
}

await main();
log(`${report.ok ? 'OK' : 'FAILED'}: ${report.correct} of ${calls} calls right in ${report.duration_ms} ms; ` +
  `upstreams ${JSON.stringify(report.upstreams)}` + (report.error ? `; error ${report.error}` : ''));
process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(report.ok ? 0 : 1));
