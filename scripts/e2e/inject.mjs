#!/usr/bin/env node
// End-to-end check of egress inject rules with the official TypeScript MCP SDK: a
// program using requests and one using urllib, through the real server over stdio,
// each fetching a host with an inject rule and a host of the same profile without one:
//
//   node inject.mjs --transport stdio --cmd BINARY --ca FILE
//
// FILE is the PEM of the CA that signed the real hosts' certificates: the programs get
// it as an input file to verify the tunnelled host (the injected one they verify with
// the server's bundle, /egress/ca-bundle.pem). Each check returns the program's stdout;
// what the real hosts received is checked by e2e/egress_inject_e2e_test.go, which
// drives this script inside network namespaces of its own. Like client.mjs it prints ONE
// JSON object on stdout, one line per check on stderr, and exits 0 only when every
// check passed. The server is spawned with this process's whole environment.

import { readFileSync } from 'node:fs';
import {
  TRANSPORT_OPTIONS, call, checkTransport, expect, newReport, parseOptions, runAndReport, short, stdioOrHTTPTransport, usageExit,
} from './common.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';

const USAGE = 'usage: node inject.mjs --transport stdio [--cmd BINARY] --ca FILE';
const opts = parseOptions('inject.mjs', USAGE, { ...TRANSPORT_OPTIONS, ca: { type: 'string' } });
const transportName = checkTransport(opts, ['stdio'], msg => usageExit('inject.mjs', USAGE, msg));
if (!opts.ca) usageExit('inject.mjs', USAGE, '--ca is required');
const ca = readFileSync(opts.ca, 'utf8');

const INJECTED = 'api.mcp-exec-e2e.net';
const TUNNELLED = 'files.mcp-exec-e2e.net';
const UPSTREAM_CA = 'mcp-exec e2e upstream CA';

// Each program sends an Authorization of its own (the rule's must replace it on the
// injected host; the tunnelled host gets it untouched) and prints, per host, the status,
// the body and the common name of the issuer of the certificate its TLS saw.
const programs = {
  requests: `
import json, requests
def get(url, verify=True):
    r = requests.get(url, headers={"Authorization": "Bearer program-own"}, timeout=30, verify=verify, stream=True)
    issuer = dict(x[0] for x in r.raw.connection.sock.getpeercert()["issuer"])["commonName"]
    return [r.status_code, r.text, issuer]
print(json.dumps({"injected": get("https://${INJECTED}/whoami?q=1"),
                  "tunnelled": get("https://${TUNNELLED}/file", verify="upstream-ca.pem")}))
`,
  urllib: `
import json, ssl, urllib.request
def get(url, ctx=None):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer program-own"})
    with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
        issuer = dict(x[0] for x in r.fp.raw._sock.getpeercert()["issuer"])["commonName"]
        return [r.status, r.read().decode(), issuer]
print(json.dumps({"injected": get("https://${INJECTED}/whoami?q=1"),
                  "tunnelled": get("https://${TUNNELLED}/file", ssl.create_default_context(cafile="upstream-ca.pem"))}))
`,
};

function check(lib) {
  return [`${lib}_injected_and_tunnelled`, async (client) => {
    const result = await call(client, { egress: 'e2e', files: [{ name: 'upstream-ca.pem', content: ca }], code: programs[lib] });
    const sc = result.structuredContent;
    expect(!result.isError && sc?.exit_code === 0, `isError ${result.isError}, exit ${sc?.exit_code}; stderr: ${short(sc?.stderr, 2000)}`);
    const got = JSON.parse(sc.stdout);
    const [iStatus, iBody, iIssuer] = got.injected;
    expect(iStatus === 200 && iBody === `hello from ${INJECTED}`, `injected host: ${short(got.injected)}`);
    expect(iIssuer.startsWith('mcp-exec egress injection CA '), `injected host's certificate issued by ${iIssuer}: want the proxy's CA`);
    const [tStatus, tBody, tIssuer] = got.tunnelled;
    expect(tStatus === 200 && tBody === `hello from ${TUNNELLED}`, `tunnelled host: ${short(got.tunnelled)}`);
    expect(tIssuer === UPSTREAM_CA, `tunnelled host's certificate issued by ${tIssuer}: want the real server's (${UPSTREAM_CA})`);
    return sc.stdout.trim();
  }];
}

function log(line) {
  process.stderr.write(`[inject.mjs ${transportName}] ${line}\n`);
}

const client = new Client({ name: 'mcp-exec-e2e-inject', version: '1.0.0' }, { capabilities: {} });
await runAndReport(client, stdioOrHTTPTransport(transportName, opts.cmd, undefined, ''), [check('requests'), check('urllib')],
  newReport(transportName, undefined, ''), log);
