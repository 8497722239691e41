#!/usr/bin/env node
// Client-side benchmark of mcp-exec: the built binary driven over stdio by the official
// TypeScript MCP SDK (an implementation other than the server's), against baselines
// measured in the same run, interleaved so that the machine's load hits both alike.
//
//   node bench.mjs --cmd BINARY [--rounds N] [--bursts N] [--window S] [--quick]
//                  [--sections latency,languages,burst,throughput] [--image IMAGE]
//                  [--runtime NAME] [--baseline-runtime NAME] [--backend docker|kubernetes]
//
// Prints a markdown report on stdout, progress on stderr. cmd/mcp-exec-bench/client.sh
// builds the binary and runs this (`make bench-client`); docs/benchmarks.md describes
// the method and the results.
//
// Each server it spawns runs with MCP_EXEC_LOG_LEVEL=debug, whose "exec timing" lines
// (metadata only: durations, CLOCK_MONOTONIC instants) tell where each call's time went
// inside the server; the client reads the same clock (process.hrtime), so every
// millisecond of a call has an owner: the client SDK, the pipe and the server's JSON
// decoding, the server's SDK, the queue, taking a sandbox (or creating and starting
// one), delivering the code, the sandbox itself, the result, and the way back.
//
// Its containers are labelled dev.mcp-exec.role=sandbox and dev.mcp-exec.instance=
// bench-client-*; the servers remove theirs as they close, and the baselines' are run
// with --rm (docker run) or removed by the loop itself (churn).

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { parseOptions, sdkVersion, usageExit } from './common.mjs';

const USAGE = 'usage: node bench.mjs --cmd BINARY [--rounds N] [--bursts N] [--window S] [--quick] [--sections latency,languages,burst,throughput] [--image IMAGE] [--host-python PATH] [--host-node PATH] [--runtime NAME] [--baseline-runtime NAME] [--backend docker|kubernetes]';
const opts = parseOptions('bench.mjs', USAGE, {
  cmd: { type: 'string' },
  rounds: { type: 'string' },
  bursts: { type: 'string' },
  window: { type: 'string' },
  quick: { type: 'boolean' },
  sections: { type: 'string' },
  image: { type: 'string' },
  'host-python': { type: 'string' },
  'host-node': { type: 'string' },
  runtime: { type: 'string' },
  'baseline-runtime': { type: 'string' },
  backend: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
});
const usage = msg => usageExit('bench.mjs', USAGE, msg);
if (!opts.cmd) usage('--cmd is required (the built mcp-exec binary)');
const posInt = (name, v, def) => {
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) usage(`--${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
};
const QUICK = Boolean(opts.quick);
const ROUNDS = posInt('rounds', opts.rounds, QUICK ? 3 : 30);
const BURSTS = posInt('bursts', opts.bursts, QUICK ? 1 : 5);
const WINDOW_S = posInt('window', opts.window, QUICK ? 4 : 30);
const IMAGE = opts.image ?? process.env.MCP_EXEC_IMAGE ?? 'mcp-exec/python-sandbox:v1';
const HOST_PY = opts['host-python'] ?? '/usr/bin/python3';
// The languages section's baseline: a bare host `node -e` (this process's node by default).
const HOST_NODE = opts['host-node'] ?? process.execPath;
// --runtime: the OCI runtime of the servers' sandboxes (MCP_EXEC_RUNTIME; the engine's
// default when absent); --baseline-runtime: that of the docker run and churn baselines,
// the same by default, so that subject and baseline start containers alike ('' for the
// engine's default, to set a lighter runtime against the default one).
const RUNTIME = opts.runtime ?? process.env.MCP_EXEC_RUNTIME ?? '';
const BASE_RUNTIME = opts['baseline-runtime'] ?? RUNTIME;
// --backend kubernetes (or MCP_EXEC_BACKEND=kubernetes in the environment, which the servers
// inherit with MCP_EXEC_KUBECONFIG, MCP_EXEC_KUBE_NAMESPACE and the rest): the baselines are
// pods made through the API server with the sandbox pod's hardening (podRun, podChurnOnce),
// not containers; --runtime is then a RuntimeClass.
const BACKEND = opts.backend ?? process.env.MCP_EXEC_BACKEND ?? 'docker';
if (!['docker', 'kubernetes'].includes(BACKEND)) usage(`--backend must be docker or kubernetes, got ${JSON.stringify(BACKEND)}`);
const KUBE = BACKEND === 'kubernetes';
// A sandbox pod requests what it is limited to (Guaranteed QoS), so on a small node the
// scheduler, not the load, bounds how many run: on Kubernetes each server's sandboxes, and
// the baseline pods, get MCP_EXEC_CPUS (default 0.25 there, so that the latency section's
// six pods fit on 2 cores; the engine's default, 1, elsewhere).
const CPUS = process.env.MCP_EXEC_CPUS ?? (KUBE ? '0.25' : '1');
const ALL_SECTIONS = ['latency', 'languages', 'burst', 'throughput'];
const SECTIONS = (opts.sections ?? ALL_SECTIONS.join(',')).split(',').map(s => s.trim()).filter(Boolean);
for (const s of SECTIONS) if (!ALL_SECTIONS.includes(s)) usage(`--sections: unknown section ${JSON.stringify(s)} (have ${ALL_SECTIONS.join(',')})`);

const PRINT = { name: 'print(1)', code: 'print(1)', want: '1\n' };
const JS_HELLO = { name: 'javascript hello', language: 'javascript', code: 'console.log(1)', want: '1\n' };
const BASH_HELLO = { name: 'bash hello', language: 'bash', code: 'echo 1', want: '1\n' };
const TS_HELLO = { name: 'typescript hello', language: 'typescript', code: 'const n: number = 1;\nconsole.log(n)', want: '1\n' };
const PANDAS = { name: 'pandas', code: 'import pandas as pd; df = pd.DataFrame({"a": range(1000)}); print(df["a"].sum())', want: '499500\n' };

// The seed README's hardening flags for `docker run` (its recommended production line).
const SEED_FLAGS = ['--network', 'none', '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
  '--user', '65532:65532', '--tmpfs', '/tmp:rw,noexec,nosuid,size=64m', '--memory', '256m', '--pids-limit', '128', '--cpus', '1'];

const log = msg => process.stderr.write(`${new Date().toISOString().slice(11, 19)} bench-client: ${msg}\n`);
const now = () => Number(process.hrtime.bigint()) / 1e6; // CLOCK_MONOTONIC, ms
const sleep = ms => new Promise(r => setTimeout(r, ms));
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const load1 = () => Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);

// ---- statistics --------------------------------------------------------------------

function pct(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]; // nearest rank
}
const p50 = xs => pct(xs, 0.5);
const p90 = xs => pct(xs, 0.9);
const ms = v => !Number.isFinite(v) ? 'n/a' : v >= 100 ? `${v.toFixed(0)} ms` : v >= 10 ? `${v.toFixed(1)} ms` : `${v.toFixed(2)} ms`;
const ratio = (a, b) => !(Number.isFinite(a) && Number.isFinite(b) && b > 0) ? 'n/a' : (a / b < 0.1 ? `${(a / b).toFixed(3)}x` : `${(a / b).toFixed(2)}x`);

// ---- a server over stdio, with its debug log read -----------------------------------

class Server {
  constructor(name, env) {
    this.name = name;
    this.env = env;
    this.timings = []; // "exec timing" lines not yet claimed
    this.waiters = [];
    this.starts = 0; // "sandbox started" lines: containers created and started
    this.startedAt = []; // when each of them was read
    this.pool = { idle: 0, starting: 0, size: Number(env.MCP_EXEC_POOL_SIZE ?? 2) };
    this.poolSeen = false;
  }

  // open starts the server and connects, trying again (up to 3 times) when the server
  // exits during its start: under heavy load its start-up limits check can time out.
  async open() {
    for (let i = 1; ; i++) {
      try {
        return await this.openOnce();
      } catch (err) {
        if (i === 3) throw err;
        log(`${this.name}: the server did not start (${err?.message ?? err}); trying again`);
        report.notes.push(`the ${this.name} server did not start on try ${i} (${err?.message ?? err}; its log is on stderr)`);
        try { await this.transport.close(); } catch { /* gone already */ }
        await sleep(2000);
      }
    }
  }

  async openOnce() {
    const env = {
      ...process.env, MCP_EXEC_TRANSPORT: 'stdio', MCP_EXEC_LOG_LEVEL: 'debug', MCP_EXEC_LOG_FORMAT: 'json',
      MCP_EXEC_IMAGE: IMAGE, MCP_EXEC_INSTANCE: `bench-client-${this.name}`, MCP_EXEC_RUNTIME: RUNTIME, MCP_EXEC_BACKEND: BACKEND, MCP_EXEC_CPUS: CPUS, ...this.env,
    };
    this.transport = new StdioClientTransport({ command: opts.cmd, args: [], env, stderr: 'pipe' });
    createInterface({ input: this.transport.stderr }).on('line', line => this.logLine(line));
    this.client = new Client({ name: 'mcp-exec-bench-client', version: '0' });
    let closed;
    const ended = new Promise((_, reject) => { closed = reject; });
    this.transport.onclose = () => closed(new Error('the server exited'));
    let timer;
    const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('connect timed out after 120 s')), 120_000); });
    try {
      await Promise.race([this.client.connect(this.transport), ended, late]);
    } finally {
      clearTimeout(timer);
    }
    ended.catch(() => {}); // a later exit is reported by the calls that fail
    // Time the request leaving the client SDK and the response reaching it.
    const send = this.transport.send.bind(this.transport);
    this.transport.send = (msg, o) => {
      if (msg.method === 'tools/call') this.sentAt = now();
      return send(msg, o);
    };
    const onmessage = this.transport.onmessage;
    this.transport.onmessage = (msg, extra) => {
      if (msg.id !== undefined && ('result' in msg || 'error' in msg)) this.recvAt = now();
      onmessage(msg, extra);
    };
    return this;
  }

  logLine(line) {
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      process.stderr.write(`[${this.name}] ${line}\n`);
      return;
    }
    switch (m.message) {
      case 'exec timing': {
        const w = this.waiters.shift();
        if (w) w(m); else this.timings.push(m);
        break;
      }
      case 'sandbox started':
        this.starts++;
        this.startedAt.push(now());
        break;
      case 'sandbox ready in the warm pool':
      case 'sandbox taken from the warm pool':
        this.pool = { idle: m.pool_idle, starting: m.pool_starting, size: m.pool_size };
        this.poolSeen = true;
        break;
    }
    if (m.level === 'warn' || m.level === 'error') process.stderr.write(`[${this.name}] ${line}\n`);
  }

  // nextTiming returns the next "exec timing" line (they come in the calls' order when
  // calls are sequential), or undefined after 3 s.
  nextTiming() {
    if (this.timings.length) return Promise.resolve(this.timings.shift());
    return new Promise(resolve => {
      const w = m => { clearTimeout(t); resolve(m); };
      const t = setTimeout(() => { this.waiters = this.waiters.filter(x => x !== w); resolve(undefined); }, 3000);
      this.waiters.push(w);
    });
  }

  full() { return this.pool.idle >= this.pool.size && this.pool.starting === 0; }

  // waitFull waits until the warm pool is full and no start is under way (max ms).
  async waitFull(max = 30_000) {
    const t0 = now();
    while (!(this.poolSeen && this.full())) {
      if (now() - t0 > max) return false;
      await sleep(5);
    }
    return true;
  }

  // waitQuiet waits until the pool is full and no container was started for quietMs.
  async waitQuiet(quietMs = 1500, max = 60_000) {
    const t0 = now();
    let last = this.starts, since = now();
    for (;;) {
      await sleep(50);
      if (this.starts !== last) { last = this.starts; since = now(); }
      if (this.full() && now() - since >= quietMs) return true;
      if (now() - t0 > max) return false;
    }
  }

  async call(sn) {
    const t0 = now();
    const args = sn.language ? { code: sn.code, language: sn.language } : { code: sn.code };
    const res = await this.client.callTool({ name: 'exec', arguments: args }, undefined, { timeout: 120_000 });
    const t1 = now();
    const out = res.structuredContent ?? {};
    if (res.isError || out.exit_code !== 0 || out.stdout !== sn.want) {
      throw new Error(`${this.name} ${sn.name}: isError ${res.isError}, exit ${out.exit_code}, stdout ${JSON.stringify(out.stdout)}, stderr ${JSON.stringify(String(out.stderr ?? '').slice(-300))}`);
    }
    return { t0, t1, total: t1 - t0, sentAt: this.sentAt, recvAt: this.recvAt };
  }

  // timedCall is call plus the server's timing line, as one breakdown.
  async timedCall(sn) {
    const c = await this.call(sn);
    const t = await this.nextTiming();
    return { ...c, t, parts: t ? breakdown(c, t) : undefined };
  }

  async close() {
    try { await this.client.close(); } catch (err) { log(`closing ${this.name}: ${err?.message ?? err}`); }
  }
}

// breakdown splits one call (client instants c, server line t) into parts that add up
// to the call's total, in ms.
function breakdown(c, t) {
  const tin = t.t_in_mono_ns / 1e6, tout = t.t_out_mono_ns / 1e6, u = k => (t[k] ?? 0) / 1e3;
  const run = u('run_us'), queue = u('queue_us'), take = u('take_us'), deliver = u('deliver_us'), sandbox = u('sandbox_us');
  return {
    'client SDK, request': c.sentAt - c.t0,
    'client → server (encode, pipe, decode)': tin - c.sentAt,
    'server SDK, arguments': u('sdk_in_us'),
    'checks': u('check_us'),
    'queue': queue,
    'pool take / cold start': take,
    '  of which create': u('create_us'),
    '  of which attach + start': u('start_us'),
    'code delivery': deliver,
    'in sandbox (delivered → exit frame)': sandbox,
    'launcher, rest': run - queue - take - deliver - sandbox,
    'result encoding (handler)': u('result_us'),
    'server SDK, result': u('sdk_out_us'),
    'server → client (encode, pipe, decode)': c.recvAt - tout,
    'client SDK, result': c.t1 - c.recvAt,
  };
}
const SUBPARTS = ['  of which create', '  of which attach + start'];

// ---- baselines ---------------------------------------------------------------------

function runProc(cmd, args, stdin, want) {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const p = spawn(cmd, args, { stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let out = '', err = '';
    p.stdout.on('data', d => { out += d; });
    p.stderr.on('data', d => { err += d; });
    p.on('error', reject);
    p.on('close', code => {
      const d = now() - t0;
      if (code !== 0 || out !== want) reject(new Error(`${cmd} ${args.slice(0, 3).join(' ')}...: exit ${code}, stdout ${JSON.stringify(out)}, stderr ${err.slice(-300)}`));
      else resolve(d);
    });
    if (stdin !== undefined) p.stdin.end(stdin);
  });
}
const hostRun = sn => runProc(HOST_PY, ['-c', sn.code], undefined, sn.want);
const hostNode = sn => runProc(HOST_NODE, ['-e', sn.code], undefined, sn.want);
const dockerArgs = ['run', '--rm', '-i', ...SEED_FLAGS, ...(BASE_RUNTIME ? ['--runtime', BASE_RUNTIME] : []), '--label', 'dev.mcp-exec.role=sandbox',
  '--label', 'dev.mcp-exec.instance=bench-client-docker-run', '--entrypoint', 'python3', IMAGE, '-'];
const dockerRun = sn => runProc('docker', dockerArgs, sn.code + '\n', sn.want);

// The engine API, for the churn loop: the socket of DOCKER_HOST (unix only) or the default.
const SOCKET = (process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock').replace(/^unix:\/\//, '');
function api(method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ socketPath: SOCKET, method, path: '/v1.41' + path, headers: data ? { 'Content-Type': 'application/json' } : {} }, res => {
      let s = '';
      res.on('data', d => { s += d; });
      res.on('end', () => (res.statusCode >= 300 ? reject(new Error(`${method} ${path}: ${res.statusCode} ${s.slice(0, 300)}`)) : resolve(s ? JSON.parse(s) : {})));
    });
    req.on('error', reject);
    req.end(data);
  });
}

// churnOnce: create + start + wait + remove of a container running `python3 -I -c pass`
// with the seed's hardening (and no log driver, like the launcher's sandboxes).
async function churnOnce() {
  const c = await api('POST', '/containers/create', {
    Image: IMAGE, Cmd: ['python3', '-I', '-c', 'pass'], User: '65532:65532',
    Labels: { 'dev.mcp-exec.role': 'sandbox', 'dev.mcp-exec.instance': 'bench-client-churn' },
    HostConfig: {
      NetworkMode: 'none', ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'],
      Tmpfs: { '/tmp': 'rw,noexec,nosuid,size=64m' }, Memory: 256 << 20, PidsLimit: 128, NanoCpus: 1e9,
      LogConfig: { Type: 'none' }, ...(BASE_RUNTIME ? { Runtime: BASE_RUNTIME } : {}),
    },
  });
  try {
    await api('POST', `/containers/${c.Id}/start`);
    const w = await api('POST', `/containers/${c.Id}/wait`);
    if (w.StatusCode !== 0) throw new Error(`churn container exited ${w.StatusCode}`);
  } finally {
    await api('DELETE', `/containers/${c.Id}?force=true`);
  }
}

// ---- Kubernetes baselines: pods through the API server ------------------------------

// The cluster of MCP_EXEC_KUBECONFIG (a kubeconfig whose CA and client certificate are
// files, as the test cluster's: scripts/k8s/up.sh), the sandbox namespace and the seccomp
// profile the servers use.
const kube = KUBE ? (() => {
  const path = process.env.MCP_EXEC_KUBECONFIG;
  if (!path) usage('--backend kubernetes needs MCP_EXEC_KUBECONFIG');
  const cfg = readFileSync(path, 'utf8');
  const get = k => {
    const m = cfg.match(new RegExp(`${k}:\\s*"?([^",}\\s]+)`));
    if (!m) usage(`${path}: no ${k} (the bench reads a kubeconfig whose certificates are files)`);
    return m[1];
  };
  const u = new URL(get('server'));
  const seccomp = process.env.MCP_EXEC_KUBE_SECCOMP_PROFILE;
  return {
    host: u.hostname, port: u.port || 443,
    ca: readFileSync(get('certificate-authority')), cert: readFileSync(get('client-certificate')), key: readFileSync(get('client-key')),
    ns: process.env.MCP_EXEC_KUBE_NAMESPACE ?? 'mcp-exec-sandbox',
    seccomp: seccomp ? { type: 'Localhost', localhostProfile: seccomp } : { type: 'RuntimeDefault' },
    agent: new https.Agent({ keepAlive: true }),
  };
})() : undefined;

// kapi is one request to the API server; with onLine, a watch whose JSON lines it is
// handed until it returns true.
function kapi(method, path, body, onLine) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request({
      host: kube.host, port: kube.port, ca: kube.ca, cert: kube.cert, key: kube.key, agent: onLine ? false : kube.agent,
      // Content-Length always: node sends a DELETE's body unframed (no chunking for it), and
      // on a kept-alive connection the server then reads it as the next request.
      method, path, headers: data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {},
    }, res => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', d => {
        s += d;
        if (!onLine || res.statusCode >= 300) return;
        let i;
        while ((i = s.indexOf('\n')) >= 0) {
          const line = s.slice(0, i);
          s = s.slice(i + 1);
          if (line && onLine(JSON.parse(line))) { resolve(); req.destroy(); return; }
        }
      });
      res.on('end', () => {
        if (res.statusCode >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${s.slice(0, 300)}`));
        else if (onLine) reject(new Error(`watch ${path} ended`));
        else resolve(s.startsWith('{') ? JSON.parse(s) : s);
      });
    });
    req.on('error', err => { if (!req.destroyed || !onLine) reject(err); });
    req.end(data);
  });
}

// podBody is a pod shaped like the backend's (launcher/kube/pod.go: the same user, seccomp
// profile, read-only root, no capabilities, memory and CPU, memory-backed /tmp, no DNS,
// no token, grace 0) that runs cmd.
const podBody = (cmd, instance) => {
  const sc = { runAsUser: 65532, runAsGroup: 65532, runAsNonRoot: true, seccompProfile: kube.seccomp };
  const res = { memory: '256Mi', cpu: CPUS };
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { generateName: 'bench-client-pod-', labels: { 'dev.mcp-exec.role': 'sandbox', 'dev.mcp-exec.instance': instance } },
    spec: {
      restartPolicy: 'Never', terminationGracePeriodSeconds: 0, automountServiceAccountToken: false, enableServiceLinks: false,
      dnsPolicy: 'None', dnsConfig: { nameservers: ['127.0.0.1'] }, ...(BASE_RUNTIME ? { runtimeClassName: BASE_RUNTIME } : {}),
      securityContext: sc,
      containers: [{
        name: 'sandbox', image: IMAGE, imagePullPolicy: 'Never', command: cmd, workingDir: '/tmp',
        resources: { limits: res, requests: res },
        securityContext: { ...sc, privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
        volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
      }],
      volumes: [{ name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } }],
    },
  };
};

// podCycle creates a pod running cmd, waits (a watch) until it has ended, reads its log
// when readLog, and deletes it (grace 0; the DELETE's answer, not the pod's removal from
// the node, as for the server's own pods); it returns the log.
async function podCycle(cmd, instance, readLog) {
  const base = `/api/v1/namespaces/${kube.ns}/pods`;
  const p = await kapi('POST', base, podBody(cmd, instance));
  const name = p.metadata.name;
  try {
    let phase;
    await kapi('GET', `${base}?watch=true&fieldSelector=metadata.name%3D${name}&resourceVersion=${p.metadata.resourceVersion}`, undefined, ev => {
      phase = ev.object?.status?.phase;
      return phase === 'Succeeded' || phase === 'Failed';
    });
    if (phase !== 'Succeeded') throw new Error(`baseline pod ${name}: ${phase}`);
    return readLog ? await kapi('GET', `${base}/${name}/log`) : '';
  } finally {
    await kapi('DELETE', `${base}/${name}`, { gracePeriodSeconds: 0 });
  }
}

// podRun is the cold baseline on Kubernetes: sn's code in a pod of its own, its output
// read back from the pod's log, timed like a docker run (spawn to exit).
async function podRun(sn) {
  const t0 = now();
  const out = await podCycle(['python3', '-c', sn.code], 'bench-client-pod-run', true);
  if (out !== sn.want) throw new Error(`baseline pod: stdout ${JSON.stringify(out)}`);
  return now() - t0;
}
const podChurnOnce = () => podCycle(['python3', '-I', '-c', 'pass'], 'bench-client-pod-churn', false);

// ---- sections ----------------------------------------------------------------------

const report = { notes: [], loads: {} };

async function latency() {
  const warm = await new Server('warm', { MCP_EXEC_POOL_SIZE: '2' }).open();
  const pandas = await new Server('pandas', { MCP_EXEC_POOL_SIZE: '2', MCP_EXEC_PRELOAD: 'numpy,pandas' }).open();
  const cold = await new Server('cold', { MCP_EXEC_POOL_SIZE: '0' }).open();
  const rows = {
    host: [], warm: [], hostPandas: [], warmPandas: [], docker: [], cold: [],
  };
  const parts = { warm: [], warmPandas: [], cold: [] };
  const misses = { warm: 0, warmPandas: 0 };
  const loads = [];
  const items = [
    ['host', () => hostRun(PRINT)],
    ['warm', () => warm.waitFull().then(() => warm.timedCall(PRINT))],
    ['hostPandas', () => hostRun(PANDAS)],
    ['warmPandas', () => pandas.waitFull().then(() => pandas.timedCall(PANDAS))],
    ['docker', () => (KUBE ? podRun(PRINT) : dockerRun(PRINT))],
    ['cold', () => cold.timedCall(PRINT)],
  ];
  try {
    await Promise.all([warm.waitFull(), pandas.waitFull()]);
    const l0 = loadavg();
    for (let r = 0; r <= ROUNDS; r++) { // round 0 is a warm-up, not counted
      loads.push(load1());
      // Rotate the order each round, so that no item always follows the same one.
      for (let i = 0; i < items.length; i++) {
        const [key, f] = items[(i + r) % items.length];
        const v = await f();
        if (r === 0) continue;
        if (typeof v === 'number') {
          rows[key].push(v);
        } else {
          rows[key].push(v.total);
          if (v.parts) parts[key].push(v.parts);
          if (key in misses && v.t && !v.t.warm) misses[key]++;
        }
        await sleep(100 + Math.random() * 200);
      }
      if (r % 5 === 0) log(`latency: round ${r}/${ROUNDS}, load ${loadavg()}`);
    }
    report.loads.latency = `${l0} → ${loadavg()} (1-min load during the rounds: ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)})`;
  } finally {
    await Promise.all([warm.close(), pandas.close(), cold.close()]);
  }
  report.latency = { rows, parts, misses };
}

// languages: hello world in each language through one warm server (pool 2; the pool
// serves every language) and one cold one (pool 0), interleaved with a bare host
// `node -e` (JavaScript's baseline), the warm Python call (bash's) and the JavaScript
// call of the same server (TypeScript's: what esbuild's transform adds).
async function languages() {
  const langs = 'python,javascript,typescript,bash';
  const warm = await new Server('lang-warm', { MCP_EXEC_POOL_SIZE: '2', MCP_EXEC_LANGUAGES: langs }).open();
  const cold = await new Server('lang-cold', { MCP_EXEC_POOL_SIZE: '0', MCP_EXEC_LANGUAGES: langs }).open();
  const keys = ['hostNode', 'warmPy', 'warmJs', 'warmTs', 'warmBash', 'coldPy', 'coldJs', 'coldTs', 'coldBash'];
  const rows = Object.fromEntries(keys.map(k => [k, []]));
  const parts = Object.fromEntries(keys.map(k => [k, []]));
  let misses = 0;
  const loads = [];
  const w = sn => () => warm.waitFull().then(() => warm.timedCall(sn));
  const items = [
    ['hostNode', () => hostNode(JS_HELLO)],
    ['warmPy', w(PRINT)], ['warmJs', w(JS_HELLO)], ['warmTs', w(TS_HELLO)], ['warmBash', w(BASH_HELLO)],
    ['coldPy', () => cold.timedCall(PRINT)], ['coldJs', () => cold.timedCall(JS_HELLO)], ['coldTs', () => cold.timedCall(TS_HELLO)],
    ['coldBash', () => cold.timedCall(BASH_HELLO)],
  ];
  try {
    await warm.waitFull();
    const l0 = loadavg();
    for (let r = 0; r <= ROUNDS; r++) { // round 0 is a warm-up, not counted
      loads.push(load1());
      for (let i = 0; i < items.length; i++) {
        const [key, f] = items[(i + r) % items.length];
        const v = await f();
        if (r === 0) continue;
        if (typeof v === 'number') {
          rows[key].push(v);
        } else {
          rows[key].push(v.total);
          if (v.parts) parts[key].push(v.parts);
          if (key.startsWith('warm') && v.t && !v.t.warm) misses++;
        }
        await sleep(100 + Math.random() * 200);
      }
      if (r % 5 === 0) log(`languages: round ${r}/${ROUNDS}, load ${loadavg()}`);
    }
    report.loads.languages = `${l0} → ${loadavg()} (1-min load during the rounds: ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)})`;
  } finally {
    await Promise.all([warm.close(), cold.close()]);
  }
  report.languages = { rows, parts, misses };
}

async function burst() {
  const srv = await new Server('burst', {}).open(); // the defaults: pool 2, max-concurrent 2
  const lat = [], walls = [], floors = [];
  let colds = 0, creates = 0, execs = 0, unsettled = 0;
  const l0 = loadavg();
  try {
    for (let b = 0; b < BURSTS; b++) {
      if (!await srv.waitQuiet()) unsettled++;
      const s0 = srv.starts;
      const t0 = now();
      const got = await Promise.all(Array.from({ length: 10 }, () => srv.call(PRINT)));
      walls.push(now() - t0);
      for (const c of got) lat.push(c.total);
      // The floor under this burst's 9th call (its p90): each call takes a sandbox of its
      // own, and the pool held srv.pool.size when the burst began, so the 9th call to end
      // cannot end before the (9 - size)th sandbox started after t0 was ready, whatever
      // the server does with them: that instant is the engine's start rate at work.
      const fresh = srv.startedAt.slice(s0).map(t => t - t0).sort((a, b) => a - b);
      const need = 9 - srv.pool.size;
      floors.push(need <= 0 ? 0 : fresh.length >= need ? fresh[need - 1] : NaN);
      for (let i = 0; i < got.length; i++) {
        const t = await srv.nextTiming();
        if (t && !t.warm) colds++;
      }
      if (!await srv.waitQuiet()) unsettled++;
      creates += srv.starts - s0;
      execs += got.length;
      log(`burst ${b + 1}/${BURSTS}: p50 ${ms(p50(got.map(c => c.total)))}, max ${ms(Math.max(...got.map(c => c.total)))}, ${srv.starts - s0} containers started`);
    }
  } finally {
    await srv.close();
  }
  if (unsettled) report.notes.push(`burst: the pool was not full and quiet within 60 s ${unsettled} time(s)`);
  report.burst = { lat, walls, floors, colds, creates, execs, load: `${l0} → ${loadavg()}` };
}

// sustain runs c workers calling f back to back for the window (after a ramp) and
// returns the completions per second inside the window.
async function sustain(c, f, windowS) {
  const ramp = 2000;
  const t0 = now(), ws = t0 + ramp, we = ws + windowS * 1000;
  let n = 0, errs = 0, firstErr;
  const lat = [];
  await Promise.all(Array.from({ length: c }, async () => {
    while (now() < we) {
      const a = now();
      try {
        await f();
        const b = now();
        if (b >= ws && b <= we) { n++; lat.push(b - a); }
      } catch (err) {
        errs++;
        firstErr ??= err;
        await sleep(100);
      }
    }
  }));
  if (firstErr) report.notes.push(`throughput: ${errs} error(s), the first: ${firstErr.message}`);
  return { rate: n / windowS, n, p50: p50(lat) };
}

async function throughput() {
  report.tput = [];
  for (const c of [1, 2, 4]) {
    const srv = await new Server(`tput${c}`, { MCP_EXEC_POOL_SIZE: '2', MCP_EXEC_MAX_CONCURRENT: String(c) }).open();
    const l0 = loadavg();
    const acc = { churn: [], srv: [], n: 0, s: 0, lat: [], churnLat: [] };
    try {
      await srv.waitFull();
      // Two windows each, alternating, so that a change of load hits both.
      for (let k = 0; k < 2; k++) {
        log(`throughput: ${c} caller(s), churn window ${k + 1}`);
        const ch = await sustain(c, KUBE ? podChurnOnce : churnOnce, WINDOW_S / 2);
        acc.churn.push(ch.rate); acc.churnLat.push(ch.p50);
        await srv.waitQuiet(500);
        log(`throughput: ${c} caller(s), mcp-exec window ${k + 1}`);
        const s0 = srv.starts;
        const r = await sustain(c, () => srv.call(PRINT), WINDOW_S / 2);
        acc.s += srv.starts - s0; acc.n += r.n;
        acc.srv.push(r.rate); acc.lat.push(r.p50);
        srv.timings.length = 0;
        await srv.waitQuiet(500);
      }
    } finally {
      await srv.close();
    }
    const mean = xs => xs.reduce((a, b) => a + b, 0) / xs.length;
    report.tput.push({
      c, churn: mean(acc.churn), srv: mean(acc.srv), createsPerExec: acc.n ? acc.s / acc.n : NaN,
      lat: mean(acc.lat), churnLat: mean(acc.churnLat), load: `${l0} → ${loadavg()}`,
    });
  }
}

// ---- report ------------------------------------------------------------------------

function print() {
  const out = [];
  const w = s => out.push(s);
  w(`### mcp-exec through the TypeScript SDK over stdio (\`scripts/e2e/bench.mjs\`)`);
  w('');
  w(`Run ${report.started} UTC, ${((now() - report.t0) / 1000).toFixed(0)} s; SDK @modelcontextprotocol/sdk ${sdkVersion()}, node ${process.version}; ` +
    `image ${IMAGE}; runtime ${RUNTIME || "the engine's default"}, baselines' ${BASE_RUNTIME || "the engine's default"}; host python \`${HOST_PY}\` ${report.hostPy}; ${ROUNDS} rounds, ${BURSTS} bursts, throughput windows 2 × ${WINDOW_S / 2} s.`);
  w('');
  if (report.latency) {
    const { rows, parts, misses } = report.latency;
    w(`#### Latency, one call at a time, interleaved (load ${report.loads.latency})`);
    w('');
    w('| path | n | p50 | p90 | baseline | baseline p50 | baseline p90 | **ratio p50** | ratio p90 |');
    w('|---|---|---|---|---|---|---|---|---|');
    const line = (name, a, bname, b) => w(`| ${name} | ${a.length} | ${ms(p50(a))} | ${ms(p90(a))} | ${bname} | ${ms(p50(b))} | ${ms(p90(b))} | **${ratio(p50(a), p50(b))}** | ${ratio(p90(a), p90(b))} |`);
    line(`warm \`print(1)\`, pool 2 (${misses.warm} of ${rows.warm.length} not from the pool)`, rows.warm, `host \`${HOST_PY} -c\``, rows.host);
    line(`warm pandas, pool 2, PRELOAD=numpy,pandas (${misses.warmPandas} not from the pool)`, rows.warmPandas, `host \`${HOST_PY} -c\` + pandas`, rows.hostPandas);
    line('cold `print(1)`, pool 0', rows.cold, KUBE ? 'a pod through the API (create, ended, log, delete), the sandbox pod\'s hardening' : '`docker run --rm -i`, seed flags', rows.docker);
    w('');
    w('Where the time goes (p50 of each part over the calls; the parts of one call add up to its total, their p50s need not):');
    w('');
    w('| part | warm `print(1)` | warm pandas (preload) | cold `print(1)` |');
    w('|---|---|---|---|');
    const keys = Object.keys(parts.warm[0] ?? parts.cold[0] ?? {});
    for (const k of keys) {
      const col = key => ms(p50(parts[key].map(p => p[k])));
      w(`| ${SUBPARTS.includes(k) ? '&nbsp;&nbsp;' + k.trim() : k} | ${col('warm')} | ${col('warmPandas')} | ${col('cold')} |`);
    }
    const tot = key => ms(p50(parts[key].map(p => Object.entries(p).filter(([k]) => !SUBPARTS.includes(k)).reduce((a, [, v]) => a + v, 0))));
    w(`| **total (p50 of the sums)** | ${tot('warm')} | ${tot('warmPandas')} | ${tot('cold')} |`);
    w('');
  }
  if (report.languages) {
    const { rows, parts, misses } = report.languages;
    w(`#### Languages: hello world per language, one call at a time, interleaved (load ${report.loads.languages})`);
    w('');
    w('| path | n | p50 | p90 | baseline | baseline p50 | baseline p90 | **ratio p50** | ratio p90 |');
    w('|---|---|---|---|---|---|---|---|---|');
    const line = (name, a, bname, b) => w(`| ${name} | ${a.length} | ${ms(p50(a))} | ${ms(p90(a))} | ${bname} | ${ms(p50(b))} | ${ms(p90(b))} | **${ratio(p50(a), p50(b))}** | ${ratio(p90(a), p90(b))} |`);
    const node = `host \`node -e\` (${report.hostNode})`;
    line(`warm javascript \`console.log(1)\`, pool 2 (${misses} of ${rows.warmPy.length * 4} warm calls not from the pool)`, rows.warmJs, node, rows.hostNode);
    line('warm typescript `const n: number = 1; console.log(n)`, pool 2', rows.warmTs, 'warm javascript, same server', rows.warmJs);
    line('warm bash `echo 1`, pool 2', rows.warmBash, 'warm python `print(1)`, same server', rows.warmPy);
    line('cold javascript, pool 0', rows.coldJs, node, rows.hostNode);
    line('cold typescript, pool 0', rows.coldTs, 'cold javascript, same server', rows.coldJs);
    line('cold bash, pool 0', rows.coldBash, 'cold python, same server', rows.coldPy);
    w('');
    w('In the sandbox (delivered → exit frame), p50: ' + Object.keys(parts).filter(k => parts[k].length).map(k => `${k} ${ms(p50(parts[k].map(p => p['in sandbox (delivered → exit frame)'])))}`).join(', ') + '.');
    w('');
  }
  if (report.burst) {
    const b = report.burst;
    const coldP50 = report.latency ? p50(report.latency.rows.cold) : NaN;
    w(`#### Bursts: 10 calls at once, default pool (2) and --max-concurrent (2) (load ${b.load})`);
    w('');
    w('| bursts | calls | p50 | p90 | max | burst wall p50 | cold starts | containers started | **creates/exec** | p90 vs cold p50 | p90 floor (p50) | floor vs cold p50 |');
    w('|---|---|---|---|---|---|---|---|---|---|---|---|');
    w(`| ${b.walls.length} | ${b.execs} | ${ms(p50(b.lat))} | ${ms(p90(b.lat))} | ${ms(Math.max(...b.lat))} | ${ms(p50(b.walls))} | ${b.colds} | ${b.creates} | **${(b.creates / b.execs).toFixed(2)}** | ${ratio(p90(b.lat), coldP50)} | ${ms(p50(b.floors))} | ${ratio(p50(b.floors), coldP50)} |`);
    w('');
    w('*p90 floor*: in each burst, the instant the engine had started the 7th sandbox after the burst began (its start call returned; the pool held 2 when the burst began, and each call takes a sandbox of its own, so the 9th call to end, the p90, cannot end before it); the median over the bursts. It is the engine\'s start rate, which no scheduling of the server\'s changes.');
    w('');
  }
  if (report.tput) {
    w(KUBE ? '#### Throughput: callers back to back, `print(1)`, pool 2, --max-concurrent = callers, against the churn of a `python3 -I -c pass` pod (create, ended, delete through the API server, the sandbox pod\'s hardening), alternating windows'
      : '#### Throughput: callers back to back, `print(1)`, pool 2, --max-concurrent = callers, against the churn of a `python3 -I -c pass` container (create, start, wait, remove through the engine API, the seed\'s hardening), alternating windows');
    w('');
    w('| callers | mcp-exec execs/s | call p50 | churn containers/s | churn cycle p50 | **ratio** | creates/exec | load |');
    w('|---|---|---|---|---|---|---|---|');
    for (const t of report.tput) {
      w(`| ${t.c} | ${t.srv.toFixed(2)} | ${ms(t.lat)} | ${t.churn.toFixed(2)} | ${ms(t.churnLat)} | **${ratio(t.srv, t.churn)}** | ${t.createsPerExec.toFixed(2)} | ${t.load} |`);
    }
    w('');
  }
  if (KUBE) w(`Backend kubernetes, namespace ${kube.ns}, ${CPUS} CPU per pod (sandboxes and baselines); the baselines are pods through the API server (podBody in bench.mjs: the sandbox pod's hardening, seccomp ${JSON.stringify(kube.seccomp)}${BASE_RUNTIME ? `, RuntimeClass ${BASE_RUNTIME}` : ''}); the cold one runs \`python3 -c CODE\` and reads its log, the churn one \`python3 -I -c pass\`.`);
  else w(`(b) ran: \`docker ${dockerArgs.join(' ')}\` with the code on stdin.`);
  for (const n of report.notes) w(`- ${n}`);
  process.stdout.write(out.join('\n') + '\n');
}

async function main() {
  report.t0 = now();
  report.started = new Date().toISOString().slice(0, 16).replace('T', ' ');
  try {
    report.hostPy = readFileSync('/dev/null', 'utf8') + await new Promise(resolve => {
      const p = spawn(HOST_PY, ['-c', 'import sys; print(sys.version.split()[0], end="")\ntry:\n import pandas; print(", pandas", pandas.__version__, end="")\nexcept ImportError: print(", no pandas", end="")']);
      let s = ''; p.stdout.on('data', d => { s += d; }); p.on('close', () => resolve(s)); p.on('error', () => resolve('(not found)'));
    });
  } catch { report.hostPy = ''; }
  report.hostNode = await new Promise(resolve => {
    const p = spawn(HOST_NODE, ['--version']);
    let s = ''; p.stdout.on('data', d => { s += d; }); p.on('close', () => resolve(s.trim())); p.on('error', () => resolve('not found'));
  });
  log(`load ${loadavg()}; sections ${SECTIONS.join(',')}`);
  let failed;
  try {
    if (SECTIONS.includes('latency')) await latency();
    if (SECTIONS.includes('languages')) await languages();
    if (SECTIONS.includes('burst')) await burst();
    if (SECTIONS.includes('throughput')) await throughput();
  } catch (err) {
    failed = err;
    report.notes.push(`FAILED: ${err?.stack ?? err}`);
  }
  print();
  process.exitCode = failed ? 1 : 0;
}

main();
