from _composed import connect, denied, errno, finish, sendto, socket, v6  # defined by what probe.go puts before this file; the line is dropped
query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
for host, port in (("1.1.1.1", 53), ("8.8.8.8", 53), ("9.9.9.9", 123)):
    denied("udp sendto %s:%d" % (host, port), lambda: sendto(socket.AF_INET, (host, port), query), errno.ENETUNREACH)
    denied("udp connect %s:%d" % (host, port), lambda: connect(socket.AF_INET, (host, port), socket.SOCK_DGRAM), errno.ENETUNREACH)
for host, port in (("2606:4700:4700::1111", 53), ("2001:4860:4860::8888", 53)):
    denied("udp sendto [%s]:%d" % (host, port), v6(lambda: sendto(socket.AF_INET6, (host, port), query)), errno.ENETUNREACH)
# A broadcast on the local segment would reach the host's bridge.
def broadcast():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        return "sent %d bytes" % s.sendto(b"x", ("255.255.255.255", 67))
    finally:
        s.close()
denied("udp broadcast 255.255.255.255:67", broadcast, errno.ENETUNREACH)
finish()
