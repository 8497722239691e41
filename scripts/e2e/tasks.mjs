#!/usr/bin/env node
// MCP tasks (2025-11-25 experimental) client for mcp-exec, on the official TypeScript
// SDK: client.experimental.tasks.
//
//   node tasks.mjs --phase stream --url http://127.0.0.1:8080/mcp [--token T]
//   node tasks.mjs --phase fetch  --url URL [--token T] --task-id ID
//
// stream: lists the tools (the SDK asks for a task only for a tool whose taskSupport
// it has seen), then runs a 5 s program through callToolStream to its result
// (taskCreated, taskStatus, result), then starts a second one, stops reading after
// taskCreated and reports its taskId (the caller kills nothing: this process exits).
// fetch: a new process, a new connection: getTask, then getTaskResult by that id.
// It prints ONE JSON object on stdout; exit 0 when the phase got what it expects, 1
// otherwise, 2 for a usage error. e2e/tasks_e2e_test.go drives it.

import { parseOptions, usageExit } from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const USAGE = 'usage: node tasks.mjs --phase stream|fetch --url URL [--token T] [--task-id ID]';
const opts = parseOptions('tasks.mjs', USAGE, {
  phase: { type: 'string' },
  url: { type: 'string' },
  token: { type: 'string' },
  'task-id': { type: 'string' },
});
if (!['stream', 'fetch'].includes(opts.phase)) usageExit('tasks.mjs', USAGE, '--phase must be stream or fetch');
if (!opts.url) usageExit('tasks.mjs', USAGE, '--url is required');
if (opts.phase === 'fetch' && !opts['task-id']) usageExit('tasks.mjs', USAGE, '--task-id is required for fetch');

const code = 'import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(1)\nprint("done")';
const wantStdout = '0\n1\n2\n3\n4\ndone\n';

async function connect() {
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  const client = new Client({ name: 'mcp-exec-tasks', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } }));
  return client;
}

const report = { phase: opts.phase, ok: false };
try {
  const client = await connect();
  report.capabilities_tasks = client.getServerCapabilities()?.tasks ?? null;
  if (opts.phase === 'stream') {
    const tools = await client.listTools();
    report.task_support = tools.tools.find(t => t.name === 'exec')?.execution?.taskSupport ?? null;
    const kinds = [];
    for await (const m of client.experimental.tasks.callToolStream({ name: 'exec', arguments: { code } })) {
      kinds.push(m.type);
      if (m.type === 'taskCreated') report.first_task_id = m.task.taskId;
      if (m.type === 'result') report.stdout = m.result.structuredContent?.stdout;
      if (m.type === 'error') report.error = String(m.error?.message ?? m.error);
    }
    report.kinds = [...new Set(kinds)];
    for await (const m of client.experimental.tasks.callToolStream({ name: 'exec', arguments: { code } })) {
      if (m.type === 'taskCreated') { report.task_id = m.task.taskId; break; }
    }
    report.ok = report.task_support === 'optional' && report.stdout === wantStdout &&
      report.kinds.includes('taskCreated') && report.kinds.includes('result') && !!report.task_id;
  } else {
    const task = await client.experimental.tasks.getTask(opts['task-id']);
    report.status = task.status;
    const res = await client.experimental.tasks.getTaskResult(opts['task-id'], CallToolResultSchema);
    report.stdout = res.structuredContent?.stdout;
    report.related = res._meta?.['io.modelcontextprotocol/related-task']?.taskId ?? null;
    report.ok = ['working', 'completed'].includes(report.status) && report.stdout === wantStdout && report.related === opts['task-id'];
  }
  await client.close();
} catch (err) {
  report.error = String(err?.stack ?? err);
}
process.stdout.write(JSON.stringify(report) + '\n');
process.exit(report.ok ? 0 : 1);
