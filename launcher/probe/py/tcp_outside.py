from _composed import connect, denied, errno, finish, socket, v6  # defined by what probe.go puts before this file; the line is dropped
for host, port in (("1.1.1.1", 53), ("8.8.8.8", 443), ("1.1.1.1", 443), ("9.9.9.9", 53)):
    denied("tcp %s:%d" % (host, port), lambda: connect(socket.AF_INET, (host, port)), errno.ENETUNREACH)
for host, port in (("2606:4700:4700::1111", 53), ("2001:4860:4860::8888", 443)):
    denied("tcp [%s]:%d" % (host, port), v6(lambda: connect(socket.AF_INET6, (host, port))), errno.ENETUNREACH)
finish()
