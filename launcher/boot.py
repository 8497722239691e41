# mcp-exec sandbox bootstrap. Runs as PID 1 of every sandbox container:
#
#   python3 -I -c <this file> parent MAX_OUTPUT PRELOAD OUTDIR MAX_FILE MAX_FILES seccomp=HEX
#
# Before anything else it installs the seccomp filter HEX on itself (install_filter),
# which every process of the sandbox inherits.
#
# The parent forks the child at once (so that any preloaded modules load while the
# server is still sending the code; a fork of this interpreter rather than a new one,
# whose start every cold exec would wait for), then relays the child's
# stdout and stderr to the container's stdout as frames (see "The wire" below).
#
# On Kubernetes the whole stream is sealed with a per-pod key (see SEAL_LABEL), since the
# node's container log copies it; elsewhere it is plain. Everything the program writes is
# wrapped in O and E frames, so it cannot forge an X frame. The program cannot reach the parent either: the parent is PID 1 of the
# container's PID namespace (signals without a handler are not delivered to it from
# inside), ignores SIGINT, and makes itself non-dumpable, so that /proc/1/fd, /proc/1/mem
# and ptrace are closed to the program even though both run as the same user. The child
# runs no code of the caller's before the parent says it is non-dumpable (the "go" pipe).
#
# The parent imports as little as it can before the fork (os, sys, builtin modules): the
# child is a copy of it, and is to look like a fresh interpreter to the program.
#
# The child reads the container's stdin directly: a header line (HEADER_EXEC, or
# HEADER_TOOLS with tools), the code, the input files, then the program's own stdin (with
# tools: exactly its size, then the server's replies to the program's calls; see _tools).
# Files in go to
# the working directory; everything the program writes under OUTDIR comes back in D
# frames after it ends, and so do matplotlib figures (saved there by plt.show() and at
# exit).
import os
import sys

# The bootstrap's own exit statuses, as the container's; launcher/boot.go has the same
# names. A program's exit status travels in the X frame, never as the container's.
EXIT_OK = 0  # the X frame was sent
EXIT_USAGE = 64  # wrong arguments (EX_USAGE)
EXIT_FAILED = 70  # the bootstrap failed: an F frame, or a child that could not start (EX_SOFTWARE)


# ---- The wire (the server's side: launcher/wire, whose package doc has the table) ----
#
# PID 1 writes frames to fd 1: 1 byte kind, 4 bytes big-endian payload length, payload.
#   R  (empty)        the interpreter is loaded and waits for its code
#   O  bytes          a chunk of the program's stdout
#   E  bytes          a chunk of the program's stderr
#   D  u32 n, JSON, bytes  a file the program left in OUTDIR: n bytes of JSON header
#                     {"name", "size", "skipped"} then its content (none if skipped)
#   X  JSON           the program (or a session's call) has ended: exit_payload
#   P  JSON           a kept call still runs: {"output_bytes"}, after O and E frames
#                     holding the last TAIL bytes of each stream (MCPEXECF's answer)
#   F  text           the bootstrap itself failed
#   C  bytes          a chunk of the program's tool calls (code mode; mcptools.py writes
#                     them, and reads the server's Y frames, in the program's process)
# The server writes header lines on stdin, each followed by what it announces, and Y
# frames (u32 call id, JSON: replies to calls) after a header with tools. A one-shot
# child reads HEADER_EXEC "<code> <files> [<language>]" or HEADER_TOOLS "<code>
# <files> <tools> <stdin>"; a session's PID 1 reads HEADER_CELL "<code> <files>
# <stdin> [<language>]", HEADER_CELL_TOOLS "<code> <files> <tools> <stdin> [javascript]", HEADER_KEPT "<code>
# <files> <stdin> <timeout ms> [<language>]", HEADER_FETCH, HEADER_KILL ["cancel": no one reads
# the call's result], or HEADER_RESEAL "<key hex>". Input files are u32 name length, name,
# u32 size, bytes; repeated.
# Kubernetes' start gate reads its own line, the seal key (launcher/kube).
FRAME_READY = b"R"
FRAME_STDOUT = b"O"
FRAME_STDERR = b"E"
FRAME_FILE = b"D"
FRAME_EXIT = b"X"
FRAME_FATAL = b"F"
FRAME_CALL = b"C"
FRAME_REPLY = b"Y"
FRAME_PROGRESS = b"P"
HEADER_EXEC = b"MCPEXEC2"
HEADER_TOOLS = b"MCPEXEC3"
HEADER_CELL = b"MCPEXECS"
HEADER_CELL_TOOLS = b"MCPEXECT"
HEADER_KILL = b"MCPEXECK"
HEADER_RESEAL = b"MCPEXECR"
HEADER_KEPT = b"MCPEXECB"
HEADER_FETCH = b"MCPEXECF"
TAIL = 512
# The languages besides Python a one-shot HEADER_EXEC may name last: the interpreter's
# argv, CODE standing for the program's file (see _interpreter). bash fails on the first
# failing command, of a pipeline too; node takes the file for an ES module when its
# syntax says so (import, top-level await), else CommonJS (Node 20.19's detection), and
# the file keeps its /dev/fd name (a memory file's target is no path). TypeScript is
# JavaScript once _typescript has stripped its types; its source map names its lines.
LANGUAGES = {
    b"bash": ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "CODE"],
    b"javascript": ["node", "--preserve-symlinks-main", "CODE"],
    b"typescript": ["node", "--preserve-symlinks-main", "--enable-source-maps", "CODE"],
}
# The image's start-up snapshot for node (its Dockerfile: Debian's node has none).
NODE_SNAPSHOT = "/usr/local/share/mcp-exec/node.blob"
# esbuild as a one-shot program's child (_typescript) and a session's node (NODE_RUNNER)
# run it to strip TypeScript's types, before --sourcefile=<the name stack traces show>.
ESBUILD = ["esbuild", "--loader=ts", "--target=node20", "--sourcemap=inline", "--log-level=error", "--color=false"]


def frame(kind, payload=b""):
    n = len(payload)
    return kind + n.to_bytes(4, "big") + payload


def exit_payload(status, ooms, dropped, killed=False, state=None):
    # An X frame's JSON for a program that ended with status (negative: killed by that
    # signal). Without an OOM counter (ooms None: gVisor), a program killed by SIGKILL
    # inside the sandbox counts as OOM-killed: the launcher's own kills (timeout, cancel)
    # end the whole sandbox and never reach this frame, and gVisor kills for memory with
    # SIGKILL; a session's kill (killed) does not count. A program that sends itself
    # SIGKILL is reported as OOM-killed too (docs/engines.md).
    sig = -status if status < 0 else 0
    oom = oom_kills() > ooms if ooms is not None else sig == 9 and not killed
    result = '{"exit": %d, "signal": %d, "oom": %s, "dropped": %s' % (
        128 + sig if sig else status, sig, "true" if oom else "false",
        "true" if dropped else "false")
    if state is not None:
        result += ', "state": "%s"' % state
    return (result + "}").encode()


class Output:
    # One call's O and E frames, under the output cap: one byte past it tells the server
    # it was hit, and everything after is dropped (dropped, in the X frame).
    def __init__(self, max_output, emit):
        self.max_output, self.emit, self.sent, self.dropped = max_output, emit, 0, False
        self.total, self.tails = 0, {FRAME_STDOUT: b"", FRAME_STDERR: b""}  # past the cap too

    def relay(self, fd, kind):
        # Frames what fd has (non-blocking) as kind; False at its end of file.
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.total += len(data)
        self.tails[kind] = (self.tails[kind] + data[-TAIL:])[-TAIL:]
        room = self.max_output + 1 - self.sent
        if room < len(data):
            self.dropped = True
            data = data[:max(room, 0)]
        if data:
            self.sent += len(data)
            self.emit(frame(kind, data))
        return True


def read_line(line=b""):
    # A session's PID 1 reads the server's header lines itself. The end of the stream
    # (the server closed it) ends the session.
    while not line.endswith(b"\n"):
        b = os.read(0, 1)
        if not b:
            os._exit(EXIT_OK)
        line += b
        if len(line) > 80:
            fatal("bad session header")
    return line


def read_exact(n):
    chunks, got = [], 0
    while got < n:
        b = os.read(0, min(n - got, 1 << 20))
        if not b:
            os._exit(EXIT_OK)
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_input():
    # A session's next input: (a whole Y frame, None) or (None, a header line). Y frames
    # come only after a call with tools, while it runs or just after it ended.
    b = os.read(0, 1)
    if not b:
        os._exit(EXIT_OK)
    if b == FRAME_REPLY:
        n = read_exact(4)
        return b + n + read_exact(int.from_bytes(n, "big")), None
    return None, read_line(b)


# The seal (Kubernetes only, where the node's container log copies every byte written to
# fd 1): when the start gate hands the bootstrap a key, everything written to fd 1 is XORed
# with a keystream the server undoes (launcher/kube/seal.go). Block i of the keystream is
# SHAKE-256(key || SEAL_LABEL || uint64_be(i)), SEAL_BLOCK bytes; the stream is the blocks in
# order. The key comes through a pipe whose descriptor the last argument names (seal-fd=N),
# and is read by the parent after the fork: the child never holds it, not even in the copy
# of the parent's memory (an environment variable would stay readable in the child's
# /proc/self/environ, popped or not: it lives on the initial stack, which fork copies).
SEAL_LABEL = b"mcp-exec seal v1"
SEAL_BLOCK = 1 << 16
SEAL_KEY_SIZE = 32
seal = None  # set by take_seal when there is a key, and anew by a session's HEADER_RESEAL
gate_fd = None  # the key's descriptor (seal-fd=N), for take_seal and an early fatal


def sealer(key):
    from hashlib import shake_256
    off, cache = 0, [None, b""]

    def block(i):
        if cache[0] != i:
            cache[0] = i
            cache[1] = shake_256(key + SEAL_LABEL + i.to_bytes(8, "big")).digest(SEAL_BLOCK)
        return cache[1]

    def seal(data):
        nonlocal off
        n = len(data)
        parts, pos, end = [], off, off + n
        while pos < end:
            i, j = divmod(pos, SEAL_BLOCK)
            take = min(SEAL_BLOCK - j, end - pos)
            parts.append(block(i)[j:j + take])
            pos += take
        off = end
        ks = b"".join(parts)
        return (int.from_bytes(data, "little") ^ int.from_bytes(ks, "little")).to_bytes(n, "little")
    return seal


def read_seal_key(fd):
    key = b""
    try:
        while len(key) < SEAL_KEY_SIZE:
            b = os.read(fd, SEAL_KEY_SIZE - len(key))
            if not b:
                break
            key += b
        os.close(fd)
    except OSError:
        key = b""
    if len(key) != SEAL_KEY_SIZE:
        # Nothing may reach fd 1 unsealed; stderr carries no caller data.
        os.write(2, b"mcp-exec: no seal key from the start gate\n")
        os._exit(EXIT_FAILED)
    return key


def write_all(fd, data):
    if fd == 1 and seal is not None:
        data = seal(data)
    while data:
        n = os.write(fd, data)
        data = data[n:]


# ---- (end of the wire) ---------------------------------------------------------------


CHILD = r'''
def _boot():
    # Imports stay local so that the program starts with a clean __main__.
    import os, _signal, sys
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    files, plots, _seed = globals().pop("_files"), globals().pop("_plots"), globals().pop("_seed")
    tools, prepare, _interpreter = globals().pop("_tools"), globals().pop("_prepare"), globals().pop("_interpreter")
    _ahead, _handoff, execp = globals().pop("_ahead"), globals().pop("_handoff"), globals().pop("_execp")
    globals().pop("_mcptools_js"), globals().pop("_mcptools_named")  # _tools holds them
    _typescript = globals().pop("_typescript")
    ready, outdir, go, calls = int(sys.argv[1]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    prestart = sys.argv[6]
    _seed(os)
    lines = plots(sys, outdir)
    for name in filter(None, sys.argv[2].split(",")):
        try:
            __import__(name)
        except BaseException:
            pass
    prepare(sys)
    # What is loaded so far is the interpreter's and the preload's: keep it out of the
    # garbage collections the end of the program runs (see _finish). The collection
    # first: the first one in a forked process writes to pages it shares with PID 1
    # (their copies cost ~0.5 ms of page faults), and the end's is then cheap.
    import gc
    gc.collect()
    gc.freeze()
    ahead = _ahead(os, execp, prestart, (ready, go, calls))
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
        if not b or len(header) > 64:
            raise SystemExit("mcp-exec: no code header")
        header += b
    parts = header.split()
    # A one-shot header without tools may name another language last: its argv.
    lang = parts.pop() if len(parts) in (4, 6) and parts[-1] in LANGUAGES else b"python"
    argv = list(LANGUAGES[lang]) if lang in LANGUAGES else None
    if not parts or (len(parts), parts[0]) not in ONE_SHOT_HEADERS or not all(p.isdigit() for p in parts[1:]):
        raise SystemExit("mcp-exec: bad code header")
    source = read_exact(int(parts[1])).decode("utf-8", "surrogateescape")
    if lang == b"typescript":
        source = _typescript(os, source, go)
    files(os, read_exact(int(parts[2])))
    if len(parts) == 5:
        pre = ahead.get(lang, (0, 0, ()))[2] or None  # node's descriptors, made before it started
        source = tools(os, sys, read_exact(int(parts[3])), read_exact(int(parts[4])), calls, argv, source, pre)
    else:
        os.close(calls)  # no tools: nothing may reach the call stream
    os.makedirs(outdir, exist_ok=True)
    for name, (pid, w, fds) in ahead.items():
        if name != lang:  # not this call's: it must not outlive the set-up
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            for fd in (w,) + fds:
                os.close(fd)
    if lang in ahead:
        _handoff(os, ahead[lang], source.encode("utf-8", "surrogateescape"), go, len(parts) == 5)
    if argv is not None:
        _interpreter(os, execp, argv, source.encode("utf-8", "surrogateescape"), go)
    # The source, for tracebacks, warnings and inspect: into linecache's cache, now if
    # something loaded it already, or else when it is first imported (see _plots).
    lines["<exec>"] = (len(source), None, source.splitlines(True), "<exec>")
    if "linecache" in sys.modules:
        sys.modules["linecache"].cache.update(lines)
    code = compile(source, "<exec>", "exec", dont_inherit=True)
    # The parent writes one byte once it is non-dumpable; nothing if it failed.
    if os.read(go, 1) != b"G":
        raise SystemExit("mcp-exec: the bootstrap did not start")
    os.close(go)
    return code

def _interpreter(os, execp, argv, source, go):
    # Another language: its interpreter replaces this process once the set-up every
    # program gets is done (filter, limits, working directory, files, stdin). The code
    # goes in a memory file, as large as code may be (an argument holds 128 KiB), named
    # by /dev/fd/N; N stays open in the program, unlike the descriptors that got here.
    fd = os.memfd_create("exec", 0)
    while source:
        source = source[os.write(fd, source):]
    os.lseek(fd, 0, 0)
    if os.read(go, 1) != b"G":
        raise SystemExit("mcp-exec: the bootstrap did not start")
    os.close(go)
    argv = [a.replace("CODE", "/dev/fd/%d" % fd) for a in argv]
    if argv[0] == "node" and os.path.exists(NODE_SNAPSHOT):
        argv[1:1] = ["--snapshot-blob", NODE_SNAPSHOT]
    execp(os, argv)


def _execp(os, argv, env=None):
    # Replaces this process with argv[0] found on PATH, as execvpe would (the first
    # error but ENOENT and ENOTDIR wins), after the signals Python ignores are back to
    # their defaults (an exec would pass the ignoring on: `yes | head` would not end).
    # Not execvpe: its os.get_exec_path imports warnings, 0.5-1 ms of every call.
    import _signal
    for sig in ("SIGPIPE", "SIGXFSZ"):
        _signal.signal(getattr(_signal, sig), _signal.SIG_DFL)
    err = None
    for d in os.environ.get("PATH", os.defpath).split(":"):
        try:
            os.execve((d or ".") + "/" + argv[0], argv, os.environ if env is None else env)
        except OSError as e:
            err = e if err is None or err.errno in (2, 20) else err
    raise SystemExit("mcp-exec: cannot start %s: %s" % (argv[0], err.strerror))

def _ahead(os, execp, names, close):
    # --pool-prestart: each interpreter named starts now, in a pooled sandbox waiting
    # for its code. It is this process's child, so it has everything PID 1 gave this
    # one (filter, limits, user, no new privileges); the set-up of the call (files,
    # working directory) is done before its code comes, and it runs nothing before that.
    # bash reads its program from a pipe (as from a file, only without its check for a
    # binary file). node's program is a memory file filled when the code comes, which
    # the image's snapshot main (images/python-sandbox/node-main.js) reads only once a
    # gate pipe lets it go: node reads an ES module's file twice, which a pipe cannot
    # give. An image whose main cannot wait starts no node ahead. Returns, by language,
    # (pid, the pipe's writing end, the descriptors kept for node: code, stdin, mcptools
    # and reply, or ()).
    ahead = {}
    snap, main = NODE_SNAPSHOT, "/usr/local/share/mcp-exec/node-main.js"
    for name in filter(None, names.split(",")):
        name = name.encode()
        argv, env, fds = list(LANGUAGES[name]), os.environ, ()
        if name == b"javascript":
            try:
                with open(main, "rb") as f:
                    if b"MCP_EXEC_AHEAD" not in f.read() or not os.path.exists(snap):
                        continue
            except OSError:
                continue
            argv[1:1] = ["--snapshot-blob", snap, "--preserve-symlinks"]  # code mode's, which comes too late
            fds = (os.memfd_create("exec", 0), os.memfd_create("stdin", 0), os.memfd_create("mcptools", 0), os.dup(0))
        r, w = os.pipe()
        if fds:
            env = dict(env, MCP_EXEC_AHEAD="%d,%d,%d,%d,%d" % (r, fds[1], fds[2], close[2], fds[3]))
            code = fds[0]
        else:
            code = r
        pid = os.fork()
        if pid == 0:
            try:
                for fd in close[:2] + (() if fds else close[2:]) + tuple(f for p in ahead.values() for f in p[1:2] + p[2]) + (w,):
                    os.close(fd)
                for fd in (r,) + ((close[2],) + fds if fds else ()):
                    os.set_inheritable(fd, True)
                execp(os, [a.replace("CODE", "/dev/fd/%d" % code) for a in argv], env)
            finally:
                os._exit(70)  # EXIT_FAILED: a child that could not start
        os.close(r)
        ahead[name] = (pid, w, fds)
    return ahead

def _handoff(os, ahead, source, go, tools):
    # The code into the interpreter started ahead (_ahead), once PID 1 says go; then this
    # process ends as it ended: its exit code, or the same signal. A pipe holds 64 KiB: a
    # longer program is written as the interpreter reads it, and one that exits before
    # the end of its file stops the writing (EPIPE), as a file it never read to the end.
    # node's memory file is filled before the go, and the gate opened after it ("T":
    # with tools). An interpreter that has ended already (it could not start) returns:
    # the caller starts one as if none had been started ahead.
    pid, w, fds = ahead
    if os.waitpid(pid, os.WNOHANG)[0]:
        for fd in (w,) + (fds[:2] if tools else fds):  # with tools, the program's mcptools and reply stay
            os.close(fd)
        return
    if fds:
        while source:
            source = source[os.write(fds[0], source):]
        source = b"T" if tools else b"G"
    if os.read(go, 1) != b"G":
        raise SystemExit("mcp-exec: the bootstrap did not start")
    os.close(go)
    for fd in (0, 1, 2) + fds:  # the program's streams and files are the interpreter's alone
        os.close(fd)
    try:
        while source:
            source = source[os.write(w, source):]
    except BrokenPipeError:
        pass
    os.close(w)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        import _signal
        if os.WTERMSIG(st) != _signal.SIGKILL:  # SIGKILL has no handler to reset
            _signal.signal(os.WTERMSIG(st), _signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(st))
    os._exit(os.waitstatus_to_exitcode(st))

def _typescript(os, source, go):
    # TypeScript becomes JavaScript here, in the sandbox (it is the caller's input),
    # after PID 1's go, as a program starts (the go byte stays for _interpreter): the
    # image's esbuild removes the types (no type checking, as Node's own stripping),
    # keeps import, export and top-level await, lowers what the image's node 20 lacks
    # (decorators, using), and appends an inline source map, with which node's stack
    # traces name the TypeScript lines. esbuild is this process's child: the filter,
    # limits and user are the program's, and so is its kill. Its errors (line and
    # column) are the program's stderr, and the program exits 1.
    import select, _signal
    select.select([go], [], [])
    ts, js = os.memfd_create("ts", os.MFD_CLOEXEC), os.memfd_create("js", os.MFD_CLOEXEC)
    data = source.encode("utf-8", "surrogateescape")
    while data:
        data = data[os.write(ts, data):]
    os.lseek(ts, 0, 0)
    argv = ESBUILD + ["--sourcefile=/exec.ts"]
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, ts, 0), (os.POSIX_SPAWN_DUP2, js, 1)],
            setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
    except OSError as e:
        raise SystemExit("mcp-exec: cannot start esbuild: %s" % e.strerror)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        os.kill(os.getpid(), 9)  # as killed (the memory limit's SIGKILL)
    if st:
        os._exit(1)
    os.lseek(js, 0, 0)
    chunks = []
    while chunk := os.read(js, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "surrogateescape")

def _prepare(sys):
    # What a program's start needs that does not depend on its code, done before the
    # code can come (one-shot programs and session cells alike). The first compile() of
    # a process builds the interpreter's AST types (compile checks whether its argument
    # is an AST): ~1.5 ms, here rather than on the call's path. The bootstrap's own
    # frames are hidden from the program's tracebacks.
    compile("", "<exec>", "exec", dont_inherit=True)
    def hook(t, v, tb, _orig=sys.excepthook):
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next
        if v is not None:
            v.__traceback__ = tb
        _orig(t, v, tb)
    sys.excepthook = hook
    sys.argv = ["<exec>"]
    sys.stdout.reconfigure(line_buffering=True)

def _main(boot, finish):
    import sys
    try:
        code = boot()
        exec(code, sys.modules["__main__"].__dict__)
    except BaseException as e:
        finish(e)
    finish(None)

def _status(exc):
    # The exit status of a program that ended with exc (None: it ran to its end), as
    # the interpreter's own exit gives it: SystemExit's code (a code that is not an int
    # is written to stderr: status 1); any other exception is reported by sys.excepthook
    # (status 1). Session cells use it too.
    import sys
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        try:
            sys.stderr.write(str(code) + "\n")
        except BaseException:
            pass
        return 1
    if exc is not None:
        try:
            sys.excepthook(type(exc), exc, exc.__traceback__)
        except BaseException:
            pass
        return 1
    return 0

def _finish(exc, _status=_status):
    # The end of the program, as the interpreter's own exit would do it, minus the
    # teardown of every loaded module (over half a second with pandas loaded): report
    # an uncaught exception, wait for non-daemon threads, run atexit handlers, release
    # the program's globals (closing the files it left open), flush, and exit.
    import gc, os, _signal, sys
    status, sigint = _status(exc), isinstance(exc, KeyboardInterrupt)
    exc = None
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    import atexit
    atexit._run_exitfuncs()
    main = sys.modules["__main__"].__dict__
    for k in [k for k in main if not (k.startswith("__") and k.endswith("__"))]:
        try:
            del main[k]
        except BaseException:
            pass
    gc.collect()
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None and not f.closed:
                f.flush()
        except BaseException:
            status = 120  # what the interpreter's own exit gives when the flush fails
    # Nothing more is written: the ends of the output pipes go now, so that the
    # bootstrap sees their end of file before the kernel has torn this process's
    # memory down (see exit_watch).
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    if sigint:
        # An uncaught KeyboardInterrupt ends the interpreter with SIGINT itself.
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGINT)
    os._exit(status)

def _seed(os):
    # Copy the image's prebuilt matplotlib font cache into the private config
    # directory, so that the first import of matplotlib does not rebuild it.
    src, dst = "/usr/local/share/mcp-exec/matplotlib", os.environ.get("MPLCONFIGDIR")
    try:
        names = os.listdir(src)
    except OSError:
        return
    if dst:
        os.makedirs(dst, exist_ok=True)
        for n in names:
            try:
                with open(os.path.join(src, n), "rb") as f, open(os.path.join(dst, n), "xb") as g:
                    g.write(f.read())
            except OSError:
                pass

def _mcptools_js(blob, call_fd, reply_fd):
    # JavaScript's mcptools (mcptools.mjs) as node loads it, from a tools blob: its
    # descriptors and catalog, then the module.
    n = int.from_bytes(blob[:4], "big")
    return b"const _callFd = %d, _replyFd = %d, _catalog = %s;\n%s" % (call_fd, reply_fd, blob[4 + n:], blob[4:4 + n])

def _mcptools_named(source, fd):
    # A JavaScript program's "mcptools" named as the memory file fd holds it: its
    # import ... from, import(...) and require(...) (Node 20's require of an ES module);
    # node keeps the /dev/fd name with --preserve-symlinks (a memory file's target is no
    # path), and so one module serves them all (Node 20 has no import maps, and a
    # resolve hook's thread costs ~0.2 s).
    import re
    source = re.sub(r"""(\b(?:from|import)\s*\(?\s*)(["'])mcptools\2""", r"\1\2file:///dev/fd/%d\2" % fd, source)
    return re.sub(r"""(\brequire\s*\(\s*)(["'])mcptools\2""", r"\1\2/dev/fd/%d\2" % fd, source)

def _tools(os, sys, blob, stdin, calls, argv, source, ahead=None, js=_mcptools_js, named=_mcptools_named):
    # Code mode (launcher/bridge.go): the program's stdin is the n bytes that came with
    # the code, in a memory file at descriptor 0; the rest of the container's stdin
    # carries only the server's replies, on a descriptor of mcptools' own, so that
    # neither can be taken for the other. Calls go to the parent on their own pipe,
    # which it relays as C frames: the program's output can never become a call.
    # Returns the program's source. ahead: the descriptors of a node started ahead
    # (_ahead: code, stdin, mcptools, reply), which it takes over when the gate opens.
    reply = os.dup(0) if ahead is None else ahead[3]
    fd = os.memfd_create("stdin", os.MFD_CLOEXEC) if ahead is None else os.dup(ahead[1])
    while stdin:
        stdin = stdin[os.write(fd, stdin):]
    os.lseek(fd, 0, 0)
    os.dup2(fd, 0)
    os.close(fd)
    n = int.from_bytes(blob[:4], "big")
    if argv is not None:
        # JavaScript: the module in a memory file node imports, named by the program's
        # imports and requires of "mcptools" (_mcptools_named).
        if argv[0] != "node":
            raise SystemExit("mcp-exec: tools are for Python and JavaScript programs")
        argv.insert(1, "--preserve-symlinks")
        mod = os.memfd_create("mcptools", 0) if ahead is None else ahead[2]
        data = js(blob, calls, reply)
        while data:
            data = data[os.write(mod, data):]
        for f in (calls, reply):
            os.set_inheritable(f, True)
        return named(source, mod)
    mod = type(sys)("mcptools")
    mod.__dict__.update(_catalog=blob[4 + n:], _call_fd=calls, _reply_fd=reply)
    sys.modules["mcptools"] = mod
    try:
        exec(compile(blob[4:4 + n].decode(), "<mcptools>", "exec"), mod.__dict__)
    except BaseException:
        del sys.modules["mcptools"]
        raise
    return source

def _files(os, blob):
    # The caller's files: u32 name length, name, u32 size, bytes; repeated. Names were
    # validated by the server; they are checked again here, and never follow a link.
    i = 0
    while i < len(blob):
        n = int.from_bytes(blob[i:i + 4], "big"); i += 4
        name = blob[i:i + n].decode("utf-8"); i += n
        size = int.from_bytes(blob[i:i + 4], "big"); i += 4
        data = blob[i:i + size]; i += size
        parts = name.split("/")
        if name.startswith("/") or "\0" in name or any(p in ("", ".", "..") for p in parts):
            raise SystemExit("mcp-exec: refused file name %r" % name)
        d = "."
        for p in parts[:-1]:
            d = d + "/" + p
            try:
                os.mkdir(d)
            except FileExistsError:
                pass
            if os.path.islink(d) or not os.path.isdir(d):
                raise SystemExit("mcp-exec: refused file name %r" % name)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as e:
            raise SystemExit("mcp-exec: could not write input file %r: %s" % (name, e.strerror))

def _plots(sys, outdir):
    # Figures come back as images, as a notebook shows them: plt.show() saves and
    # closes every open figure, and so does the end of the program.
    # The same hook gives linecache the program's source (the dict returned, which the
    # caller fills) when linecache is first imported, by the program or by the printing
    # of a traceback. Python 3.13 loads linecache at start; older ones do not, and there
    # importing it for every program costs what their fresh interpreter does not load
    # (tokenize, re, functools, collections, enum): ~3 ms of every call on this
    # machine's 3.11, which the process backend uses.
    # No importlib.abc (it imports typing, inspect, pathlib and more: 60 ms of every
    # sandbox's start) nor importlib.machinery: the import system needs only these
    # methods, and its own path finder is on sys.meta_path already.
    import atexit
    finder = [f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"][0]
    count = [0]
    def save(plt):
        import os
        for num in plt.get_fignums():
            count[0] += 1
            try:
                os.makedirs(outdir, exist_ok=True)
                plt.figure(num).savefig("%s/figure-%d.png" % (outdir, count[0]), format="png")
            except Exception as e:
                print("mcp-exec: could not save figure %d: %s" % (num, e), file=sys.stderr)
        plt.close("all")
    lines = {}
    def pyplot(module, real):
        import warnings
        warnings.filterwarnings("ignore", message=".*non-interactive, and thus cannot be shown")
        real.exec_module(module)
        module.show = lambda *a, **k: save(module)
        atexit.register(lambda: save(module))
    def linecache(module, real):
        module.__loader__ = module.__spec__.loader = real  # as if unhooked
        real.exec_module(module)
        module.cache.update(lines)
    hooked = {"matplotlib.pyplot": pyplot, "linecache": linecache}
    class Loader:
        def __init__(self, real, run):
            self.real, self.run = real, run
        def create_module(self, spec):
            return self.real.create_module(spec)
        def exec_module(self, module):
            self.run(module, self.real)
    class Hook:
        def find_spec(self, name, path, target=None):
            run = hooked.get(name)
            if run is None:
                return None
            spec = finder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = Loader(spec.loader, run)
            return spec
    sys.meta_path.insert(0, Hook())
    return lines

globals().pop("_status")
globals().pop("_main")(globals().pop("_boot"), globals().pop("_finish"))
'''.replace("ONE_SHOT_HEADERS", repr(((3, HEADER_EXEC), (5, HEADER_TOOLS)))).replace("LANGUAGES", repr(LANGUAGES)) \
    .replace("NODE_SNAPSHOT", repr(NODE_SNAPSHOT)).replace("ESBUILD", repr(ESBUILD))


# exit_watch: a one-shot child's exit status, read from the kernel before the child is
# gone. Linux sets PF_EXITING, then the exit code, then drops the process's memory
# (mm = NULL, its vsize 0 in /proc/PID/stat), and only after tearing that memory down
# (1.2-4 ms for a forked interpreter, measured) closes its files and tells the parent.
# Once /proc/PID/stat shows PF_EXITING, no memory and one thread, its exit_code is the
# one waitpid will return: a process cannot set PF_EXITING without exiting, and the
# other threads, which could still end the group with a different code, are counted until
# they are gone. The kernel shows exit_code only to a reader allowed to ptrace-read the
# process (else 0): exit_watch checks that while the child lives and is ours (its
# start_code reads 1 to a reader that is not), and that the kernel reports the flag at
# all (gVisor's /proc shows flags, start_code and exit_code as 0: no watch there).
# One case reads differently: a main thread that ended alone (pthread_exit, which
# Python never does) while a later thread ends the group shows its own code, not the
# group's; only a program that does that to itself is affected, and its exit code is
# its own to choose anyway.
PF_EXITING = 0x4
HOLD = 0.002  # seconds an output frame may wait for the next (see parent)

def stat_fields(pid):
    # /proc/PID/stat after the command's closing parenthesis: [0] is field 3 (state).
    with open("/proc/%d/stat" % pid, "rb") as f:
        data = f.read()
    return data[data.rindex(b")") + 2:].split()

def exit_watch(pid):
    try:
        f = stat_fields(pid)
        if int(f[23]) <= 1:  # start_code (field 26)
            return None
    except (OSError, ValueError, IndexError):
        return None

    def exited_early():
        try:
            f = stat_fields(pid)
            # flags (field 9), num_threads (20), vsize (23), exit_code (52)
            if int(f[6]) & PF_EXITING and int(f[17]) == 1 and int(f[20]) == 0:
                return os.waitstatus_to_exitcode(int(f[49]))
        except (OSError, ValueError, IndexError):
            pass
        return None
    return exited_early


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
    return None  # gVisor: no counter (its kernel OOM-kills; see the exit frame)


def writable_mounts(wiped=("/tmp", "/dev/shm", "/dev/mqueue"), limit=10000):
    """The read-write mounts the sandbox's user can write to that no wipe covers, each
    "point (fstype): why". A sandbox's private tmpfs mounts (wiped) go with it; a mount
    of the host's (a volume, a bind, Kubernetes' /dev/termination-log: a 0666 file on
    the node's disk that the kubelet copies into the pod's status) would keep what one
    run writes for the next, or on the host's disk. Kernel filesystems and what is below
    /proc and /sys hold no file a program can write; a directory is walked (on its own
    mount only, at most limit entries) for a writable directory or regular file. Kept
    in step with the probe no_writable_file_outside_wipe (launcher/probe/py) and
    launcher/process's start-up check."""
    kernel = ("proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "securityfs", "debugfs", "tracefs", "bpf", "nsfs")

    def unescape(b):  # mountinfo writes space, tab, newline and backslash as \ooo
        out, i = bytearray(), 0
        while i < len(b):
            if b[i] == 92 and b[i + 1:i + 4].isdigit():
                out.append(int(b[i + 1:i + 4], 8) & 0xFF)
                i += 4
            else:
                out.append(b[i])
                i += 1
        return os.fsdecode(bytes(out))

    mounts = []
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            left, _, right = line.partition(b" - ")
            left, right = left.split(), right.split()
            if len(left) < 6 or len(right) < 3:
                continue
            ro = b"ro" in left[5].split(b",") or b"ro" in right[2].split(b",")
            mounts.append((unescape(left[4]), right[0].decode("latin-1"), ro))
    points = {m[0] for m in mounts}

    def under(p, roots):
        return any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots)

    def writable(path):
        try:
            return os.access(path, os.W_OK, follow_symlinks=False)
        except (OSError, NotImplementedError):
            return os.access(path, os.W_OK)

    out = []
    for point, fstype, ro in mounts:
        if ro or fstype in kernel or under(point, ("/proc", "/sys") + tuple(wiped)):
            continue
        if not os.path.isdir(point):
            # Only a regular file keeps what is written to it: rootless Podman binds the
            # host's /dev/null, /dev/zero, /dev/tty and friends (device nodes) one by one.
            if os.path.isfile(point) and writable(point):
                out.append("%s (%s): a writable file" % (point, fstype))
            continue
        stack, seen, found = [point], 0, None
        while stack and found is None:
            d = stack.pop()
            if writable(d):
                found = "the directory %s is writable" % d
                break
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue
            for e in entries:
                seen += 1
                if seen > limit:
                    found = "read-write, with more than %d entries to check" % limit
                    break
                if e.path in points:
                    continue  # a mount of its own: checked on its own
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False) and writable(e.path):
                        found = "the file %s is writable" % e.path
                        break
                except OSError:
                    pass
        if found is not None:
            out.append("%s (%s): %s" % (point, fstype, found))
    return out


def check_mounts():
    # Before the program can write anything: no writable mount outside the wipe. In a
    # sandbox container (Docker, Podman, Kubernetes, gVisor) the bootstrap is PID 1; the
    # process backend, where it is not, checks the same at the server's start, more
    # strictly (launcher/process/mounts.go), and a bootstrap the tests run on the host
    # is no sandbox.
    if os.getpid() != 1:
        return
    wiped = ("/tmp", "/dev/shm", "/dev/mqueue")
    if os.environ.get("MCP_EXEC_EGRESS") == "tunnel":
        # A pod's /egress (its CA bundle, when its profile has inject rules) is a
        # memory-backed emptyDir of that pod alone, as its /tmp is: it goes with the pod.
        wiped += ("/egress",)
    try:
        found = writable_mounts(wiped)
    except OSError as e:
        fatal("reading /proc/self/mountinfo failed: %s" % e)
    if found:
        fatal("writable mounts outside the wipe (what a program writes there outlives its sandbox): %s; "
              "mount them read-only or remove them" % "; ".join(found))


# The seccomp filter (launcher/syscalls): io_uring, ptrace, process_vm_*, pidfd_getfd,
# namespaces, keyrings, bpf, userfaultfd, perf_event_open and the rest of its table
# denied, other ABIs killed. The runtime's own profile may allow some of them
# (containerd's RuntimeDefault allows io_uring) or be missing, so the bootstrap
# installs it on itself before the fork and before anything of the caller's is read:
# the child, the program and all they start inherit it, and none can remove it. The
# server builds the program (struct sock_filter, 8 bytes an instruction, in hex) and
# passes it as an argument; any failure is fatal, so a sandbox never runs without it.
def install_filter(arg):
    raw = None
    if arg.startswith("seccomp="):
        try:
            raw = bytes.fromhex(arg[8:])
        except ValueError:
            pass
    if not raw or len(raw) % 8 or len(raw) // 8 > 4096:
        fatal("bad seccomp filter argument")
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    U = ctypes.c_ulong

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(raw, len(raw))
    prog = SockFprog(len(raw) // 8, ctypes.addressof(buf))
    # One thread: PR_SET_SECCOMP applies to the calling thread, and the child forks
    # from it. PR_SET_NO_NEW_PRIVS first: an unprivileged process may not install a
    # filter without it (the container sets it already).
    if libc.prctl(38, U(1), U(0), U(0), U(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        fatal("prctl(PR_SET_NO_NEW_PRIVS) failed: errno %d" % ctypes.get_errno())
    if libc.prctl(22, U(2), ctypes.byref(prog), U(0), U(0)) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        fatal("installing the seccomp filter (prctl(PR_SET_SECCOMP)) failed: errno %d" % ctypes.get_errno())


def fatal(msg):
    # A failure before take_seal (the filter, the prologue, the arguments) takes the key
    # here, so that its message reaches the server, which unseals every byte it reads: no
    # program has run, and the key enters no process but this one, which ends next.
    if seal is None and gate_fd is not None:
        take_seal(gate_fd)
    write_all(1, frame(FRAME_FATAL, msg.encode()))
    os._exit(EXIT_FAILED)


def child(main, src, argv, out_w, err_w, close, what, null_stdin=False):
    # In the forked child: stdout and stderr become the pipes to PID 1, PID 1's ends and
    # names go, and src runs in a __main__ as clean as a new interpreter's (the same
    # dunder names: both are `python3 -c`). A one-shot child reads the container's stdin;
    # a session's holder reads /dev/null (null_stdin), as PID 1 reads the stream.
    _os, _sys, failed = os, sys, EXIT_FAILED  # locals: the names in main are about to go
    try:
        for fd in close:
            _os.close(fd)
        if null_stdin:
            null = _os.open("/dev/null", _os.O_RDONLY)
            _os.dup2(null, 0)
            _os.close(null)
        _os.dup2(out_w, 1)
        _os.dup2(err_w, 2)
        _os.close(out_w)
        _os.close(err_w)
        home = _os.environ.get("HOME", "/tmp")  # /tmp in a container, a run's own directory in a process
        _os.chdir(home if _os.path.isdir(home) else "/")
        _sys.argv = argv
        for k in [k for k in main if not (k.startswith("__") and k.endswith("__"))]:
            del main[k]
    except BaseException as e:
        _os.write(2, ("mcp-exec: %s setup failed: %r\n" % (what, e)).encode())
        _os._exit(failed)
    exec(src, main)
    _os._exit(failed)  # src ends the process itself


def prologue():
    # PID 1 before the fork, once its seccomp filter is in: no core dumps, soft and hard,
    # since the child inherits them (a host core_pattern that pipes to a collector would
    # write the program's memory to the host's disk; Docker's ulimit says the same, on
    # Kubernetes this is the only one), and no writable mount where none may be.
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (OSError, ValueError) as e:
        fatal("setrlimit(RLIMIT_CORE, 0) failed: %s" % e)
    check_mounts()


def take_seal(seal_fd):
    # The key, after the fork (see SEAL_LABEL), so that the child never holds it, and
    # before anything is written to fd 1.
    global seal
    if seal_fd is not None:
        seal = sealer(read_seal_key(seal_fd))


def shield(pid):
    # PID 1 after the fork. Signals the program sends to PID 1 are dropped by Linux (PID 1
    # of a PID namespace gets only those it handles), but not by gVisor, where SIGTERM or
    # SIGHUP ended the bootstrap: ignore every signal whose default would end it (the
    # child, pid, has forked already and keeps the defaults). Then non-dumpable.
    import _signal
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE",
                 "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGXCPU",
                 "SIGXFSZ", "SIGIO", "SIGPWR", "SIGSYS", "SIGTRAP", "SIGSTKFLT"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_IGN)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE 0
        os.kill(pid, 9)
        fatal("prctl(PR_SET_DUMPABLE) failed: errno %d" % ctypes.get_errno())


# Egress profiles: a sandbox with a profile has its channel's socket
# bind-mounted here (and only such a sandbox); the sandbox still has no network. The
# bootstrap relays 127.0.0.1:EGRESS_PORT to it so that HTTP_PROXY works for every
# library; which profile applies is decided by the server from the socket alone.
#
# On Kubernetes no socket is mounted: with MCP_EXEC_EGRESS=tunnel in the environment the
# relay also listens on 127.0.0.1:EGRESS_TUNNEL_PORT, where the server's port-forward
# streams (which only the server can open, to this pod alone) wait; each connection of
# the program takes one, the relay writes b"O" on it and relays over it.
EGRESS_SOCK = "/egress/proxy.sock"
EGRESS_PORT = 3128
EGRESS_TUNNEL_PORT = 3129


def egress_relay():
    tunnel = os.environ.get("MCP_EXEC_EGRESS") == "tunnel"
    if not tunnel and not os.path.exists(EGRESS_SOCK):
        return
    import socket
    import threading
    import select
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", EGRESS_PORT))
    lsock.listen(64)

    def unix():
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.connect(EGRESS_SOCK)
        return u
    upstream = unix
    if tunnel:
        import queue
        waiting = queue.Queue()
        tsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tsock.bind(("127.0.0.1", EGRESS_TUNNEL_PORT))
        tsock.listen(64)

        def take_tunnels():
            while True:
                try:
                    waiting.put(tsock.accept()[0])
                except Exception:
                    pass
        threading.Thread(target=take_tunnels, daemon=True).start()

        def upstream():
            while True:
                t = waiting.get(timeout=30)  # queue.Empty: no stream came
                # The server writes nothing before the b"O": a readable stream was closed.
                if select.select([t], [], [], 0)[0]:
                    t.close()
                    continue
                try:
                    # No Nagle: the b"O" and the program's first bytes are two small
                    # writes, and the second would wait for the first's delayed ACK
                    # (~40 ms on every connection).
                    t.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    t.sendall(b"O")
                except OSError:
                    t.close()
                    continue
                return t

    def pump(c):
        try:
            # The relay forwards what it reads at once, in writes as small as the
            # reads: Nagle would hold each after the first for an ACK.
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            u = upstream()
        except Exception:
            c.close()
            return
        ends = {c: u, u: c}
        try:
            while ends:
                for s in select.select(list(ends), [], [])[0]:
                    data = s.recv(65536)
                    if not data:
                        try:
                            ends[s].shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        del ends[s]
                        continue
                    ends[s].sendall(data)
        except OSError:
            pass
        finally:
            c.close()
            if tunnel and u in ends:
                drain(u)
            u.close()

    def drain(u):
        # The program's end failed first (it closed with a reply unread: a reset). Closing
        # a port-forward tunnel now would reset it too, with the proxy still writing, and
        # the runtime, which stops reading such a stream, can then stall the pod's other
        # streams (docs/kubernetes.md, "Egress profiles"). End it the way a finished
        # connection ends instead: our FIN, then what is in flight, then its FIN. (The
        # socket of the other backends has no such trouble: it is closed at once.)
        # At most 10 s, then the reset after all (a download that goes on).
        import time
        end = time.monotonic() + 10
        try:
            u.shutdown(socket.SHUT_WR)
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    break
                u.settimeout(left)
                if not u.recv(65536):
                    break
        except OSError:
            pass

    def accept():
        while True:
            try:
                c, _ = lsock.accept()
                threading.Thread(target=pump, args=(c,), daemon=True).start()
            except Exception:
                pass

    threading.Thread(target=accept, daemon=True).start()


def parent(max_output, preload, outdir, max_file, max_files, filter_arg, seal_fd, prestart=""):
    install_filter(filter_arg)
    prologue()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    call_r, call_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(sys.modules["__main__"].__dict__, CHILD, ["-c", str(ready_w), preload, outdir, str(go_r), str(call_w), prestart],
              out_w, err_w, (out_r, err_r, ready_r, go_w, call_r) + ((seal_fd,) if seal_fd is not None else ()), "child")
    for fd in (out_w, err_w, ready_w, go_r, call_w):
        os.close(fd)
    take_seal(seal_fd)
    # The container's stdin belongs to the child; the parent keeps a descriptor only to
    # read what the program left unread, after the result (see the end).
    rest = os.dup(0)
    os.close(0)
    shield(pid)
    egress_relay()  # before the go: the program finds the relay listening
    try:
        os.write(go_w, b"G")
    except BrokenPipeError:
        pass  # the child ended before it needed the go (a syntax error): the loop sees it
    os.close(go_w)
    import select
    import time
    ooms = oom_kills()

    kinds = {out_r: FRAME_STDOUT, err_r: FRAME_STDERR, call_r: FRAME_CALL}
    for fd in kinds:
        os.set_blocking(fd, False)
    try:
        exited = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exited = None

    def exit_status():
        p, st = os.waitpid(pid, os.WNOHANG)
        return os.waitstatus_to_exitcode(st) if p == pid else None

    # Output frames wait up to HOLD before they are written, so that a program's last
    # output leaves with its X frame in one write: one pass through the engine's
    # stream instead of two, the second of which found its processes idle again.
    # A frame waits no longer than HOLD while the program runs, and until the X frame
    # while its exit is looked for (at most the watch's 20 ms); 64 KiB held is written
    # at once. Tool calls (C) are not held, and go after what is.
    held, held_size, flush_at = [], 0, None

    def flush():
        nonlocal held_size, flush_at
        if held:
            write_all(1, b"".join(held))
            held.clear()
        held_size, flush_at = 0, None

    def out(data):
        nonlocal held_size, flush_at
        held.append(data)
        held_size += len(data)
        if held_size >= 65536:
            flush()
        elif flush_at is None:
            flush_at = time.monotonic() + HOLD
    output = Output(max_output, out)

    def relay(fd):
        if fd != call_r:
            return output.relay(fd, kinds[fd])
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not data:
            return False
        flush()  # tool calls: not output, bounded by the server
        write_all(1, frame(FRAME_CALL, data))
        return True

    open_fds = [out_r, err_r, ready_r, call_r]
    status, early, watch_until = None, None, None
    while status is None:
        watch = open_fds + ([exited] if exited is not None else [])
        wait = None if exited is not None else 0.05
        if watch_until is not None:
            # The program's end closed its output (_finish): look for its exit in
            # /proc for a while, 0.1 ms apart, then leave it to waitpid.
            left = watch_until - time.monotonic()
            if left <= 0:
                watch_until = None
            else:
                wait = min(left, 0.0001)
        if flush_at is not None and watch_until is None:
            left = flush_at - time.monotonic()
            if left <= 0:
                flush()
            else:
                wait = left if wait is None else min(wait, left)
        readable, _, _ = select.select(watch, [], [], wait)
        for fd in readable:
            if fd == ready_r:
                if os.read(ready_r, 1):
                    write_all(1, frame(FRAME_READY))
                    early = exit_watch(pid)  # the child is ready and still ours
                os.close(ready_r)
                open_fds.remove(ready_r)
            elif fd != exited and not relay(fd):
                open_fds.remove(fd)
                if early is not None and out_r not in open_fds and err_r not in open_fds:
                    watch_until = time.monotonic() + 0.02
        status = exit_status()
        if status is None and watch_until is not None:
            status = early()
    # What the program wrote before it ended is in the pipes now. A process it left
    # behind may hold them open, so drain without waiting for end of file.
    # The drain is bounded in time: a leftover process may keep writing.
    deadline = time.monotonic() + 0.2
    for fd in (out_r, err_r):
        while fd in open_fds and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0)
            if not r or not relay(fd):
                break
    send_files(outdir, max_file, max_files, out)
    out(frame(FRAME_EXIT, exit_payload(status, ooms, output.dropped)))
    flush()
    # Read what the program left of its stdin (bounded): Podman's attach resets the
    # stream, dropping output not yet relayed, when the container ends with stdin
    # data still unread in its pipe.
    deadline = time.monotonic() + 2
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([rest], [], [], left)[0]:
            break
        if not os.read(rest, 65536):
            break
    # Returning ends PID 1, and with it every process the program left behind.
    os._exit(EXIT_OK)


def send_files(outdir, max_file, max_total, out, max_count=64):
    # Every regular file the program left under outdir, as D frames given to out: u32
    # length of a JSON header {"name", "size", "skipped"}, the header, then the bytes
    # unless skipped.
    # Links are never followed; files past a cap are listed with the reason.
    found = []

    def walk(d, prefix):
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            rel = prefix + e.name
            if e.is_dir(follow_symlinks=False):
                walk(e.path, rel + "/")
            elif e.is_file(follow_symlinks=False):
                found.append((rel, e.path))

    walk(outdir, "")
    if not found:
        return
    import json
    import stat
    total = 0
    for i, (rel, path) in enumerate(found):
        data, skipped, size = b"", "", 0
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                size = st.st_size
                if not stat.S_ISREG(st.st_mode):
                    skipped = "not a regular file"
                elif i >= max_count:
                    skipped = "more than %d files" % max_count
                elif size > max_file:
                    skipped = "over the per-file cap of %d bytes" % max_file
                elif total + size > max_total:
                    skipped = "over the total cap of %d bytes for all files" % max_total
                else:
                    chunks = []
                    while True:
                        b = os.read(fd, 1 << 20)
                        if not b or sum(map(len, chunks)) > max_file:
                            break
                        chunks.append(b)
                    data = b"".join(chunks)[:max_file + 1]
                    size = len(data)
                    if size > max_file:
                        data, skipped = b"", "over the per-file cap of %d bytes" % max_file
                    elif total + size > max_total:
                        data, skipped = b"", "over the total cap of %d bytes for all files" % max_total
                    else:
                        total += size
            finally:
                os.close(fd)
        except OSError as e:
            skipped = "unreadable: %s" % e.strerror
        if len(rel.encode("utf-8", "surrogateescape")) > 1024:
            rel, data, skipped = rel[:200] + "...", b"", "name longer than 1024 bytes"
        head = json.dumps({"name": rel, "size": size, "skipped": skipped}).encode()
        out(frame(FRAME_FILE, len(head).to_bytes(4, "big") + head + data))


# ---- Sessions (launcher/session.go) -------------------------------------------------
#
#   python3 -I -c <this file> session MAX_OUTPUT PRELOAD OUTDIR MAX_FILE MAX_FILES
#
# PID 1 forks a holder: an interpreter whose __main__ keeps the session's variables and
# imports. PID 1 reads the server's stream itself: HEADER_CELL "<n> <m> <s>", n bytes of
# code, m bytes of input files, s bytes of stdin (one cell), or HEADER_KILL (kill the
# running cell), or, between cells and only when sealing, HEADER_RESEAL "<64 hex>": a new
# seal key whose keystream starts at 0 (a shared session on Kubernetes, attached anew
# for each call by whichever replica serves it). It writes a cell to the holder's pipe, where the cell (a copy of the
# holder, forked ahead of its call) reads it and runs the code in the same __main__.
# When the code ends, by itself or with an exception, the cell says so ("K") and
# becomes the new holder: PID 1 ends the old one (state "kept"). When the server asks for a kill (timeout, cancel),
# PID 1 kills every process of the container but itself and the holder, which reports
# its cell's death ("L"): the session is as it was before the call ("rolled_back"). If
# the holder is gone as well, PID 1 sends the X frame with "lost" and ends the
# container; the server starts the session again, empty. Files are not rolled back:
# what a cell wrote under /tmp stays. PID 1 frames the output of a cell as in one-shot
# mode (the cap counts per cell), sends and then removes the files under OUTDIR, and
# ends each cell with an X frame that adds "state". Output written between cells (a
# thread a cell left) is dropped. A session with an egress profile has its channel at
# EGRESS_SOCK; PID 1 runs the relay (egress_relay) for every cell.
#
# A bash call is a cell too ("BASH n m s" on the holder's pipe): the cell runs bash and
# keeps the state it saves (the holder's bash()), so it rolls back as Python's does. A
# JavaScript call goes to the session's node process instead (NODE_RUNNER), which PID 1
# starts on the first one; its kill spares the holder and the holder's waiting cell, and
# loses node: the X frame says "lost" with "scope": "javascript", and the session goes
# on. A Python or bash call's kill spares node.
#
# A kept call (HEADER_KEPT: a background run on Kubernetes, whose replicas attach and
# detach at will) is a cell whose frames PID 1 keeps in its memory instead of writing
# them, and which PID 1 kills itself at its timeout (its X frame adds "timed_out" and
# "duration_ms"). Each HEADER_FETCH is answered on the stream: while the call runs, the
# tails of its output and a P frame; once it has ended, its kept frames, as often as
# asked. It is the pod's only call: at its end every other process goes, and PID 1 only
# answers fetches.
HOLDER = r"""
def _holder(seed, plots, files, status_of, prepare, execp):
    import os, sys, _signal
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    cmd, ev, outdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4]
    seed(os)
    plots(sys, outdir)
    for name in filter(None, sys.argv[3].split(",")):
        try:
            __import__(name)
        except BaseException:
            pass
    prepare(sys)
    import linecache, gc
    gc.freeze()

    def read_exact(n):
        chunks, got = [], 0
        while got < n:
            b = os.read(cmd, min(n - got, 1 << 20))
            if not b:
                os._exit(0)
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    def replace(blob):
        # Input files replace those of earlier calls (never through a link).
        i = 0
        while i < len(blob):
            n = int.from_bytes(blob[i:i + 4], "big"); i += 4
            name = blob[i:i + n].decode("utf-8"); i += n
            size = int.from_bytes(blob[i:i + 4], "big"); i += 4 + size
            try:
                if not os.path.isdir(name) or os.path.islink(name):
                    os.unlink(name)
            except OSError:
                pass
        files(os, blob)

    def read_call():
        # "CELL n m s", or "CELL n m s t DIR" with tools: t bytes of tools after the
        # files, and DIR holds the call's own two FIFOs (bind); "BASH n m s" for bash.
        header = b""
        while not header.endswith(b"\n"):
            b = os.read(cmd, 1)
            if not b or len(header) > 200:
                os._exit(0)
            header += b
        parts = header.split()[1:]
        n, m, s = (int(x) for x in parts[:3])
        source = read_exact(n).decode("utf-8", "surrogateescape")
        blob = read_exact(m)
        tools = (read_exact(int(parts[3])), parts[4].decode()) if len(parts) == 5 else None
        return source, blob, read_exact(s), tools, header.startswith(b"BASH")

    shell = [b""]  # bash's state: what the last bash call that ended by itself saved
    # Restores it, and saves on exit what a fresh shell's own variables and readonly
    # ones are not (shell options, traps, aliases are not kept).
    restore = (b"unset BASH_ENV\n__mcp_save() { local __mcp_s=$? __mcp_n; set +eux; unset IFS; {"
               b" for __mcp_n in $(compgen -v); do case $__mcp_n in __mcp_*|BASH*|SHELLOPTS|SECONDS|EPOCHSECONDS|"
               b"EPOCHREALTIME|RANDOM|SRANDOM|LINENO|FUNCNAME|GROUPS|DIRSTACK|PIPESTATUS|HISTCMD|_|PWD|OLDPWD|SHLVL|"
               b"COMP_*|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE|OPTIND|OPTERR|OPTARG|IFS|PS1|PS2|PS4) ;;"
               b" *) [[ ${!__mcp_n@a} == *r* ]] || declare -p $__mcp_n;; esac; done;"
               b" for __mcp_n in $(compgen -A function); do [[ $__mcp_n == __mcp_* ]] || declare -f $__mcp_n; done;"
               b" printf 'cd -- %q 2>/dev/null\\n' \"$PWD\"; } >&FD 2>/dev/null; exit $__mcp_s; }\n"
               b"trap __mcp_save EXIT\nset +e\n")

    def bash(source):
        # A fresh shell restores the state (BASH_ENV), runs the code and, from its EXIT
        # trap, writes its state to a memory file this cell keeps; a killed call saves
        # nothing and this cell dies with it, so the holder keeps the state before it.
        fds = [os.memfd_create(n) for n in ("exec", "state", "saved")]
        for fd, data in zip(fds, (source.encode("utf-8", "surrogateescape"),
                                  restore.replace(b"FD", b"%d" % fds[2]) + shell[0] + b"\nset -e\n")):
            while data:
                data = data[os.write(fd, data):]
            os.lseek(fd, 0, 0)
        for fd in fds:
            os.set_inheritable(fd, True)
        pid = os.fork()
        if pid == 0:
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)  # execp resets the ignored ones
            os.environ["BASH_ENV"] = "/dev/fd/%d" % fds[1]
            try:
                execp(os, [a.replace("CODE", "/dev/fd/%d" % fds[0]) for a in LANGUAGES[b"bash"]])
            finally:
                os._exit(127)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.lseek(fds[2], 0, 0)
        saved = b"".join(iter(lambda: os.read(fds[2], 1 << 20), b""))
        if saved:
            shell[0] = saved
        for fd in fds:
            os.close(fd)
        return status

    def bind(tools, fifos):
        # This call's FIFOs to PID 1 (c: calls, r: replies), which it closes when the
        # call ends: a thread or a process an earlier call left holds only that call's,
        # dead ones (mcptools raises ToolUnavailable there), so no call reaches a later
        # call's budget or approvals; one that opens these while the call runs is counted
        # in it. The module is kept across calls, rebound to the new FIFOs, so that names
        # a program bound to it earlier still work.
        fds = (os.open(fifos + "/c", os.O_WRONLY | os.O_CLOEXEC), os.open(fifos + "/r", os.O_RDONLY | os.O_CLOEXEC))
        n = int.from_bytes(tools[:4], "big")
        mod = sys.modules.get("mcptools")
        if mod is not None and callable(getattr(mod, "_rebind", None)):
            mod._rebind(tools[4 + n:], fds[0], fds[1])
            return
        mod = type(sys)("mcptools")
        mod.__dict__.update(_catalog=tools[4 + n:], _call_fd=fds[0], _reply_fd=fds[1])
        sys.modules["mcptools"] = mod
        try:
            exec(compile(tools[4:4 + n].decode(), "<mcptools>", "exec"), mod.__dict__)
        except BaseException:
            del sys.modules["mcptools"]
            raise

    main = sys.modules["__main__"].__dict__
    os.write(ev, b"R %d\n" % os.getpid())
    count, call = 0, None
    while True:
        # The next cell is forked ahead of its call, so that the fork and the cell's
        # set-up are not on the call's path (the copy is the holder as it is between
        # calls). After a cell has died, the holder reads the next call itself and
        # forks when it has come: a kill of the dead cell's processes that is still
        # under way never meets a new cell.
        pid = os.fork()
        if pid:
            # The holder: it stays if the cell dies before it has ended (PID 1 ends
            # this process when the cell has).
            call = None
            _, st = os.waitpid(pid, 0)
            os.write(ev, b"L %d %d\n" % (pid, os.waitstatus_to_exitcode(st)))
            call = read_call()
            continue
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # the kernel's OOM kill takes the cell, not the holder
        except OSError:
            pass
        source, blob, stdin, tools, sh = call or read_call()
        call = None
        count += 1
        status = 0
        try:
            fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
            while stdin:
                stdin = stdin[os.write(fd, stdin):]
            os.lseek(fd, 0, 0)
            os.dup2(fd, 0)
            os.close(fd)
            sys.stdin = open(0, "r", closefd=False)
            replace(blob)
            blob = None
            if tools:
                bind(*tools)
            tools = None
            os.makedirs(outdir, exist_ok=True)
            if sh:
                status = bash(source)
            else:
                name = "<exec-%d>" % count
                linecache.cache[name] = (len(source), None, source.splitlines(True), name)
                code = compile(source, name, "exec", dont_inherit=True)
                source = None
                exec(code, main)
        except BaseException as e:
            status = status_of(e)
        e = code = None
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        os.write(ev, b"K %d %d\n" % (os.getpid(), status))
        # This process is the holder now.
"""


# The first holder's source: CHILD's functions, with HOLDER in place of its one-shot end.
HOLDER_SRC = CHILD[:CHILD.rindex("globals().pop(\"_status\")")] + HOLDER.replace("LANGUAGES", repr(LANGUAGES)) + \
    '[globals().pop(k) for k in ("_boot", "_main", "_finish", "_tools", "_ahead", "_handoff", "_mcptools_js", "_mcptools_named", "_typescript")]\n' + \
    'globals().pop("_holder")(globals().pop("_seed"), globals().pop("_plots"), globals().pop("_files"),\n' + \
    '                         globals().pop("_status"), globals().pop("_prepare"), globals().pop("_execp"))\n'


# A session's JavaScript: one node process, started by the session's first JavaScript
# call, runs each call as a script in its global scope (top-level const, let and class
# made var; static imports made dynamic; top-level await rewritten as Node's REPL does),
# reading calls on fd 3 ("<n>\n" and the code; with tools "<n> <t> <FIFO dir>\n", the
# code and t bytes of catalog; a TypeScript call's line ends with " typescript") and answering "K <status>" on fd 4 once the call and all
# it left pending (timers, sockets, children) have ended, as a program's end would be.
# Between calls it blocks in its read: nothing of an earlier call runs. Its stdin is a
# memory file PID 1 refills for each call; fd 6 is mcptools.mjs (NODE_MCPTOOLS), which
# node loads at its first call with tools and rebinds to each such call's FIFOs.
NODE_RUNNER = br"""const fs = require("fs"), vm = require("vm"), { processTopLevelAwait } = require("internal/repl/await");
const acorn = require("internal/deps/acorn/acorn/dist/acorn");
const proc = process, wait = setTimeout, MOD = "file:///dev/fd/6"; // a program's top-level var may replace the globals
const cmd = fs.openSync("/proc/self/fd/3", "r"), ev = fs.openSync("/proc/self/fd/4", "w");
for (const fd of [3, 4, 5]) fs.closeSync(fd);
try { fs.writeFileSync("/proc/self/oom_score_adj", "1000"); } catch {}
proc.chdir(proc.env.HOME || "/tmp");
globalThis.require = require("module").createRequire(proc.cwd() + "/");
let failed = 0, mcptools = null;
const fail = (e) => { failed = 1; proc.stderr.write((e && e.stack ? String(e.stack).split(/\n\s+at Script\.runInThisContext/)[0] : "Uncaught " + String(e)) + "\n"); };
proc.on("uncaughtException", fail);
function read(n) {
  const b = Buffer.alloc(n);
  for (let got = 0, k; got < n; got += k) if (!(k = fs.readSync(cmd, b, got, n - got, null))) proc.exit(0);
  return b;
}
// Top-level const, let and class become var (padded: columns stay), so that a later
// call may declare a name again, as a notebook's cell run twice does.
function hoist(src) {
  let ast, out = "", at = 0;
  try { ast = acorn.parse(src, { ecmaVersion: "latest", allowAwaitOutsideFunction: true, allowHashBang: true, allowImportExportEverywhere: true }); } catch { return src; }
  for (const n of ast.body) {
    if (n.type === "ImportDeclaration" && !(n.attributes || []).length) {
      out += src.slice(at, n.start) + load(n); at = n.end;
    } else if (n.type === "VariableDeclaration" && n.kind !== "var") {
      out += src.slice(at, n.start) + "var" + " ".repeat(n.kind.length - 3); at = n.start + n.kind.length;
    } else if (n.type === "ClassDeclaration") {
      out += src.slice(at, n.start) + "var " + n.id.name + " = " + src.slice(n.start, n.end) + ";"; at = n.end;
    }
  }
  return out + src.slice(at);
}
// A static import becomes a dynamic one (a call is a script, not a module): the same
// bindings, as var, and the same error for a name the module does not export.
function load(n) {
  const spec = JSON.stringify(n.source.value), parts = [], names = [];
  let ns = null;
  for (const s of n.specifiers) {
    if (s.type === "ImportNamespaceSpecifier") { ns = s.local.name; continue; }
    names.push(s.type === "ImportDefaultSpecifier" ? "default" : s.imported.name ?? s.imported.value);
    parts.push(JSON.stringify(names.at(-1)) + ": " + s.local.name);
  }
  const shown = JSON.stringify(n.source.value === MOD ? "mcptools" : n.source.value).slice(1, -1);
  const check = `((m) => { for (const k of ${JSON.stringify(names)}) if (!(k in m)) throw new SyntaxError("The requested module '${shown}' does not provide an export named '" + k + "'"); return m; })`;
  if (ns !== null) return `var ${ns} = await import(${spec})` + (parts.length ? `, {${parts.join(", ")}} = ${check}(${ns});` : ";");
  return parts.length ? `var {${parts.join(", ")}} = ${check}(await import(${spec}));` : `await import(${spec});`;
}
// A TypeScript call ("<n> typescript"): esbuild strips its types as for a one-shot
// program (boot.py's _typescript), here as node's child; its source map is registered
// for the script's name, so that stack traces name the TypeScript lines. null: esbuild
// refused it (its errors are on stderr).
function typescript(src, count) {
  const [bin, ...args] = ESBUILD;
  const r = require("child_process").spawnSync(bin, [...args, "--sourcefile=/exec-" + count + ".ts"], { input: src, stdio: ["pipe", "pipe", "inherit"], maxBuffer: Infinity });
  if (r.error) proc.stderr.write("mcp-exec: cannot start esbuild: " + r.error.message + "\n");
  if (r.status !== 0) return null;
  proc.setSourceMapsEnabled(true);
  require("internal/source_map/source_map_cache").maybeCacheSourceMap("/exec-" + count + ".js", String(r.stdout), null, true);
  return String(r.stdout);
}
const busy = () => proc.getActiveResourcesInfo().some((r) => r !== "TTYWrap" && r !== "PipeWrap");
(async () => {
  for (let count = 1; ; count++) {
    let head = "", tools = null;
    while (!head.endsWith("\n")) head += read(1).toString();
    const parts = head.trim().split(" "), ts = parts.at(-1) === "typescript";
    if (ts) parts.pop();
    const [n, t, dir] = parts;
    const text = read(+n).toString(), catalog = t === undefined ? null : read(+t).toString();
    const stripped = ts ? typescript(text, count) : text, src = hoist(stripped ?? "");
    Object.defineProperty(proc, "stdin", { configurable: true, get() {
      const s = fs.createReadStream(null, { fd: 0, autoClose: false });
      Object.defineProperty(proc, "stdin", { configurable: true, value: s });
      return s;
    } });
    failed = stripped === null ? 1 : 0;
    proc.exitCode = undefined;
    if (!failed) try {
      if (catalog !== null) {
        tools = [fs.openSync(dir + "/c", "w"), fs.openSync(dir + "/r", "r")];
        mcptools ??= await import(MOD);
        mcptools._rebind(catalog, ...tools);
      }
      let code = null;
      try { code = src.includes("await") ? processTopLevelAwait(src) : null; } catch {}
      const opts = { filename: ts ? "/exec-" + count + ".js" : "<exec-" + count + ">", importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER };
      let script;
      try { script = new vm.Script(code ?? src, opts); } catch (e) { if (code === null) throw e; code = null; script = new vm.Script(src, opts); }
      const r = script.runInThisContext({ displayErrors: true });
      if (code !== null) await r;
    } catch (e) { fail(e); }
    while (!failed && busy()) await new Promise((r) => wait(r, 2));
    if (tools !== null) {
      mcptools?._rebind(null, -1, -1); // what the call left can call no more
      for (const fd of tools) fs.closeSync(fd);
    }
    fs.writeSync(ev, "K " + (failed || (proc.exitCode ?? 0) & 255) + "\n");
  }
})();
""".replace(b"ESBUILD", repr(ESBUILD).encode())


def node_start(out_w, err_w):
    # The session's node: [pid, its call pipe, its event pipe, its stdin, its mcptools],
    # a child of PID 1, under the filter, limits and user every process of the sandbox
    # has. Its mcptools is empty until a call with tools (node_tools), node's copy
    # read-only. --preserve-symlinks keeps that file's /dev/fd name, as a one-shot
    # program's with tools (_mcptools_named).
    r, w = os.pipe()
    er, ew = os.pipe()
    src = os.memfd_create("runner", os.MFD_CLOEXEC)
    write_all(src, NODE_RUNNER)
    stdin = os.memfd_create("stdin", os.MFD_CLOEXEC)
    mod = os.memfd_create("mcptools", os.MFD_CLOEXEC)
    ro = os.open("/proc/self/fd/%d" % mod, os.O_RDONLY | os.O_CLOEXEC)
    argv = LANGUAGES[b"javascript"][:-1] + ["--preserve-symlinks", "--expose-internals", "/dev/fd/5"]
    if os.path.exists(NODE_SNAPSHOT):
        argv[1:1] = ["--snapshot-blob", NODE_SNAPSHOT]
    import fcntl
    import signal
    fds = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 32) for fd in (stdin, out_w, err_w, r, ew, src, ro)]  # above 0-6
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(fds)],
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT))
    except OSError as e:
        pid = None
        os.write(err_w, b"mcp-exec: cannot start node: %s\n" % str(e).encode())
    for fd in fds + [r, ew, src, ro]:
        os.close(fd)
    os.set_blocking(er, False)
    return [pid, w, er, stdin, mod]


NODE_MCPTOOLS = 6  # node's descriptor of its mcptools (node_start; NODE_RUNNER's MOD)


def node_tools(child_fn, mod, blob, code, fifos):
    # A session's JavaScript call with tools: what PID 1 writes to node (NODE_RUNNER).
    # The module goes into node's mcptools file at its first such call; node loads it
    # once and rebinds it to each call's FIFOs (the holder's bind, for Python) and
    # catalog, so that what a program kept of it goes on working.
    catalog = blob[4 + int.from_bytes(blob[:4], "big"):]
    if os.fstat(mod).st_size == 0:
        write_all(mod, child_fn("_mcptools_js")(blob, -1, -1))
    code = child_fn("_mcptools_named")(code.decode("utf-8", "surrogateescape"), NODE_MCPTOOLS).encode("utf-8", "surrogateescape")
    return b"%d %d %s\n" % (len(code), len(catalog), fifos.encode()) + code + catalog


def session(max_output, preload, outdir, max_file, max_files, filter_arg, seal_fd=None):
    global seal
    install_filter(filter_arg)
    prologue()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    cmd_r, cmd_w = os.pipe()
    ev_r, ev_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(sys.modules["__main__"].__dict__, HOLDER_SRC, ["-c", str(cmd_r), str(ev_w), preload, outdir],
              out_w, err_w, (out_r, err_r, cmd_w, ev_r) + ((seal_fd,) if seal_fd is not None else ()), "holder", True)
    for fd in (cmd_r, ev_w):
        os.close(fd)  # out_w and err_w stay, for the session's node (node_start)
    take_seal(seal_fd)
    shield(pid)
    # A session with a profile: PID 1 relays, after the fork (its threads are never in
    # the holder) and before the R frame, so every cell finds the relay listening, and
    # a cell's kill (kill_all_but spares PID 1) or a new holder never ends it.
    egress_relay()
    import select
    import shutil
    import time
    for fd in (out_r, err_r, ev_r):
        os.set_blocking(fd, False)
    evbuf = [b""]

    def events():
        # Whole lines from the event pipe; anything malformed is dropped.
        try:
            data = os.read(ev_r, 4096)
        except BlockingIOError:
            return []
        if not data:
            return [None]
        evbuf[0] += data
        *lines, evbuf[0] = evbuf[0].split(b"\n")
        evbuf[0] = evbuf[0][-256:]
        out = []
        for line in lines:
            p = line.split()
            if len(p) >= 2 and p[0] in (b"R", b"K", b"L") and all(x.lstrip(b"-").isdigit() for x in p[1:3]):
                out.append((p[0], [int(x) for x in p[1:3]]))
        return out

    node, dead = [None], {}  # dead: the exit status of node, reaped

    def reap():
        while True:
            try:
                p, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if p == 0:
                return
            if p == node[0]:
                dead[p] = os.waitstatus_to_exitcode(st)

    def alive(p):
        try:
            with open("/proc/%d/stat" % p) as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    def kill_all_but(*keep):
        # Every process of the container but PID 1 and keep: the cell's (and, for a
        # JavaScript call, node's, keeping the holder and its cell forked ahead).
        for _ in range(200):
            left = [p for p in (int(d) for d in os.listdir("/proc") if d.isdigit())
                    if p not in (1,) + keep and alive(p)]
            if not left:
                return
            for p in left:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            reap()
            time.sleep(0.005)

    def kids(p):
        # p's children (the holder's: the cell it forked ahead).
        out = []
        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == p:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
        return out

    def node_gone():
        # Node ended (reaped: its pid may be another's now), is ending (a SIGKILL pending,
        # or its exit begun: PF_EXITING; node's takes a few ms, and a call written to it
        # then would be lost with it) or stopped (it would never answer); a stopped one is
        # killed, since it is no one's now.
        p = node[0]
        if p in dead:
            return True
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return True
        pending = 0
        try:  # a kernel that shows no pending signals (gVisor may not) shows none pending
            with open("/proc/%d/status" % p) as f:
                for ln in f:
                    if ln.startswith(("SigPnd:", "ShdPnd:")):
                        pending |= int(ln.split()[1], 16)
        except (OSError, IndexError, ValueError):
            pass
        if st[0] in "Tt":
            try:
                os.kill(p, 9)
            except OSError:
                pass
        return st[0] in "ZXxTt" or st[6:7] and st[6].isdigit() and int(st[6]) & 4 or pending & 1 << 8

    child_fns = {}

    def child_fn(name):
        # One of CHILD's functions, for PID 1's part of a JavaScript call.
        if not child_fns:
            exec(CHILD[:CHILD.rindex("globals().pop(\"_status\")")], child_fns)
        return child_fns[name]

    def replace(blob):
        # A JavaScript call's input files, written by PID 1 as a cell writes them
        # (the holder's replace: _files after the removal of the old ones).
        i = 0
        while i < len(blob):
            k = int.from_bytes(blob[i:i + 4], "big")
            name = blob[i + 4:i + 4 + k].decode("utf-8")
            i += 8 + k + int.from_bytes(blob[i + 4 + k:i + 8 + k], "big")
            if os.path.lexists(name) and (os.path.islink(name) or not os.path.isdir(name)):
                os.unlink(name)
        child_fn("_files")(os, blob)

    def node_event(wait=False):
        # The running JavaScript call's end: ("kept", status) from node, or, node gone,
        # ("lost", its exit status); (None, 0) while it runs.
        try:
            data = os.read(node[2], 64)
        except BlockingIOError:
            data = None
        if data:
            p = data.split()
            return ("kept", int(p[1])) if len(p) == 2 and p[0] == b"K" and p[1].isdigit() else ("lost", 1)
        if data is None and not wait:
            return None, 0
        pid = node[0]
        try:
            st = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        except (ChildProcessError, TypeError):
            st = dead.pop(pid, -9)
        return "lost", st

    def reseal(parts):
        # A new attach (a shared session or a kept call on Kubernetes: any replica serves
        # the next call or fetch): a fresh key, whose keystream starts at 0, seals what
        # follows. False for any other line.
        global seal
        if len(parts) != 2 or parts[0] != HEADER_RESEAL or seal is None:
            return False
        try:
            key = bytes.fromhex(parts[1].decode())
        except ValueError:
            key = b""
        if len(key) != SEAL_KEY_SIZE:
            fatal("bad session seal key")
        seal = sealer(key)
        return True

    def fetched(output):
        # A running kept call's progress: its output's tails and size so far.
        write_all(1, frame(FRAME_STDOUT, output.tails[FRAME_STDOUT]) + frame(FRAME_STDERR, output.tails[FRAME_STDERR]) +
                  frame(FRAME_PROGRESS, b'{"output_bytes": %d}' % output.total))

    # The holder is ready once it has said so (its preload imported).
    holder = None
    while holder is None:
        r, _, _ = select.select([ev_r], [], [], 1)
        for e in (events() if r else []):
            if e is None:
                fatal("the session's interpreter ended before it was ready")
            if e[0] == b"R":
                holder = e[1][0]
        reap()
    write_all(1, frame(FRAME_READY))
    # A cancelled call's result (its caller went away) that said the JavaScript state was
    # lost reached no one: the next JavaScript call says it, whichever replica serves it.
    unseen = False

    while True:
        # Idle: wait for the next cell, dropping what leftover threads write.
        while True:
            r, _, _ = select.select([0, out_r, err_r, ev_r], [], [], 1)
            if 0 in r:
                break
            for fd in (out_r, err_r):
                if fd in r:
                    try:
                        os.read(fd, 65536)
                    except BlockingIOError:
                        pass
            if ev_r in r:
                events()
            reap()
            if not alive(holder):
                write_all(1, frame(FRAME_EXIT, exit_payload(0, None, False, state="lost")))
                os._exit(EXIT_OK)
        reply, line = read_input()
        if reply is not None:
            continue  # a reply that came after its call had ended
        parts = line.split()
        if parts[:1] == [HEADER_KILL] or parts == [HEADER_FETCH]:
            continue  # a kill that came after its cell had ended; nothing kept
        if reseal(parts):
            continue
        # A cell's or a kept call's header may name another language last.
        lang = parts.pop() if len(parts) == {HEADER_CELL: 5, HEADER_KEPT: 6, HEADER_CELL_TOOLS: 6}.get(parts[0] if parts else None) and parts[-1] in LANGUAGES else None
        if not ((len(parts) == 4 and parts[0] == HEADER_CELL) or (len(parts) == 5 and parts[0] in (HEADER_CELL_TOOLS, HEADER_KEPT))) \
                or not all(p.isdigit() for p in parts[1:]) or (parts[0] == HEADER_CELL_TOOLS and lang not in (None, b"javascript", b"typescript")):
            fatal("bad session header")
        n, m = int(parts[1]), int(parts[2])
        kept = [] if parts[0] == HEADER_KEPT else None
        t0 = time.monotonic()
        stop_at = t0 + int(parts[4]) / 1000 if kept is not None else None
        t, s = (int(parts[3]), int(parts[4])) if parts[0] == HEADER_CELL_TOOLS else (None, int(parts[3]))
        cell = read_exact(n) + read_exact(m) + (read_exact(t) if t is not None else b"") + read_exact(s)
        # With tools, the call gets FIFOs of its own (the holder's bind), in a new
        # directory: calls written to c go out as C frames, replies (Y frames) go to r;
        # both close, and go, with the call.
        call_r = rep_w = fifos = None
        replies = b""
        if t is not None:
            fifos = "/tmp/.mcp-exec-call-" + os.urandom(8).hex()
            try:
                os.mkdir(fifos, 0o700)
                os.mkfifo(fifos + "/c", 0o600)
                os.mkfifo(fifos + "/r", 0o600)
            except OSError as e:
                fatal("making a call's FIFOs: %s" % e)
            # Read and write: the cell's opens never wait, and c never reads as ended.
            call_r = os.open(fifos + "/c", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
            rep_w = os.open(fifos + "/r", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        ooms = oom_kills()
        state, status, killed, timed_out, scope, before = None, 0, False, False, None, None
        cancel = False
        events()  # the death of a cell forked ahead that never had a call: not this call's
        js = lang in (b"javascript", b"typescript")  # both run in the session's node
        if js:
            # Its node (started by the session's first JavaScript call, and anew after
            # one was lost: said so) gets the call; the holder's cell waits on. One that
            # ended or was stopped between calls (another call's kill) is lost before
            # this call, which runs in a fresh one.
            if node[0] is not None and node_gone():
                scope = before = b"javascript"
            if node[0] is None or scope:
                for fd in node[1:]:
                    os.close(fd)
                node[:] = node_start(out_w, err_w)
                try:
                    os.chdir(os.environ.get("HOME", "/tmp"))
                except OSError:
                    pass
            if unseen:
                scope, before, unseen = b"javascript", b"javascript", False
            try:
                msg = b"%d\n" % n + cell[:n] if t is None else node_tools(child_fn, node[4], cell[n + m:n + m + t], cell[:n], fifos)
                os.ftruncate(node[3], 0)
                os.lseek(node[3], 0, 0)  # the offset node's reads left (one file, shared)
                write_all(node[3], cell[n + m + (t or 0):])
                os.lseek(node[3], 0, 0)
                replace(cell[n:n + m])
                os.makedirs(outdir, exist_ok=True)
                if lang == b"typescript":
                    msg = msg.replace(b"\n", b" typescript\n", 1)  # node strips its types (NODE_RUNNER)
                write_all(node[1], msg)
            except (OSError, SystemExit) as e:
                os.write(err_w, b"mcp-exec: %s\n" % str(e).encode())
                status, scope = 1, b"javascript"
                kill_all_but(holder, *kids(holder))
                state = "lost"
            cell = b""
        try:
            if js:
                pass
            elif t is None:
                cell = (b"BASH" if lang else b"CELL") + b" %d %d %d\n" % (n, m, s) + cell
            else:
                cell = b"CELL %d %d %d %d %s\n" % (n, m, s, t, fifos.encode()) + cell
            while cell:
                cell = cell[os.write(cmd_w, cell):]
        except OSError:
            state = "lost"
        cell = None
        emit = kept.append if kept is not None else (lambda d: write_all(1, d))
        output = Output(max_output, emit)

        def relay(fd):
            output.relay(fd, FRAME_STDOUT if fd == out_r else FRAME_STDERR)

        while state is None:
            r, w, _ = select.select([0, out_r, err_r, ev_r] + ([call_r] if call_r is not None else []) + node[2:3] * js,
                                    [rep_w] if replies else [], [], 0.5)
            for fd in (out_r, err_r):
                if fd in r:
                    relay(fd)
            if call_r is not None and call_r in r:
                try:
                    data = os.read(call_r, 65536)
                except BlockingIOError:
                    data = None
                if data:
                    write_all(1, frame(FRAME_CALL, data))
            if w:
                # Replies wait here, not in the stream, so that a cell that does not
                # read them never stops PID 1 from reading a kill.
                try:
                    replies = replies[os.write(rep_w, replies[:65536]):]
                except BlockingIOError:
                    pass
                except OSError:
                    replies = b""  # nobody reads them any more
            if js and node[2] in r:
                state, status = node_event()
            if ev_r in r:
                for e in events():
                    if e is None:
                        state = "lost"
                    elif js:
                        pass  # the holder's: this call is node's
                    elif e[0] == b"K" and not killed:
                        old, holder = holder, e[1][0]
                        try:
                            os.kill(old, 9)
                        except OSError:
                            pass
                        state, status = "kept", e[1][1]
                    elif e[0] == b"L" and e[1][0] != holder:
                        state, status = "rolled_back", e[1][1]
            late = kill = stop_at is not None and time.monotonic() > stop_at
            if state is None and 0 in r:
                reply, line = read_input()
                if reply is not None:
                    if rep_w is not None:
                        replies += reply
                elif kept is not None and line.split() == [HEADER_FETCH]:
                    fetched(output)
                elif kept is not None and reseal(line.split()):
                    pass
                elif line.split()[:1] == [HEADER_KILL]:
                    kill, cancel = True, line.split()[1:] == [b"cancel"]
            if state is None and kill and not killed and js:
                # No fork of a node process: its state goes with the call.
                killed, timed_out = True, late
                state, status = node_event()
                if state is None:
                    kill_all_but(holder, *kids(holder))
                    state, status = node_event(True)
            if js and state == "lost" and alive(holder):
                scope = b"javascript"  # Python's and bash's state stay
            if state is None and kill and not killed:
                killed, timed_out = True, late
                # A "K" already in the pipe means the cell ended first: keep it.
                for e in events():
                    if e is not None and e[0] == b"K":
                        old, holder = holder, e[1][0]
                        try:
                            os.kill(old, 9)
                        except OSError:
                            pass
                        state, status, killed, timed_out = "kept", e[1][1], False, False
                if state is None:
                    kill_all_but(holder, node[0])
            reap()
            if state is None and not alive(holder):
                # A cell that ended its holder may still end by itself (then it holds).
                if killed or not [d for d in os.listdir("/proc") if d.isdigit() and d != "1" and alive(int(d))]:
                    state = "lost"
        if js and not alive(node[0]):
            for fd in node[1:]:
                os.close(fd)
            node[:] = [None]
        unseen = unseen or bool(cancel and scope)
        if state == "lost" and not scope:
            kill_all_but()
        for fd in (call_r, rep_w):
            if fd is not None:
                os.close(fd)  # what this call left can make no more calls
        if fifos is not None:
            shutil.rmtree(fifos, ignore_errors=True)
        deadline = time.monotonic() + 0.2
        for fd in (out_r, err_r):
            while time.monotonic() < deadline:
                if not select.select([fd], [], [], 0)[0]:
                    break
                relay(fd)
        send_files(outdir, max_file, max_files, emit)
        shutil.rmtree(outdir, ignore_errors=True)
        x = exit_payload(status, ooms, output.dropped, killed, "lost" if scope else state)
        if scope:
            x = x[:-1] + b', "scope": "%s"%s}' % (scope, b', "lost_before": true' if before and state == "kept" else b"")
        if kept is not None:
            x = x[:-1] + b', "timed_out": %s, "duration_ms": %d}' % (b"true" if timed_out else b"false", (time.monotonic() - t0) * 1000)
        emit(frame(FRAME_EXIT, x))
        if kept is not None:
            kill_all_but()  # what the call left: its result is all the pod holds now
            kept = b"".join(kept)
            while True:
                _, line = read_input()
                if line is not None and line.split() == [HEADER_FETCH]:
                    write_all(1, kept)
                elif line is not None:
                    reseal(line.split())
        if state == "lost" and not scope:
            os._exit(EXIT_OK)


def seal_fd_arg(argv, n, usage):
    # argv[n], if present, is seal-fd=N (the start gate's, on Kubernetes).
    global gate_fd
    if len(argv) == n:
        return None
    if len(argv) > n + 1 or not argv[n].startswith("seal-fd=") or not argv[n][8:].isdigit():
        sys.stderr.write(usage)
        sys.exit(EXIT_USAGE)
    gate_fd = int(argv[n][8:])
    return gate_fd


if __name__ == "__main__":
    if len(sys.argv) in (8, 9) and sys.argv[1] == "session":
        seal_fd = seal_fd_arg(sys.argv, 8, "usage: boot session MAX_OUTPUT PRELOAD OUTDIR MAX_FILE MAX_FILES seccomp=HEX [seal-fd=N]\n")
        session(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], seal_fd)
    usage = "usage: boot parent MAX_OUTPUT PRELOAD OUTDIR MAX_FILE MAX_FILES seccomp=HEX [prestart=LANGS] [seal-fd=N]\n"
    if len(sys.argv) < 8 or sys.argv[1] != "parent":
        sys.stderr.write(usage)
        sys.exit(EXIT_USAGE)
    # prestart=LANGS, if present, follows the filter: a pooled sandbox's (see _ahead).
    prestart = sys.argv.pop(8)[9:] if len(sys.argv) > 8 and sys.argv[8].startswith("prestart=") else ""
    seal_fd = seal_fd_arg(sys.argv, 8, usage)
    if any(name.encode() not in LANGUAGES for name in filter(None, prestart.split(","))):
        fatal("prestart names an unknown language: %r" % prestart)
    parent(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], seal_fd, prestart)
