# mcp-exec sandbox bootstrap. Runs as PID 1 of every sandbox container:
#
#   python3 -I -c <this file> parent MAX_OUTPUT PRELOAD
#
# The parent starts the child interpreter at once (so that Python, and any preloaded
# modules, load while the server is still sending the code), then relays the child's
# stdout and stderr to the container's stdout as frames:
#
#   1 byte type, 4 bytes big-endian payload length, payload
#   R  (empty)        the child is loaded and waits for its code
#   O  bytes          a chunk of the program's stdout
#   E  bytes          a chunk of the program's stderr
#   X  JSON           the program has ended: {"exit": N, "signal": S, "oom": B, "dropped": B}
#   F  text           the bootstrap itself failed
#
# Everything the program writes is wrapped in O and E frames, so it cannot forge an X
# frame. The program cannot reach the parent either: the parent is PID 1 of the
# container's PID namespace (signals without a handler are not delivered to it from
# inside), ignores SIGINT, and makes itself non-dumpable, so that /proc/1/fd, /proc/1/mem
# and ptrace are closed to the program even though both run as the same user.
#
# The child reads the container's stdin directly: a header line "MCPEXEC1 <n>\n", then
# n bytes of code, then the rest of the stream is the program's own stdin.
import os
import sys

CHILD = r'''
def _boot():
    # Imports stay local so that the program starts with a clean __main__.
    import os, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ready = int(sys.argv[1])
    for name in filter(None, sys.argv[2].split(",")):
        try:
            __import__(name)
        except BaseException:
            pass
    os.write(ready, b"R")
    os.close(ready)

    def read_exact(n):
        chunks, got = [], 0
        while got < n:
            b = os.read(0, min(n - got, 1 << 20))
            if not b:
                raise SystemExit("mcp-exec: the code stream ended early")
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    header = b""
    while not header.endswith(b"\n"):
        b = os.read(0, 1)
        if not b or len(header) > 32:
            raise SystemExit("mcp-exec: no code header")
        header += b
    magic, _, n = header.strip().partition(b" ")
    if magic != b"MCPEXEC1" or not n.isdigit():
        raise SystemExit("mcp-exec: bad code header")
    source = read_exact(int(n)).decode("utf-8", "surrogateescape")

    import linecache
    linecache.cache["<exec>"] = (len(source), None, source.splitlines(True), "<exec>")

    def hook(t, v, tb, _orig=sys.excepthook):
        # Hide the bootstrap's own frame from the program's tracebacks.
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next
        if v is not None:
            v.__traceback__ = tb
        _orig(t, v, tb)
    sys.excepthook = hook
    sys.argv = ["<exec>"]
    sys.stdout.reconfigure(line_buffering=True)
    return compile(source, "<exec>", "exec", dont_inherit=True)
exec(globals().pop("_boot")())
'''


def frame(kind, payload=b""):
    n = len(payload)
    return kind + n.to_bytes(4, "big") + payload


def write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def oom_kills():
    # The number of OOM kills in this container's memory cgroup (v2, then v1).
    for path, key in (("/sys/fs/cgroup/memory.events", "oom_kill"),
                      ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    k, _, v = line.partition(" ")
                    if k == key:
                        return int(v)
        except (OSError, ValueError):
            continue
    return 0


def fatal(msg):
    write_all(1, frame(b"F", msg.encode()))
    os._exit(70)


def parent(max_output, preload):
    import ctypes
    import select
    import signal
    import subprocess
    import json

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
        fatal("prctl(PR_SET_DUMPABLE) failed: errno %d" % ctypes.get_errno())

    ready_r, ready_w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-I", "-c", CHILD, str(ready_w), preload],
        stdin=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(ready_w,), cwd="/tmp" if os.path.isdir("/tmp") else "/",
        close_fds=True, restore_signals=True)
    os.close(ready_w)
    os.close(0)  # the container's stdin belongs to the child alone
    ooms = oom_kills()

    out_fd, err_fd = child.stdout.fileno(), child.stderr.fileno()
    kinds = {out_fd: b"O", err_fd: b"E"}
    for fd in kinds:
        os.set_blocking(fd, False)
    try:
        exited = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        exited = None

    sent, dropped = 0, False

    def relay(fd):
        nonlocal sent, dropped
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        room = max_output + 1 - sent  # one byte past the cap tells the server it was hit
        if room < len(data):
            dropped = True
            data = data[:max(room, 0)]
        if data:
            sent += len(data)
            write_all(1, frame(kinds[fd], data))
        return True

    open_fds = [out_fd, err_fd, ready_r]
    while True:
        watch = open_fds + ([exited] if exited is not None else [])
        readable, _, _ = select.select(watch, [], [], None if exited is not None else 0.05)
        for fd in readable:
            if fd == ready_r:
                if os.read(ready_r, 1):
                    write_all(1, frame(b"R"))
                os.close(ready_r)
                open_fds.remove(ready_r)
            elif fd != exited and not relay(fd):
                open_fds.remove(fd)
        if (exited is not None and exited in readable) or child.poll() is not None:
            break
    status = child.wait()
    # What the program wrote before it ended is in the pipes now. A process it left
    # behind may hold them open, so drain without waiting for end of file.
    # The drain is bounded in time: a leftover process may keep writing.
    import time
    deadline = time.monotonic() + 0.2
    for fd in (out_fd, err_fd):
        while fd in open_fds and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0)
            if not r or not relay(fd):
                break
    sig = -status if status < 0 else 0
    result = {"exit": 128 + sig if sig else status, "signal": sig,
              "oom": oom_kills() > ooms, "dropped": dropped}
    write_all(1, frame(b"X", json.dumps(result).encode()))
    # Returning ends PID 1, and with it every process the program left behind.
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "parent":
        sys.stderr.write("usage: boot parent MAX_OUTPUT PRELOAD\n")
        sys.exit(64)
    parent(int(sys.argv[2]), sys.argv[3])
