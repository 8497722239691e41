package launcher

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// mcptoolsHarness loads mcptools.py as the bootstrap does, on pipes of its own, and
// plays the server: it reads the calls the program makes and answers them with the
// frames of the case named in argv[3]. It prints each call's outcome in call order.
const mcptoolsHarness = `
import os, sys, threading
src, catalog, case = open(sys.argv[1]).read(), open(sys.argv[2], "rb").read(), sys.argv[3]
calls_r, calls_w = os.pipe()
reply_r, reply_w = os.pipe()
mod = type(sys)("mcptools")
mod.__dict__.update(_catalog=catalog, _call_fd=calls_w, _reply_fd=reply_r)
sys.modules["mcptools"] = mod
exec(compile(src, "<mcptools>", "exec"), mod.__dict__)
import mcptools
from mcptools import echo

def read_exact(n):
    b = b""
    while len(b) < n:
        b += os.read(calls_r, n - len(b))
    return b

def read_call():
    h = read_exact(8)
    read_exact(int.from_bytes(h[:4], "big"))
    return int.from_bytes(h[4:], "big")

def reply(cid, body):
    os.write(reply_w, b"Y" + (4 + len(body)).to_bytes(4, "big") + cid.to_bytes(4, "big") + body)

results = {}
def call(i):
    try:
        results[i] = repr(echo.echo(text=str(i)))
    except mcptools.ToolError as e:
        results[i] = "%s: %s" % (type(e).__name__, e)
    except BaseException as e:
        results[i] = "not an mcptools error: %s: %s" % (type(e).__name__, e)

threads = []
for i in range(3):
    threads.append(threading.Thread(target=call, args=(i,), daemon=True))
    threads[-1].start()
    read_call()  # in order: call i has id i+1
if case == "bodies":
    reply(1, b"not json")
    reply(2, b"[1]")
    reply(3, b'{"result": "text"}')
else:
    reply(1, b'{"result": {"structuredContent": {"ok": 1}}}')
    os.write(reply_w, {"kind": b"Z" + bytes(12), "length": b"Y" + (2).to_bytes(4, "big") + bytes(8)}[case])
if case != "bodies":  # and a call made after
    threads.append(threading.Thread(target=call, args=(3,), daemon=True))
    threads[-1].start()
for t in threads:
    t.join(5)
for i in range(len(threads)):
    print(i, results.get(i, "still waiting after 5 s"))
sys.stdout.flush()
os._exit(0)
`

// TestMcptoolsMalformedReply: a reply the sandbox's mcptools cannot read fails its
// call with an mcptools error that says so; a malformed frame (the stream is out of
// step: no later reply can be found) fails every call waiting and every later one.
// Before, a malformed frame left every pending call waiting until the exec's timeout,
// and a malformed body raised the JSON decoder's (or an AttributeError) instead.
func TestMcptoolsMalformedReply(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found (the mcptools module's tests run it on the host)")
	}
	dir := t.TempDir()
	src, catalog := filepath.Join(dir, "mcptools.py"), filepath.Join(dir, "catalog.json")
	if err := os.WriteFile(src, []byte(mcptoolsSource), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catalog, []byte(echoCatalog), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := func(what string) string {
		return "ToolUnavailable: the bridge to the server broke: a malformed reply frame (" + what + ")"
	}
	for _, tc := range []struct{ name, want string }{
		{"bodies", "0 ToolUnavailable: a malformed reply from the server (JSONDecodeError: Expecting value: line 1 column 1 (char 0))\n" +
			"1 ToolUnavailable: a malformed reply from the server (ValueError: not a JSON object)\n" +
			"2 ToolUnavailable: a malformed reply from the server (AttributeError: 'str' object has no attribute 'get')\n"},
		{"kind", "0 {'ok': 1}\n1 " + broken("kind b'Z', length 0") + "\n2 " + broken("kind b'Z', length 0") + "\n3 " + broken("kind b'Z', length 0") + "\n"},
		{"length", "0 {'ok': 1}\n1 " + broken("kind b'Y', length 2") + "\n2 " + broken("kind b'Y', length 2") + "\n3 " + broken("kind b'Y', length 2") + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, py, "-I", "-c", mcptoolsHarness, src, catalog, tc.name).CombinedOutput()
			if err != nil || string(out) != tc.want {
				t.Fatalf("got %v:\n%s\nwant:\n%s", err, out, tc.want)
			}
		})
	}
}
