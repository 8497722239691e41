from _composed import ename, errno, fail, finish  # defined by what probe.go puts before this file; the line is dropped
import ipaddress, socket
ok = {socket.EAI_AGAIN: "EAI_AGAIN", socket.EAI_NONAME: "EAI_NONAME", socket.EAI_FAIL: "EAI_FAIL"}
if hasattr(socket, "EAI_NODATA"):
    ok[socket.EAI_NODATA] = "EAI_NODATA"
for name in ("example.com", "google.com", "pypi.org", "host.docker.internal",
             "gateway.docker.internal", "host.containers.internal", "metadata.google.internal"):
    try:
        addrs = socket.getaddrinfo(name, 443, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        if e.errno in ok:
            print("resolve %s: failed (%s)" % (name, ok[e.errno]))
        else:
            fail("resolve %s: failed with %r, want one of %s" % (name, e, sorted(ok.values())))
        continue
    fail("resolve %s: got %s" % (name, sorted({a[4][0] for a in addrs})))

# The resolvers themselves: whatever /etc/resolv.conf names (the engine writes its
# own there for networked containers), Docker's embedded DNS and systemd-resolved's
# stub. An outside one must be unreachable; a loopback one must not answer.
servers = []
try:
    with open("/etc/resolv.conf") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                servers.append(parts[1].split("%")[0])
except FileNotFoundError:
    pass
query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
for ns in dict.fromkeys(servers + ["127.0.0.11", "127.0.0.53"]):
    try:
        ip = ipaddress.ip_address(ns)
    except ValueError:
        fail("unparsable nameserver %r" % ns)
        continue
    s = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.connect((ns, 53))
        s.send(query)
        if not ip.is_loopback:
            fail("nameserver %s: a query went out" % ns)
            continue
        data = s.recv(512)
        fail("nameserver %s answered (%d bytes)" % (ns, len(data)))
    except OSError as e:
        if e.errno == errno.ENETUNREACH or (ip.is_loopback and e.errno == errno.ECONNREFUSED):
            print("nameserver %s: unreachable (%s)" % (ns, ename(e.errno)))
        elif ip.is_loopback and isinstance(e, TimeoutError):
            print("nameserver %s: no answer" % ns)
        else:
            fail("nameserver %s: failed with %s (%s), want ENETUNREACH%s" % (ns, ename(e.errno), e, "/ECONNREFUSED" if ip.is_loopback else ""))
    finally:
        s.close()
print("resolv.conf names %s" % (servers or "no nameserver"))
finish()
