#!/usr/bin/env node
// End-to-end checks of exec's "language" with the official TypeScript MCP SDK: a bash
// pipeline over an input CSV with sqlite3 and jq, a JavaScript program with
// top-level await, a TypeScript one, and one session taking calls in all four, through
// the real server over stdio:
//
//   node languages.mjs --transport stdio [--cmd BINARY]
//
// Like client.mjs it prints ONE JSON object on stdout (ok, passed, failed, checks,
// error, ...), one line per check on stderr, and exits 0 only when every check passed.
// The server is spawned with this process's whole environment. e2e/language_e2e_test.go
// drives it.

import {
  TRANSPORT_OPTIONS, call, checkTransport, expect, newReport, parseOptions, runAndReport, short, stdioOrHTTPTransport, textOf, toolError, usageExit,
} from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';

const USAGE = 'usage: node languages.mjs --transport stdio [--cmd BINARY]';
const opts = parseOptions('languages.mjs', USAGE, { ...TRANSPORT_OPTIONS });
const transportName = checkTransport(opts, ['stdio'], msg => usageExit('languages.mjs', USAGE, msg));

function ran(result) {
  expect(!result.isError, `isError is ${result.isError}; text: ${short(textOf(result))}`);
  const sc = result.structuredContent;
  expect(sc?.exit_code === 0, `exit_code ${sc?.exit_code}, want 0; stderr: ${short(sc?.stderr, 2000)}`);
  return sc;
}

function returned(result, name) {
  const i = result.structuredContent.files.findIndex(f => f.name === name && f.returned);
  expect(i >= 0, `${name} not returned: ${short(result.structuredContent.files)}`);
  // The returned files follow the text, in the order of files.
  const c = result.content[1 + result.structuredContent.files.slice(0, i).filter(f => f.returned).length];
  return c?.resource?.text ?? Buffer.from(c?.resource?.blob ?? '', 'base64').toString();
}

const csv = 'city,amount\nBerlin,10\nParis,5\nBerlin,20\nRome,7\nParis,1\n';

const checks = [
  ['schema', async (client) => {
    const { tools } = await client.listTools();
    const p = tools.find(t => t.name === 'exec')?.inputSchema?.properties?.language;
    expect(JSON.stringify(p?.enum) === '["python","javascript","typescript","bash"]', `language: ${short(p)}`);
    expect(p.default === 'python', `language default: ${short(p.default)}`);
  }],

  ['bash_csv_pipeline', async (client) => {
    const result = await call(client, {
      language: 'bash',
      files: [{ name: 'sales.csv', content: csv }],
      code: [
        "sqlite3 -csv :memory: '.import --csv sales.csv sales' \\",
        "  'select city, sum(amount) from sales group by city order by 2 desc' \\",
        "  | jq -R -s -c 'split(\"\\n\") | map(select(length > 0) | split(\",\") | {city: .[0], total: (.[1] | tonumber)})' \\",
        '  | tee /tmp/outputs/totals.json',
      ].join('\n'),
    });
    const sc = ran(result);
    const want = '[{"city":"Berlin","total":30},{"city":"Rome","total":7},{"city":"Paris","total":6}]';
    expect(sc.stdout.trim() === want, `stdout ${short(sc.stdout)}, want ${want}`);
    expect(returned(result, 'totals.json').trim() === want, 'totals.json differs from stdout');
    return sc.stdout.trim();
  }],

  ['bash_failure_is_a_result', async (client) => {
    const sc = (await call(client, { language: 'bash', code: 'grep nothing /dev/null | sort\necho unreachable' })).structuredContent;
    expect(sc.exit_code === 1 && sc.stdout === '', `pipefail and -e: exit ${sc.exit_code}, stdout ${short(sc.stdout)}`);
  }],

  ['javascript_top_level_await', async (client) => {
    const result = await call(client, {
      language: 'javascript',
      stdin: '3\n4\n',
      code: [
        "import { readFileSync, writeFileSync } from 'node:fs';",
        "const nums = readFileSync(0, 'utf8').trim().split('\\n').map(Number);",
        'const squares = await Promise.all(nums.map(async n => { await new Promise(r => setTimeout(r, 5)); return n * n; }));',
        "writeFileSync('/tmp/outputs/squares.json', JSON.stringify(squares));",
        'console.log(squares.reduce((a, b) => a + b));',
      ].join('\n'),
    });
    const sc = ran(result);
    expect(sc.stdout === '25\n', `stdout ${short(sc.stdout)}, want 25`);
    expect(returned(result, 'squares.json') === '[9,16]', 'squares.json');
  }],

  ['javascript_exception_is_a_result', async (client) => {
    const sc = (await call(client, { language: 'javascript', code: 'await Promise.resolve();\nthrow new TypeError("bad input")' })).structuredContent;
    expect(sc.exit_code === 1 && sc.stderr.includes('TypeError: bad input'), `exit ${sc.exit_code}, stderr ${short(sc.stderr)}`);
  }],

  ['typescript_types_and_await', async (client) => {
    const sc = ran(await call(client, {
      language: 'typescript',
      stdin: '3\n4\n',
      code: [
        "import { readFileSync } from 'node:fs';",
        'interface Stat { n: number; sum: number }',
        'enum Unit { One = 1 }',
        "const nums: number[] = readFileSync(0, 'utf8').trim().split('\\n').map(Number);",
        'const s: Stat = await Promise.resolve<Stat>({ n: nums.length, sum: nums.reduce((a: number, b: number) => a + b, 0) * Unit.One });',
        'console.log(`${s.n} ${s.sum}`);',
      ].join('\n'),
    }));
    expect(sc.stdout === '2 7\n', `stdout ${short(sc.stdout)}, want 2 7`);
    const err = (await call(client, { language: 'typescript', code: 'type T = string;\n\nthrow new Error("typed" as T);' })).structuredContent;
    expect(err.exit_code === 1 && err.stderr.includes('/exec.ts:3:7'), `a stack naming the TypeScript line: exit ${err.exit_code}, stderr ${short(err.stderr)}`);
  }],

  ['session_across_languages', async (client) => {
    // One session, each language with its own state, /tmp shared; a JavaScript call's
    // timeout loses the JavaScript state alone, and says so.
    const created = await client.callTool({ name: 'session_create', arguments: {} }, undefined, { timeout: 60000 });
    const id = created.structuredContent?.session_id;
    expect(typeof id === 'string', `session_create: ${short(created)}`);
    const run = async (args, state = 'kept') => {
      const sc = (await call(client, { ...args, session_id: id })).structuredContent;
      expect(sc?.session?.state === state, `${args.language ?? 'python'}: state ${short(sc?.session?.state)}, want ${state}; stderr ${short(sc?.stderr, 1000)}`);
      return sc;
    };
    await run({ language: 'bash', code: 'cd /tmp && printf "city,amount\\nBerlin,10\\n" > s.csv; total=10; add() { echo $((total + $1)); }' });
    let sc = await run({ language: 'bash', code: 'add 5; echo "$PWD"' });
    expect(sc.stdout === '15\n/tmp\n', `bash state: ${short(sc.stdout)}`);
    await run({ language: 'javascript', code: 'const rows = require("fs").readFileSync("/tmp/s.csv", "utf8").trim().split("\\n"); let n = await Promise.resolve(rows.length)' });
    sc = await run({ language: 'javascript', code: 'n += 1; console.log(n, rows[1])' });
    expect(sc.stdout === '3 Berlin,10\n', `javascript state: ${short(sc.stdout)}`);
    // TypeScript runs in the same node: JavaScript's globals are its own.
    sc = await run({ language: 'typescript', code: 'const m: number = n * 2;\nconsole.log(m, (rows as string[]).length)' });
    expect(sc.stdout === '6 2\n', `typescript in javascript's scope: ${short(sc.stdout)}`);
    await run({ code: 'import csv\nrows = list(csv.reader(open("/tmp/s.csv")))' });
    sc = await run({ language: 'javascript', code: 'for (;;) {}', timeout_s: 1 }, 'lost');
    expect(sc.timed_out && sc.stderr.includes('JavaScript state was lost'), `javascript timeout: ${short(sc)}`);
    sc = await run({ code: 'print(rows[1])' });
    expect(sc.stdout === "['Berlin', '10']\n", `python after javascript's loss: ${short(sc.stdout)}`);
    sc = await run({ language: 'javascript', code: 'console.log(typeof rows)' });
    expect(sc.stdout === 'undefined\n', `a fresh javascript: ${short(sc.stdout)}`);
    await client.callTool({ name: 'session_close', arguments: { session_id: id } });
  }],

  ['unknown_language_refused', async (client) => {
    const text = toolError(await call(client, { language: 'ruby', code: 'puts 1' }));
    expect(text.includes('language'), `error text: ${short(text)}`);
  }],
];

function log(line) {
  process.stderr.write(`[languages.mjs ${transportName}] ${line}\n`);
}

const client = new Client({ name: 'mcp-exec-e2e-languages', version: '1.0.0' }, { capabilities: {} });
await runAndReport(client, stdioOrHTTPTransport(transportName, opts.cmd, undefined, ''), checks, newReport(transportName, undefined, ''), log);
