from _composed import check, finish  # defined by what probe.go puts before this file; the line is dropped
import socket
names = sorted(n for _, n in socket.if_nameindex())
check(names == ["lo"], "interfaces %r, want only ['lo']" % names)
with open("/proc/net/dev") as f:
    devs = sorted(l.split(":")[0].strip() for l in f.read().splitlines()[2:])
check(devs == ["lo"], "/proc/net/dev lists %r, want only lo" % devs)
with open("/proc/net/route") as f:
    routes = [l for l in f.read().splitlines()[1:] if l.strip()]
check(routes == [], "IPv4 routes in the main table: %r" % routes)
try:
    with open("/proc/net/ipv6_route") as f:
        devs6 = {l.split()[-1] for l in f if l.strip()}
    check(devs6 <= {"lo"}, "IPv6 routes through %r, want only lo" % sorted(devs6))
except FileNotFoundError:
    pass  # IPv6 disabled in the kernel
print("interfaces:", names)
finish()
