from _composed import denied, errno, finish  # defined by what probe.go puts before this file; the line is dropped
import socket
ETH_P_ALL = 0x0003
for what, args in (
        ("AF_INET SOCK_RAW ICMP", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
        ("AF_INET SOCK_RAW IPPROTO_RAW", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)),
        ("AF_INET SOCK_RAW TCP", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)),
        ("AF_PACKET SOCK_RAW ETH_P_ALL", (socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))),
        ("AF_PACKET SOCK_DGRAM ETH_P_ALL", (socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL)))):
    denied("socket " + what, lambda: socket.socket(*args), errno.EPERM)
def raw6():
    try:
        return socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    except OSError as e:
        if e.errno == errno.EAFNOSUPPORT:
            raise OSError(errno.EPERM, "no IPv6 in this kernel")
        raise
denied("socket AF_INET6 SOCK_RAW ICMPV6", raw6, errno.EPERM)
finish()
