package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher"
)

// TestKeystreamMatchesPython pins the keystream to the bytes boot.py's sealer makes (computed
// once with python3 from launcher/boot.py: key 00 01 .. 1f, zeros sealed in writes of 1, 4,
// 65530, 3, 70000 and 64000 bytes), so the two sides cannot drift apart.
func TestKeystreamMatchesPython(t *testing.T) {
	key := make([]byte, sealKeySize)
	for i := range key {
		key[i] = byte(i)
	}
	ks := keystream{key: key}
	out := make([]byte, 199538)
	ks.xorAt(out, make([]byte, len(out)), 0)
	for _, c := range []struct {
		name, got, want string
	}{
		{"first 16 bytes", hex.EncodeToString(out[:16]), "fd74acaec0e700c0331f98393c022d0f"},
		{"bytes 65530..65546 (across blocks 0 and 1)", hex.EncodeToString(out[65530:65546]), "6cd7d7ff7757cb21145b1ed0117dd763"},
		{"sha256 of all", fmt.Sprintf("%x", sha256.Sum256(out)), "ec631378d6a9cc8f65ee642c1367085fdf039b0b2d499fc41f874b58a90cf1f3"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, c.got, c.want)
		}
	}
	var plain bytes.Buffer
	u := newUnsealer(&plain, key)
	sealed, _ := hex.DecodeString("9017dc83a59f65a3") // boot.py's sealer(key)(b"mcp-exec")
	if _, err := u.Write(sealed); err != nil || plain.String() != "mcp-exec" {
		t.Errorf("unsealing python's %x: got %q, %v; want %q", sealed, plain.String(), err, "mcp-exec")
	}
}

// FuzzUnsealerSplits: a stream sealed in one piece unseals to the same bytes whatever the
// writes it arrives in, and the unsealer leaves the caller's buffers alone.
func FuzzUnsealerSplits(f *testing.F) {
	f.Add([]byte("key"), []byte("hello, sealed world"), []byte{1, 2, 3})
	f.Add([]byte{}, bytes.Repeat([]byte{7}, 3*sealBlock+5), []byte{0xff, 0xff, 0x10, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, seed, plain, splits []byte) {
		key := sha256.Sum256(seed)
		sealed := make([]byte, len(plain))
		(&keystream{key: key[:]}).xorAt(sealed, plain, 0)
		if len(plain) >= 32 && bytes.Equal(sealed, plain) {
			t.Fatalf("sealing changed nothing")
		}
		var got bytes.Buffer
		u := newUnsealer(&got, key[:])
		rest := sealed
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(splits) >= 2 {
				n = int(binary.BigEndian.Uint16(splits[(2*i)%(len(splits)-1):]))%(2*sealBlock) + 1
			}
			n = min(n, len(rest))
			piece := bytes.Clone(rest[:n])
			if w, err := u.Write(piece); w != n || err != nil {
				t.Fatalf("Write: got %d, %v; want %d", w, err, n)
			}
			if !bytes.Equal(piece, rest[:n]) {
				t.Fatalf("Write modified its input")
			}
			rest = rest[n:]
		}
		if !bytes.Equal(got.Bytes(), plain) {
			t.Fatalf("round trip differs at %d bytes", len(plain))
		}
	})
}

// runGated runs command behind startGate on this machine's python3, with stdin.
func runGated(t *testing.T, stdin string, command ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	return runGatedBundle(t, stdin, "", command...)
}

// runGatedBundle is runGated with the gate told to write a CA bundle at bundle.
func runGatedBundle(t *testing.T, stdin, bundle string, command ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, gated(append([]string{py}, command...), bundle)[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("running the gate: %v", err)
	}
	return o.Bytes(), e.Bytes(), code
}

// TestStartGate: the gate takes exactly one line of 64 lower-case hex digits, passes the key
// on through the descriptor its last argument names (nothing in the environment), leaves the rest of
// stdin to the bootstrap, and exits 70 on anything else.
func TestStartGate(t *testing.T) {
	key, line, err := newSealKey()
	if err != nil {
		t.Fatal(err)
	}
	prog := `import os, sys
fd = int(sys.argv[-1].removeprefix("seal-fd="))
print(os.read(fd, 64).hex(), sys.stdin.read(), sorted(k for k in os.environ if k.startswith("MCPEXEC")), b"` + line[:16] + `" in open("/proc/self/environ", "rb").read())`
	out, errb, code := runGated(t, line+"\nrest of stdin", "-I", "-c", prog)
	if want := hex.EncodeToString(key) + " rest of stdin [] False\n"; code != 0 || string(out) != want {
		t.Errorf("good key: got %q (stderr %q, exit %d), want %q", out, errb, code, want)
	}
	for name, in := range map[string]string{
		"empty":      "",
		"bare line":  "\n",
		"short":      line[:62] + "\n",
		"long":       line + "00\n",
		"no newline": line,
		"upper case": strings.ToUpper(line) + "\n",
		"not hex":    strings.Repeat("g", 64) + "\n",
		"endless":    strings.Repeat("0", 1<<20),
	} {
		out, _, code := runGated(t, in, "-I", "-c", "print('bootstrap ran')")
		if code != 70 || len(out) != 0 {
			t.Errorf("%s: got exit %d, output %q; want 70 and nothing", name, code, out)
		}
	}
}

// TestStartGateBundle: told to, the gate reads the bundle's length and bytes after the
// key's line, writes exactly them to a new file (read-only) and leaves the rest of stdin
// to the bootstrap; a bad length, a short bundle or an existing file is exit 70, and
// the bootstrap never runs.
func TestStartGateBundle(t *testing.T) {
	_, line, err := newSealKey()
	if err != nil {
		t.Fatal(err)
	}
	bundle := strings.Repeat("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", 3000) // > 64 KiB: several reads
	path := filepath.Join(t.TempDir(), "ca-bundle.pem")
	prog := `import sys; print(sys.stdin.read())`
	out, errb, code := runGatedBundle(t, gateBundle(line+"\n", []byte(bundle))+"rest of stdin", path, "-I", "-c", prog)
	if code != 0 || string(out) != "rest of stdin\n" {
		t.Fatalf("good bundle: got %q (stderr %q, exit %d), want the rest of stdin", out, errb, code)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != bundle {
		t.Fatalf("the file: %d bytes (%v), want the bundle's %d", len(got), err, len(bundle))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o444 {
		t.Errorf("the file's mode: %v, want 0444", fi.Mode().Perm())
	}
	for name, in := range map[string]string{
		"exists":     gateBundle(line+"\n", []byte("x")),
		"no length":  line + "\n",
		"zero":       line + "\n0\n",
		"not digits": line + "\n12a\n",
		"too big":    gateBundle(line+"\n", make([]byte, maxCABundle+1)),
		"short":      line + "\n10\nabc",
	} {
		p := path
		if name != "exists" {
			p = filepath.Join(t.TempDir(), "b.pem")
		}
		out, _, code := runGatedBundle(t, in, p, "-I", "-c", "print('bootstrap ran')")
		if code != 70 || len(out) != 0 {
			t.Errorf("%s: got exit %d, output %q; want 70 and nothing", name, code, out)
		}
	}
}

// frames splits the bootstrap's frames (launcher/frame.go): kind, u32 length, payload.
func frames(t *testing.T, b []byte) map[byte][]byte {
	t.Helper()
	got := map[byte][]byte{}
	for len(b) > 0 {
		if len(b) < 5 {
			t.Fatalf("truncated frame header %q", b)
		}
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if len(b) < 5+n {
			t.Fatalf("truncated frame %c: %d of %d bytes", b[0], len(b)-5, n)
		}
		got[b[0]] = append(got[b[0]], b[5:5+n]...)
		b = b[5+n:]
	}
	return got
}

// TestBootSeals runs the real bootstrap behind the real gate on this machine's python3: all of
// its stdout is sealed (no marker of the program's output or file in it, and it is not frames),
// it unseals to the frames, its stderr carries nothing of the program's, and the program
// cannot find the key anywhere in its own memory (environment, stack, heap) nor on a
// descriptor.
func TestBootSeals(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "boot.py"))
	if err != nil {
		t.Fatal(err)
	}
	key, line, err := newSealKey()
	if err != nil {
		t.Fatal(err)
	}
	marker, fileMarker := "out-"+line[:24], "file-"+line[40:]
	outdir := filepath.Join(t.TempDir(), "outputs")
	// The program holds the key's halves apart, and looks for them side by side, raw and in
	// hex, in every readable mapping of its own memory.
	h := hex.EncodeToString(key)
	code := fmt.Sprintf(`import os, sys
print(%q)
print(%q, file=sys.stderr)
os.makedirs(%q, exist_ok=True)
open(%q + "/f.txt", "w").write(%q)
halves = [(bytes.fromhex(%q), bytes.fromhex(%q)), (%q.encode(), %q.encode())]
found, seen, scanned, errs = [], 0, 0, 0
mem = os.open("/proc/self/mem", os.O_RDONLY)
for l in open("/proc/self/maps"):
    addr, perms = l.split()[:2]
    if "r" not in perms or l.rstrip().endswith(("[vvar]", "[vsyscall]", "[vvar_vclock]")):
        continue
    lo, hi = (int(x, 16) for x in addr.split("-"))
    try:
        m = os.pread(mem, hi - lo, lo)
    except OSError:
        errs += 1
        continue
    scanned += len(m)
    for a, b in halves:
        seen += m.count(a)
        i = m.find(a)
        while i >= 0:
            if m[i + len(a):i + 2 * len(a)] == b:
                found.append(l.split()[-1])
            i = m.find(a, i + 1)
print("key in memory:", found)
print("scan ok:", seen >= 2 and scanned > 1 << 20)
held = []
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        os.set_blocking(fd, False)
        if os.read(fd, 64) == halves[0][0] + halves[0][1]:
            held.append(fd)
    except OSError:
        pass
print("key on a descriptor:", held)
print("env:", sorted(k for k in os.environ if k.startswith("MCPEXEC")), b"MCPEXEC" in open("/proc/self/environ", "rb").read())
`, marker, "err-"+marker, outdir, outdir, fileMarker, h[:32], h[32:], h[:32], h[32:])
	stdin := fmt.Sprintf("%s\nMCPEXEC2 %d 0\n%s", line, len(code), code)
	boot := launcher.SpecOf(launcher.Options{}).Command
	filter := boot[len(boot)-1] // the seccomp filter, as the launcher passes it
	out, errb, exit := runGated(t, stdin, "-I", "-c", string(src), "parent", "1048576", "", outdir, "8388608", "16777216", filter)
	if exit != 0 {
		t.Fatalf("bootstrap exit %d, stderr %q", exit, errb)
	}
	for _, m := range []string{marker, fileMarker, "key in memory", h, h[:16]} {
		if bytes.Contains(out, []byte(m)) || bytes.Contains(errb, []byte(m)) {
			t.Errorf("%q is in the bootstrap's raw stdout or stderr", m)
		}
	}
	if bytes.HasPrefix(out, []byte("R\x00\x00\x00\x00")) {
		t.Errorf("raw stdout starts with a plain ready frame: %q", out[:5])
	}
	var plain bytes.Buffer
	u := newUnsealer(&plain, key)
	for rest := out; len(rest) > 0; {
		n := min(len(rest), 7)
		_, _ = u.Write(rest[:n])
		rest = rest[n:]
	}
	fr := frames(t, plain.Bytes())
	o := string(fr['O'])
	for _, want := range []string{marker + "\n", "key in memory: []\n", "key on a descriptor: []\n", "env: [] False\n", "scan ok: True\n"} {
		if !strings.Contains(o, want) {
			t.Errorf("unsealed stdout frames: got %q, want %q in them", o, want)
		}
	}
	if !strings.Contains(string(fr['E']), "err-"+marker) || !bytes.Contains(fr['D'], []byte(fileMarker)) || len(fr['X']) == 0 {
		t.Errorf("unsealed frames: got E %q, D %q, X %q; want the stderr marker, the file and the exit", fr['E'], fr['D'], fr['X'])
	}
}

// TestBootFatalSealed: a bootstrap that fails before it has taken the key in the usual
// place (a bad seccomp argument, before its filter and prologue; an unknown prestart
// language, among its arguments) still seals its F frame, so that the server reads the
// message instead of noise ("unknown frame kind"), exits 70, and runs nothing.
func TestBootFatalSealed(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "boot.py"))
	if err != nil {
		t.Fatal(err)
	}
	boot := launcher.SpecOf(launcher.Options{}).Command
	filter := boot[len(boot)-1]
	for _, tc := range []struct {
		name, mode, want string
		args             []string
	}{
		{"bad filter", "parent", "bad seccomp filter argument", []string{"seccomp=zz"}},
		{"unknown prestart", "parent", "prestart names an unknown language", []string{filter, "prestart=cobol"}},
		{"session, bad filter", "session", "bad seccomp filter argument", []string{"seccomp=zz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, line, err := newSealKey()
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-I", "-c", string(src), tc.mode, "1048576", "", t.TempDir(), "8388608", "16777216"}, tc.args...)
			out, errb, exit := runGated(t, line+"\nMCPEXEC2 12 0\nprint('ran')", args...)
			if exit != 70 || bytes.Contains(out, []byte(tc.want)) {
				t.Fatalf("got exit %d, raw stdout %q (stderr %q); want 70 and nothing plain", exit, out, errb)
			}
			var plain bytes.Buffer
			_, _ = newUnsealer(&plain, key).Write(out)
			if fr := frames(t, plain.Bytes()); !strings.Contains(string(fr['F']), tc.want) || len(fr) != 1 {
				t.Errorf("unsealed frames: got %q, want one F frame naming %q", fr, tc.want)
			}
		})
	}
}

// BenchmarkUnseal: the server's cost of unsealing, in the attach's 32 KiB writes.
func BenchmarkUnseal(b *testing.B) {
	u := newUnsealer(io.Discard, make([]byte, sealKeySize))
	p := make([]byte, 32<<10)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		_, _ = u.Write(p)
	}
}
