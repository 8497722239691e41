from _composed import errno  # defined by what probe.go puts before this file; the line is dropped
import socket


def connect(family, addr, kind=socket.SOCK_STREAM):
    s = socket.socket(family, kind)
    try:
        s.settimeout(5)
        s.connect(addr)
        return "connected to %r" % (addr,)
    finally:
        s.close()


def sendto(family, addr, data):
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        return "sent %d bytes" % s.sendto(data, addr)
    finally:
        s.close()


def v6(fn):
    """IPv6 attempts: a kernel without IPv6 refuses the socket itself."""
    def run():
        try:
            socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
        except OSError as e:
            if e.errno == errno.EAFNOSUPPORT:
                print("IPv6 unsupported by the kernel")
                raise OSError(errno.ENETUNREACH, "no IPv6")
            raise
        return fn()
    return run

