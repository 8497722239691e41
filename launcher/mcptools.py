"""The tools of the MCP servers this sandbox's server is configured with, as Python.

    from mcptools import echo_server
    echo_server.echo(text="hi")

One submodule per server, one function per allowed tool, keyword arguments only. A
result is the tool's structured content when it has one, else its text (decoded as
JSON when it is JSON), else a list of its items; images and resources are Image and
Resource objects. A tool that fails raises ToolError with the tool's own text; a call
the server refuses raises a subclass: ToolDenied, ToolBudgetExceeded, ToolTimeout,
ToolUnavailable. search("text") and describe("server.tool") read the catalog here,
with no call. gather(f, g, ...) runs several calls at once.

Calls leave the sandbox only through the bootstrap's stream to the server (there is no
network); the server checks each against its allowlist and this run's budget.
"""
# The bootstrap runs this file in the module's namespace with _catalog (JSON bytes),
# _call_fd (the pipe the bootstrap relays as C frames) and _reply_fd (the rest of the
# container's stdin, which carries only Y frames) already set.
import json as _json
import os as _os
import sys as _sys
import threading as _threading

# Set by the bootstrap before this file runs (above); read here by name, so that a
# missing one fails at import and the linter knows where they come from.
_catalog = globals()["_catalog"]
_call_fd = globals()["_call_fd"]
_reply_fd = globals()["_reply_fd"]

__all__ = ["ToolError", "ToolDenied", "ToolBudgetExceeded", "ToolTimeout", "ToolUnavailable",
           "Image", "Resource", "search", "describe", "gather"]


class ToolError(Exception):
    """A tool call failed. str(e) is the tool's (or the server's) message."""

    def __init__(self, message, server="", tool="", kind="tool"):
        super().__init__(message)
        self.server, self.tool, self.kind = server, tool, kind


class ToolDenied(ToolError):
    """The tool is not on the server's allowlist for this sandbox."""


class ToolBudgetExceeded(ToolError):
    """The run's budget (calls, argument bytes or result bytes) does not allow this call."""


class ToolTimeout(ToolError):
    """The call ran out of time (its own timeout, or what was left of the run's)."""


class ToolUnavailable(ToolError):
    """The upstream server is down or the connection to it broke."""


_KINDS = {"denied": ToolDenied, "budget": ToolBudgetExceeded, "too_large": ToolBudgetExceeded,
          "timeout": ToolTimeout, "unavailable": ToolUnavailable}


class Image:
    """An image a tool returned: data (bytes) and mime_type."""

    def __init__(self, data, mime_type):
        self.data, self.mime_type = data, mime_type

    def __repr__(self):
        return "Image(%s, %d bytes)" % (self.mime_type, len(self.data))


class Resource:
    """A resource a tool returned: uri, mime_type, and text or data (bytes)."""

    def __init__(self, uri, mime_type, text=None, data=None):
        self.uri, self.mime_type, self.text, self.data = uri, mime_type, text, data

    def __repr__(self):
        return "Resource(%r, %s)" % (self.uri, self.mime_type)


_write_lock = _threading.Lock()
_pending = {}
_state = {"next": 1, "reader": None, "closed": None}


def _reader():
    buf, why = b"", "the bridge to the server closed"
    while True:
        try:
            data = _os.read(_reply_fd, 1 << 16)
        except OSError as e:
            data, why = b"", "the bridge to the server broke: %s" % e
        if not data:
            break
        buf += data
        broken = False
        while buf:
            # A frame that is not a reply leaves no way to find the next one: the
            # stream is out of step, and every call waiting on it fails.
            n = int.from_bytes(buf[1:5], "big") if len(buf) >= 5 else None
            if buf[0:1] != b"Y" or (n is not None and n < 4):
                why = "the bridge to the server broke: a malformed reply frame (kind %r%s)" % (
                    buf[0:1], "" if n is None else ", length %d" % n)
                broken = True
                break
            if n is None or len(buf) < 5 + n:
                break
            cid, body, buf = int.from_bytes(buf[5:9], "big"), buf[9:5 + n], buf[5 + n:]
            slot = _pending.get(cid)
            if slot is not None:
                slot[1] = body
                slot[0].set()
        if broken:
            break
    with _write_lock:
        _state["closed"] = why
        for slot in list(_pending.values()):
            slot[0].set()


def _call(server, tool, arguments):
    body = _json.dumps({"server": server, "tool": tool, "arguments": arguments}).encode()
    slot = [_threading.Event(), None]
    with _write_lock:
        if _state["closed"]:
            raise ToolUnavailable(_state["closed"], server, tool, "unavailable")
        cid = _state["next"]
        _state["next"] += 1
        _pending[cid] = slot
        if _state["reader"] is None:
            _state["reader"] = _threading.Thread(target=_reader, name="mcptools-reader", daemon=True)
            _state["reader"].start()
        msg = len(body).to_bytes(4, "big") + cid.to_bytes(4, "big") + body
        try:
            while msg:
                msg = msg[_os.write(_call_fd, msg):]
        except OSError as e:
            # A session's call that has ended closed its pipe (boot.py): a thread it
            # left cannot call in a later one.
            _pending.pop(cid, None)
            _state["closed"] = "the bridge to the server closed (%s)" % e.strerror
            raise ToolUnavailable(_state["closed"], server, tool, "unavailable") from None
    slot[0].wait()
    _pending.pop(cid, None)
    if slot[1] is None:
        raise ToolUnavailable(_state["closed"] or "no reply", server, tool, "unavailable")
    try:
        reply = _json.loads(slot[1])
        if not isinstance(reply, dict):
            raise ValueError("not a JSON object")
        return _decode(server, tool, reply)
    except ToolError:
        raise
    except Exception as e:
        raise ToolUnavailable("a malformed reply from the server (%s: %s)" % (type(e).__name__, e),
                              server, tool, "unavailable") from None


def _decode(server, tool, reply):
    err = reply.get("error")
    if err is not None:
        kind = err.get("kind", "tool")
        raise _KINDS.get(kind, ToolError)(err.get("message", ""), server, tool, kind)
    res = reply.get("result") or {}
    items = [_item(c) for c in res.get("content") or []]
    if res.get("isError"):
        text = "\n".join(i for i in items if isinstance(i, str)) or "the tool reported an error"
        raise ToolError(text, server, tool, "tool")
    if res.get("structuredContent") is not None:
        return res["structuredContent"]
    if len(items) == 1:
        item = items[0]
        if isinstance(item, str):
            try:
                return _json.loads(item)
            except ValueError:
                return item
        return item
    return items


def _item(c):
    import base64
    t = c.get("type")
    if t == "text":
        return c.get("text", "")
    if t in ("image", "audio"):
        return Image(base64.b64decode(c.get("data", "")), c.get("mimeType", ""))
    if t == "resource":
        r = c.get("resource") or {}
        data = base64.b64decode(r["blob"]) if "blob" in r else None
        return Resource(r.get("uri", ""), r.get("mimeType", ""), r.get("text"), data)
    if t == "resource_link":
        return Resource(c.get("uri", ""), c.get("mimeType", ""))
    return c


class _Unset:
    def __repr__(self):
        return "<unset>"


_UNSET = _Unset()
_catalog = _json.loads(_catalog)
_docs = {}


def _signature(tool):
    import keyword
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    names = [n for n in props if n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_")]
    names.sort(key=lambda n: n not in required)
    params = [n if n in required else n + "=_UNSET" for n in names]
    return names, params, props, required


def _doc(server, tool, params, props, required):
    lines = [tool.get("description") or "(no description)", "", "Arguments:"]
    for n, p in props.items():
        p = p if isinstance(p, dict) else {}
        typ = p.get("type", "any")
        lines.append("  %s (%s%s): %s" % (n, typ, ", required" if n in required else "",
                                           (p.get("description") or "").strip()))
    if not props:
        lines.append("  (none)")
    return "\n".join(lines)


def _build():
    top = _sys.modules[__name__]
    for srv in _catalog.get("servers", []):
        mod = type(_sys)(__name__ + "." + srv["module"])
        mod.__doc__ = "Tools of the upstream MCP server %r." % srv["name"]
        for tool in srv.get("tools", []):
            names, params, props, required = _signature(tool)
            fn = tool["function"]
            src = "def %s(%s):\n    _a = {k: v for k, v in ((%s)) if v is not _UNSET}\n    _a.update(_kw)\n    return _call(%r, %r, _a)\n" % (
                fn, "".join(p + ", " for p in ["*"] + params if params) + "**_kw",
                "".join("(%r, %s), " % (n, n) for n in names), srv["name"], tool["name"])
            ns = {"_UNSET": _UNSET, "_call": _call}
            exec(compile(src, "<mcptools>", "exec"), ns)
            f = ns[fn]
            f.__doc__ = _doc(srv["name"], tool, params, props, required)
            f.__module__ = mod.__name__
            f.__qualname__ = fn
            setattr(mod, fn, f)
            _docs[srv["module"] + "." + fn] = "%s.%s(*, %s)\n\n%s" % (
                srv["module"], fn, ", ".join(p.replace("=_UNSET", "=...") for p in params), f.__doc__)
            _docs.setdefault(srv["name"] + "." + tool["name"], _docs[srv["module"] + "." + fn])
        setattr(top, srv["module"], mod)
        _sys.modules[mod.__name__] = mod


def _rebind(catalog, call_fd, reply_fd):
    # A session's next call with tools (boot.py's holder), in its own process: the
    # call's own pipes and catalog; what the process copied of an earlier call (its
    # pipes, its replies pending, a lock a thread held at the fork) is dropped.
    global _call_fd, _reply_fd, _write_lock, _pending, _state, _catalog
    for fd in (_call_fd, _reply_fd):
        try:
            _os.close(fd)
        except OSError:
            pass
    _call_fd, _reply_fd = call_fd, reply_fd
    _write_lock = _threading.Lock()
    _pending = {}
    _state = {"next": 1, "reader": None, "closed": None}
    _catalog = _json.loads(catalog)
    _docs.clear()
    _build()


def search(text):
    """The tools whose name or description contains text (any case): a list of
    "module.function(...)" signatures with the first line of their description."""
    q, out = text.lower(), []
    for srv in _catalog.get("servers", []):
        for tool in srv.get("tools", []):
            key = srv["module"] + "." + tool["function"]
            hay = (srv["name"] + " " + tool["name"] + " " + (tool.get("description") or "")).lower()
            if q in hay:
                out.append(_docs[key].split("\n\n", 1)[0] + "  # " +
                           ((tool.get("description") or "").strip().split("\n") or [""])[0])
    return out


def describe(name):
    """The signature and docstring of one tool, named "server.tool" or "module.function"."""
    try:
        return _docs[name]
    except KeyError:
        raise KeyError("no tool %r: see mcptools.search()" % name) from None


def gather(*calls, max_concurrency=4, return_exceptions=False):
    """Run calls (functions of no arguments, e.g. lambdas) at most max_concurrency at
    once; return their results in order. The first exception is raised once all have
    ended, unless return_exceptions is true."""
    results = [None] * len(calls)
    sem = _threading.Semaphore(max(1, min(int(max_concurrency), 16)))

    def run(i, f):
        with sem:
            try:
                results[i] = (True, f())
            except BaseException as e:
                results[i] = (False, e)
    threads = [_threading.Thread(target=run, args=(i, f), daemon=True) for i, f in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not return_exceptions:
        for ok, v in results:
            if not ok:
                raise v
    return [v for _, v in results]


_build()
