import net from 'node:net';
import dgram from 'node:dgram';
import dns from 'node:dns/promises';

// No interface but lo, no route off it.
const devs = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).filter(Boolean).map((l) => l.split(':')[0].trim()).sort();
if (devs.join() !== 'lo') fail(`/proc/net/dev lists ${devs}, want only lo`);
const routes = fs.readFileSync('/proc/net/route', 'utf8').split('\n').slice(1).filter((l) => l.trim());
if (routes.length) fail(`${routes.length} IPv4 routes in the main table`);
if (fs.existsSync('/proc/net/ipv6_route')) {
  const via = new Set(fs.readFileSync('/proc/net/ipv6_route', 'utf8').split('\n').filter(Boolean).map((l) => l.trim().split(/\s+/).pop()));
  via.delete('lo');
  if (via.size) fail(`IPv6 routes through ${[...via]}`);
}
console.log('interfaces: ' + devs);

// TCP and UDP to outside addresses find no route. A kernel without IPv6 refuses the
// socket; the process backend's namespace has no IPv6 address to send from, so there
// an IPv6 attempt fails before routing (EADDRNOTAVAIL, the Python probes' documented
// difference): unreachable, said.
const tcp = (host, port) => new Promise((resolve, reject) => {
  const s = net.connect({ host, port });
  s.setTimeout(5000, () => { s.destroy(); resolve('no answer within 5 s (a route out)'); });
  s.on('connect', () => { s.destroy(); resolve('connected'); });
  s.on('error', reject);
});
const udp = (host, port) => new Promise((resolve, reject) => {
  const s = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  s.on('error', reject);
  s.send(Buffer.from('abcd01000001000000000000076578616d706c6503636f6d0000010001', 'hex'), port, host, (err) => {
    s.close();
    if (err) reject(err);
    else resolve('sent');
  });
});
for (const [proto, fn, host, port] of [
  ['tcp', tcp, '1.1.1.1', 53], ['tcp', tcp, '8.8.8.8', 443], ['udp', udp, '1.1.1.1', 53], ['udp', udp, '9.9.9.9', 123],
  ['tcp', tcp, '2606:4700:4700::1111', 53], ['udp', udp, '2001:4860:4860::8888', 53],
]) {
  const what = `${proto} ${host}:${port}`;
  const v6 = net.isIPv6(host);
  const code = await denied(what, () => fn(host, port), 'ENETUNREACH', ...(v6 ? ['EAFNOSUPPORT', ...(PROCESS ? ['EADDRNOTAVAIL'] : [])] : []));
  if (v6 && code !== 'ENETUNREACH') note(`${what}: no IPv6 address to send from (${code})`);
}

// Names do not resolve, through the system's resolver and through c-ares (the
// nameservers of /etc/resolv.conf, asked directly).
for (const name of ['example.com', 'pypi.org', 'host.docker.internal', 'host.containers.internal', 'metadata.google.internal']) {
  await denied(`lookup ${name}`, async () => JSON.stringify(await dns.lookup(name, { all: true })), 'ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA');
}
await denied('resolve4 example.com', async () => JSON.stringify(await dns.resolve4('example.com')), 'ECONNREFUSED', 'ETIMEOUT', 'ENOTFOUND', 'ESERVFAIL');
finish();
