package e2e_test

// End-to-end test: the real mcp-exec binary, driven by an independent MCP client (the
// official TypeScript SDK, scripts/e2e/client.mjs) over stdio, streamable HTTP and SSE,
// with and without an auth token, against the real engine and sandbox image.
//
// Needs node and npm (for `npm ci` in scripts/e2e on first use), a running engine and
// the sandbox image (scripts/engine.sh, scripts/images.sh). Outside CI a missing piece
// skips the test; with CI set it fails. Skipped with -short.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/e2e"
)

func TestE2E(t *testing.T) {
	start := time.Now()
	dir, node := e2e.Node(t)
	bin := e2e.Build(t)
	t.Logf("setup (npm, build) took %s", time.Since(start).Round(time.Millisecond))

	// The servers' whole environment (e2e.Env), and the cluster selection if set
	// (scripts/k8s/ci.sh runs this test against the Kubernetes backend).
	baseEnv := e2e.Env(e2e.BackendEnv()...)
	suffix := strconv.Itoa(os.Getpid())

	// The binary's start-up check (engine reachable, image present) decides whether
	// the engine is usable at all.
	e2e.Serve(t, bin, baseEnv, "http", "e2e-preflight-"+suffix, "").Stop(t)

	cases := []struct {
		name, transport string
		auth            bool
	}{
		{"stdio", "stdio", false},
		{"http", "http", false},
		{"http_auth", "http", true},
		{"sse", "sse", false},
		{"sse_auth", "sse", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			defer func() { t.Logf("%s took %s", tc.name, time.Since(t0).Round(time.Millisecond)) }()
			instance := "e2e-" + strings.ReplaceAll(tc.name, "_", "-") + "-" + suffix
			if tc.transport == "stdio" {
				// client.mjs spawns the server with its own environment.
				env := append(append([]string{}, baseEnv...), "MCP_EXEC_INSTANCE="+instance)
				t.Cleanup(func() { e2e.AssertNoContainers(t, instance) })
				r := e2e.RunClient(t, node, dir, env, "--transport", "stdio", "--cmd", bin)
				e2e.ExpectPass(t, r)
				return
			}
			var token string
			if tc.auth {
				token = e2e.Random()
			}
			srv, err := e2e.StartServer(t, bin, baseEnv, tc.transport, instance, token)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"--transport", tc.transport, "--url", srv.Endpoint}
			if tc.auth {
				args = append(args, "--token", token)
			}
			r := e2e.RunClient(t, node, dir, baseEnv, args...)
			e2e.ExpectPass(t, r)
			if !tc.auth {
				return
			}

			e2eProbeAuth(t, srv, token)

			// The independent client with a wrong token must not get in.
			wrong := "wrong-" + e2e.Random()
			args = []string{"--transport", tc.transport, "--url", srv.Endpoint, "--token", wrong}
			r = e2e.RunClient(t, node, dir, baseEnv, args...)
			switch {
			case r.ExitCode == 0 || r.Report.OK:
				t.Errorf("client.mjs with a wrong token: exit %d, ok %t; want a failure; stderr:\n%s", r.ExitCode, r.Report.OK, r.Stderr)
			case len(r.Report.Passed) != 0:
				t.Errorf("client.mjs with a wrong token passed checks %v; stderr:\n%s", r.Report.Passed, r.Stderr)
			case !strings.Contains(r.Report.Error, "401") && !strings.Contains(r.Report.Error, "Unauthorized"):
				t.Errorf("client.mjs with a wrong token failed, but not with a 401: %q; stderr:\n%s", r.Report.Error, r.Stderr)
			default:
				t.Logf("wrong token refused as it should be: %s", r.Report.Error)
			}
			if strings.Contains(r.Stdout+r.Stderr, token) {
				t.Errorf("client.mjs with a wrong token saw the real token in its output")
			}
		})
	}
}

// e2eProbeAuth sends requests by hand, without, with a wrong and with the right
// X-MCP-AUTH header, and checks that only the right one gets past the server's door,
// and that no answer echoes the token.
func e2eProbeAuth(t *testing.T, s *e2e.Server, token string) {
	t.Helper()
	hc := &http.Client{Timeout: e2e.HTTPTimeout}
	wrong := "wrong-" + e2e.Random()
	headerCases := []struct {
		name string
		set  func(http.Header)
	}{
		{"no header", func(http.Header) {}},
		{"wrong header", func(h http.Header) { h.Set(e2e.AuthHeader, wrong) }},
		{"empty header", func(h http.Header) { h.Set(e2e.AuthHeader, "") }},
		{"token with a suffix", func(h http.Header) { h.Set(e2e.AuthHeader, token+"x") }},
		{"token prefix", func(h http.Header) { h.Set(e2e.AuthHeader, token[:len(token)-1]) }},
		{"wrong bearer token", func(h http.Header) { h.Set("Authorization", "Bearer "+wrong) }},
		{"empty bearer token", func(h http.Header) { h.Set("Authorization", "Bearer ") }},
		{"token under the Basic scheme", func(h http.Header) { h.Set("Authorization", "Basic "+token) }},
		{"token and a disagreeing bearer", func(h http.Header) { h.Set(e2e.AuthHeader, token); h.Set("Authorization", "Bearer "+wrong) }},
		{"bearer token and a disagreeing header", func(h http.Header) { h.Set(e2e.AuthHeader, wrong); h.Set("Authorization", "Bearer "+token) }},
	}
	probes := 0
	defer func() { t.Logf("auth probes: %d raw requests sent", probes) }()
	// do sends one request and returns its status, checking the answer for the token.
	do := func(method, u, body string, set func(http.Header)) int {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, u, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		set(req.Header)
		resp, err := hc.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, u, err)
			return 0
		}
		defer resp.Body.Close()
		probes++
		// An event stream that got through would not end: leave it unread.
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if strings.Contains(string(b), token) {
				t.Errorf("%s %s: the HTTP %d answer contains the token: %q", method, u, resp.StatusCode, b)
			}
		}
		for k, vs := range resp.Header {
			for _, v := range vs {
				if strings.Contains(v, token) {
					t.Errorf("%s %s: response header %s contains the token", method, u, k)
				}
			}
		}
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s: 401 with WWW-Authenticate %q, want a Bearer challenge", method, u, resp.Header.Get("WWW-Authenticate"))
		}
		return resp.StatusCode
	}
	expect401 := func(what, method, u, body string) {
		t.Helper()
		for _, h := range headerCases {
			if got := do(method, u, body, h.set); got != http.StatusUnauthorized {
				t.Errorf("%s with %s: %s %s got HTTP %d, want 401", what, h.name, method, u, got)
			}
		}
	}

	switch {
	case strings.HasSuffix(s.Endpoint, "/mcp"):
		expect401("initialize", http.MethodPost, s.Endpoint, e2e.InitializeReq)
		expect401("opening the stream", http.MethodGet, s.Endpoint, "")
		// Positive control: the right token gets through and opens a session, which
		// the same requests without the token must not be able to use.
		req, _ := http.NewRequest(http.MethodPost, s.Endpoint, strings.NewReader(e2e.InitializeReq))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(e2e.AuthHeader, token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("initialize with the token: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize with the token: HTTP %d, session %q; want 200 and a session", resp.StatusCode, sid)
		}
		inSession := func(h http.Header) { h.Set("Mcp-Session-Id", sid); h.Set("Mcp-Protocol-Version", "2025-06-18") }
		for _, hcase := range headerCases {
			set := func(h http.Header) { inSession(h); hcase.set(h) }
			if got := do(http.MethodPost, s.Endpoint, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, set); got != http.StatusUnauthorized {
				t.Errorf("tools/list in an open session with %s: got HTTP %d, want 401", hcase.name, got)
			}
			if got := do(http.MethodDelete, s.Endpoint, "", set); got != http.StatusUnauthorized {
				t.Errorf("DELETE of an open session with %s: got HTTP %d, want 401", hcase.name, got)
			}
		}
		// The same token as a bearer token is the same credential.
		if got := do(http.MethodPost, s.Endpoint, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
			func(h http.Header) { inSession(h); h.Set("Authorization", "Bearer "+token) }); got != http.StatusOK {
			t.Errorf("tools/list in the session with the token as Authorization: Bearer: HTTP %d, want 200", got)
		}
		if got := do(http.MethodDelete, s.Endpoint, "", func(h http.Header) { inSession(h); h.Set(e2e.AuthHeader, token) }); got/100 != 2 {
			t.Errorf("DELETE of the session with the token: HTTP %d, want 2xx", got)
		}

	case strings.HasSuffix(s.Endpoint, "/sse"):
		expect401("opening the stream", http.MethodGet, s.Endpoint, "")
		expect401("posting without a session", http.MethodPost, s.Endpoint+"?sessionid=nosuchsession", e2e.InitializeReq)
		// Positive control: the right token opens the stream and receives its POST
		// endpoint; POSTs there must still carry the token.
		ctx, cancel := context.WithTimeout(t.Context(), e2e.HTTPTimeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(e2e.AuthHeader, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s with the token: %v", s.Endpoint, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s with the token: HTTP %d, want 200", s.Endpoint, resp.StatusCode)
		}
		endpoint, err := e2eReadEndpoint(resp.Body)
		if err != nil {
			t.Fatalf("reading the endpoint event: %v", err)
		}
		post, err := url.Parse(s.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		post, err = post.Parse(endpoint)
		if err != nil {
			t.Fatalf("endpoint %q: %v", endpoint, err)
		}
		expect401("posting in an open session", http.MethodPost, post.String(), e2e.InitializeReq)
		if got := do(http.MethodPost, post.String(), e2e.InitializeReq, func(h http.Header) { h.Set("Authorization", "Bearer "+token) }); got/100 != 2 {
			t.Errorf("POST %s with the token: HTTP %d, want 2xx", post, got)
		}
	}
}

// e2eReadEndpoint reads an SSE stream up to the data of its first "endpoint" event.
func e2eReadEndpoint(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:") && event == "endpoint":
			return strings.TrimSpace(strings.TrimPrefix(line, "data:")), nil
		case line == "":
			event = ""
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the stream ended without an endpoint event")
}
