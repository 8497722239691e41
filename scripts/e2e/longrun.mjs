#!/usr/bin/env node
// Long-run client for mcp-exec: does a program that runs longer than the client's
// request timeout complete when the client resets that timeout on progress?
// Built on the official TypeScript SDK, whose default request timeout is 60 s.
//
//   node longrun.mjs --transport http --url http://127.0.0.1:8080/mcp [--token T]
//                    [--timeout-ms 6000] [--run-s 15]
//   node longrun.mjs --transport stdio --cmd BINARY [--timeout-ms 6000] [--run-s 15]
//
// It makes the same exec call twice, a program that prints a line a second for
// --run-s seconds, both times with a progress handler (so the request carries a
// progress token) and a request timeout of --timeout-ms:
//   with_reset:    resetTimeoutOnProgress true: must complete with the whole output;
//   without_reset: the SDK's default (false): must fail with the SDK's timeout.
// For http the token, if given, goes in Authorization: Bearer. It prints ONE JSON
// object on stdout; the exit status is 0 when both behaved as described, 1 otherwise,
// 2 for a usage error. e2e/longrun_test.go drives it.

import { parseOptions, stdioTransport, usageExit } from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

const USAGE = 'usage: node longrun.mjs --transport http|stdio [--url URL] [--token T] [--cmd BINARY] [--timeout-ms MS] [--run-s S]';

function usage(msg) {
  usageExit('longrun.mjs', USAGE, msg);
}

const opts = parseOptions('longrun.mjs', USAGE, {
  transport: { type: 'string', default: 'http' },
  url: { type: 'string' },
  token: { type: 'string' },
  cmd: { type: 'string' },
  'timeout-ms': { type: 'string', default: '6000' },
  'run-s': { type: 'string', default: '15' },
});
const timeoutMs = Number(opts['timeout-ms']);
const runS = Number(opts['run-s']);
if (!Number.isInteger(timeoutMs) || timeoutMs < 1) usage(`--timeout-ms must be a positive integer`);
if (!Number.isInteger(runS) || runS * 1000 <= timeoutMs) usage(`--run-s must be an integer longer than the timeout`);
if (opts.transport === 'http' && !opts.url) usage('--url is required for http');
if (opts.transport === 'stdio' && !opts.cmd) usage('--cmd is required for stdio');

function makeTransport() {
  if (opts.transport === 'stdio') {
    return stdioTransport(opts.cmd);
  }
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
}

const code = [
  'import time',
  `for i in range(${runS}):`,
  `    print(f"step {i + 1} of ${runS}", flush=True)`,
  '    time.sleep(1)',
  'print("done")',
].join('\n');
const wantStdout = Array.from({ length: runS }, (_, i) => `step ${i + 1} of ${runS}\n`).join('') + 'done\n';

// run makes the call and describes what happened, with the progress it saw.
async function run(client, reset) {
  const t0 = Date.now();
  const times = [];
  let last = null;
  const out = { reset, timeout_ms: timeoutMs, run_s: runS };
  try {
    const result = await client.callTool(
      { name: 'exec', arguments: { code, timeout_s: runS + 60 } },
      undefined,
      {
        timeout: timeoutMs,
        resetTimeoutOnProgress: reset,
        onprogress: (p) => { times.push(Date.now() - t0); last = p; },
      },
    );
    const sc = result.structuredContent ?? {};
    out.completed = !result.isError && sc.exit_code === 0 && sc.stdout === wantStdout;
    out.exit_code = sc.exit_code;
    out.stdout_ok = sc.stdout === wantStdout;
  } catch (err) {
    out.completed = false;
    out.error = String(err?.message ?? err);
    out.error_code = err instanceof McpError ? err.code : null;
    out.timed_out = err instanceof McpError && err.code === ErrorCode.RequestTimeout;
  }
  out.elapsed_ms = Date.now() - t0;
  out.progress_count = times.length;
  const gaps = times.slice(1).map((t, i) => t - times[i]);
  out.first_progress_ms = times[0] ?? null;
  out.max_gap_ms = gaps.length ? Math.max(...gaps) : null;
  out.mean_gap_ms = gaps.length ? Math.round(gaps.reduce((a, b) => a + b, 0) / gaps.length) : null;
  out.last_message = last?.message ?? null;
  return out;
}

const report = { ok: false, transport: opts.transport };
const client = new Client({ name: 'mcp-exec-longrun', version: '1.0.0' });
try {
  await client.connect(makeTransport());
  report.with_reset = await run(client, true);
  process.stderr.write(`with reset: ${JSON.stringify(report.with_reset)}\n`);
  report.without_reset = await run(client, false);
  process.stderr.write(`without reset: ${JSON.stringify(report.without_reset)}\n`);
  // The SDK sends notifications/cancelled for the call it gave up on without
  // awaiting it; give it a moment to leave before close() aborts what is in flight.
  await new Promise((r) => setTimeout(r, 1000));
  report.ok = report.with_reset.completed && !report.without_reset.completed && report.without_reset.timed_out === true;
} catch (err) {
  report.error = String(err?.stack ?? err);
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(report) + '\n');
process.exit(report.ok ? 0 : 1);
