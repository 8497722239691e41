// What the e2e clients (client.mjs, rich.mjs, session.mjs, lb.mjs) share: the protocol constants,
// the check helpers, and the loop that connects, runs a battery of checks and prints
// ONE JSON report on stdout (progress on stderr), exiting 0 only when every check
// passed.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const AUTH_HEADER = 'X-MCP-AUTH';
export const CONNECT_TIMEOUT_MS = 30_000;
export const CALL_TIMEOUT_MS = 120_000;

// usageExit prints msg and the usage line, and exits with status 2.
export function usageExit(script, usage, msg) {
  process.stderr.write(`${script}: ${msg}\n${usage}\n`);
  process.exit(2);
}

// parseOptions parses the command line (named options only) with node:util's
// parseArgs; a bad one exits through usageExit, and --help, when the script has it,
// prints the usage line and exits 0.
export function parseOptions(script, usage, options) {
  let values;
  try {
    ({ values } = parseArgs({ options, strict: true, allowPositionals: false }));
  } catch (err) {
    usageExit(script, usage, err.message);
  }
  if (values.help) {
    process.stdout.write(usage + '\n');
    process.exit(0);
  }
  return values;
}

// TRANSPORT_OPTIONS are the options of a client that talks to one server: over stdio
// (it spawns --cmd) or over the network (--url, with --token).
export const TRANSPORT_OPTIONS = {
  transport: { type: 'string' },
  url: { type: 'string' },
  token: { type: 'string' },
  cmd: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

// checkTransport checks TRANSPORT_OPTIONS against the transports the client knows
// (stdio first), and returns the transport's name; usage(msg) is called on a mistake.
export function checkTransport(opts, known, usage) {
  const name = opts.transport;
  if (!known.includes(name)) {
    const list = known.slice(0, -1).join(', ') + ' or ' + known.at(-1);
    usage(`--transport must be ${list}, got ${JSON.stringify(name ?? '')}`);
  }
  if (name === 'stdio' && (opts.url || opts.token)) {
    usage(`--url and --token are for ${known.filter(t => t !== 'stdio').join(' and ')} only`);
  }
  if (name !== 'stdio' && opts.cmd) {
    usage('--cmd is for stdio only');
  }
  return name;
}

// stdioTransport spawns the server (cmd, default mcp-exec on PATH) over stdio, with this
// process's whole environment (MCP_EXEC_* and DOCKER_HOST reach it) and its stderr.
export function stdioTransport(cmd) {
  return new StdioClientTransport({
    command: cmd ?? 'mcp-exec',
    args: [],
    env: { ...process.env, MCP_EXEC_TRANSPORT: 'stdio' },
    stderr: 'inherit',
  });
}

// stdioOrHTTPTransport is the transport of a client that speaks stdio (the server
// spawned from cmd, stdioTransport) or streamable HTTP to url, with the token in
// AUTH_HEADER when one is given.
export function stdioOrHTTPTransport(name, cmd, url, token) {
  if (name === 'stdio') {
    return stdioTransport(cmd);
  }
  return new StreamableHTTPClientTransport(url, {
    requestInit: token ? { headers: { [AUTH_HEADER]: token } } : undefined,
  });
}

export function sdkVersion() {
  try {
    const p = new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url);
    return JSON.parse(readFileSync(p, 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

export class CheckError extends Error {}

export function expect(cond, msg) {
  if (!cond) throw new CheckError(msg);
}

export function short(v, n = 300) {
  let s = typeof v === 'string' ? v : JSON.stringify(v);
  if (s === undefined) s = String(v);
  return s.length > n ? s.slice(0, n) + `... (${s.length} chars)` : s;
}

export function textOf(result) {
  return (result?.content ?? []).filter(c => c.type === 'text').map(c => c.text).join('\n');
}

// call calls the exec tool with args.
export function call(client, args, options = {}) {
  return client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS, ...options });
}

// toolError checks a tool error (isError true) and returns its text.
export function toolError(result) {
  expect(result.isError === true, `isError is ${result.isError}, want true; result: ${short(result)}`);
  const text = textOf(result);
  expect(text.length > 0, `tool error without text: ${short(result)}`);
  return text;
}

export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// newReport is the report every client prints, with its own fields in extra.
export function newReport(transport, url, token, extra = {}) {
  return {
    ok: false,
    transport,
    url: url?.href,
    auth: Boolean(token),
    sdk: { name: '@modelcontextprotocol/sdk', version: sdkVersion() },
    node: process.version,
    server: undefined,
    connect_ms: undefined,
    passed: [],
    failed: [],
    checks: [],
    ...extra,
    error: undefined,
    duration_ms: undefined,
  };
}

// runChecks connects client over transport, runs checks ([name, async fn(client)]
// pairs) in order, records each in report, and closes the client.
async function runChecks(client, transport, checks, report, log) {
  const t0 = Date.now();
  try {
    try {
      await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, 'connect');
    } catch (err) {
      report.error = `connect: ${String(err?.message ?? err).trim()}`;
      log(`FAIL connect: ${report.error}`);
      return;
    }
    report.connect_ms = Date.now() - t0;
    report.server = client.getServerVersion();
    log(`connected to ${short(report.server)} in ${report.connect_ms} ms`);
    for (const [name, fn] of checks) {
      const c0 = Date.now();
      const entry = { name, ok: false, ms: 0, detail: undefined };
      try {
        entry.detail = (await fn(client)) ?? undefined;
        entry.ok = true;
      } catch (err) {
        entry.detail = err instanceof CheckError ? err.message : `threw: ${err?.stack ?? err}`;
      }
      entry.ms = Date.now() - c0;
      report.checks.push(entry);
      (entry.ok ? report.passed : report.failed).push(name);
      log(`${entry.ok ? 'PASS' : 'FAIL'} ${name} (${entry.ms} ms)${entry.detail ? ': ' + entry.detail : ''}`);
    }
    report.ok = report.failed.length === 0;
  } finally {
    try {
      await withTimeout(client.close(), 10_000, 'close');
    } catch (err) {
      log(`closing: ${err?.message ?? err}`);
    }
    report.duration_ms = Date.now() - t0;
  }
}

// runAndReport is runChecks, then the summary on stderr, the report on stdout, and
// the exit: 0 only when every check passed.
export async function runAndReport(client, transport, checks, report, log) {
  let exitCode = 1;
  try {
    await runChecks(client, transport, checks, report, log);
    exitCode = report.ok ? 0 : 1;
  } catch (err) {
    report.error = `unexpected: ${err?.stack ?? err}`;
    log(report.error);
  }
  log(`${report.ok ? 'OK' : 'FAILED'}: ${report.passed.length} passed, ${report.failed.length} failed` +
    (report.failed.length ? ` (${report.failed.join(', ')})` : '') + `, ${report.duration_ms} ms`);
  // process.exit only once stdout is flushed: it may be a pipe.
  process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(exitCode));
}
