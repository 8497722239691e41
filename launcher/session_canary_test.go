package launcher

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/enginetest"
	"github.com/mcp-exec/mcp-exec/launcher/launchertest/syncbuf"
)

// TestNoSessionCallerDataPersisted: as TestNoCallerDataPersisted, for a session. The
// canaries of two calls (code, stdin, output computed by the program) stay in the
// session's memory and tmpfs between the calls; the engine's records, the container's
// layers and our log at trace level hold none of them, between the calls, and after
// the session's container is gone.
func TestNoSessionCallerDataPersisted(t *testing.T) {
	var logs syncbuf.Buffer
	l := testLauncher(t, Options{PoolSize: -1})
	l.log = zerolog.New(&logs).Level(zerolog.TraceLevel)
	cli := enginetest.Client(t)
	info, err := cli.Info(t.Context(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	records := engineRecordDirs(t, cli, info.Info.DockerRootDir)

	codeCanary := "session-code-canary-" + randomHex(12)
	stdinCanary := "session-stdin-canary-" + randomHex(12)
	outSeed := randomHex(12)
	outCanary := "session-output-canary-" + outSeed
	canaries := []string{codeCanary, stdinCanary, outCanary}
	search := callerDataSearch(t, cli, records, canaries)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := l.OpenSession(ctx, SessionOptions{Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Exec(ctx, Job{Code: "# " + codeCanary + "\nimport sys\nkept = sys.stdin.read()\n" +
		"out = 'session-output-canary-' + '" + reverse(outSeed) + "'[::-1]\n" +
		"open('/tmp/kept', 'w').write(kept + out)\nprint(out)", Stdin: stdinCanary, Timeout: 20 * time.Second})
	if err != nil || res.Stdout != outCanary+"\n" {
		t.Fatalf("call 1: got %q, %v", res.Stdout, err)
	}
	id := waitForSandbox(t, cli, l.opts.Instance)
	if hits := search(id); len(hits) > 0 {
		t.Errorf("between calls: caller data found: %v", hits)
	}
	res, err = s.Exec(ctx, Job{Code: "print(kept, open('/tmp/kept').read())", Timeout: 20 * time.Second})
	if err != nil || !strings.Contains(res.Stdout, stdinCanary) || !strings.Contains(res.Stdout, outCanary) {
		t.Fatalf("call 2: got %q, %v: the session kept nothing, the test would prove nothing", res.Stdout, err)
	}
	if hits := search(id); len(hits) > 0 {
		t.Errorf("after call 2: caller data found: %v", hits)
	}
	s.Close()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoCallerDataLeft(t, search, canaries, logs.String())
}
