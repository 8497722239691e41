from _composed import HOST_ADDRS, connect, denied, errno, finish, socket, v6  # defined by what probe.go puts before this file; the line is dropped
import ipaddress
targets = [("172.17.0.1", p) for p in (2375, 2376, 80, 443, 22)]
targets += [("169.254.169.254", 80)]
for a in HOST_ADDRS:
    ip = ipaddress.ip_address(a)
    if ip.is_loopback or ip.is_link_local:
        continue
    targets += [(a, p) for p in (2375, 2376, 80, 22)]
targets = list(dict.fromkeys(targets))
for host, port in targets:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    fn = (lambda: connect(fam, (host, port)))
    denied("tcp %s port %d" % (host, port), v6(fn) if fam == socket.AF_INET6 else fn, errno.ENETUNREACH)
# Loopback is the sandbox's own: nothing listens there, not the engine's API.
for port in (2375, 2376, 80, 8080):
    denied("tcp 127.0.0.1:%d" % port, lambda: connect(socket.AF_INET, ("127.0.0.1", port)), errno.ECONNREFUSED)
    denied("tcp [::1]:%d" % port, v6(lambda: connect(socket.AF_INET6, ("::1", port))), errno.ECONNREFUSED, errno.ENETUNREACH, errno.EADDRNOTAVAIL)
print("tried %d host addresses" % len(targets))
finish()
