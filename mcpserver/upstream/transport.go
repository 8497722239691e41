package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport runs a stdio upstream as our child, as mcp.CommandTransport does,
// with its output read through a lineLimiter: one message over limit is discarded
// without ending the session (the SDK's own line limit would end it for every caller).
type stdioTransport struct {
	cmd   *exec.Cmd
	limit int
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// The lineLimiter hands out one line at a time, never more than limit: the
	// SDK's cap (twice that) is a second guard only.
	it := &mcp.IOTransport{Reader: nopReadCloser{newLineLimiter(stdout, t.limit)}, Writer: &child{stdin, t.cmd, 2 * time.Second},
		MaxLineLength: 2 * t.limit}
	return it.Connect(ctx)
}

type nopReadCloser struct{ io.Reader }

// Close does nothing: the session ends by closing the child's stdin (child.Close),
// and its output ends when it exits.
func (nopReadCloser) Close() error { return nil }

// child is the upstream's stdin; closing it ends the child as the MCP spec says:
// stdin closed, then SIGTERM after terminate, then SIGKILL.
type child struct {
	stdin     io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
}

func (c *child) Write(p []byte) (int, error) { return c.stdin.Write(p) }

func (c *child) Close() error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 && c.cmd.Process.Signal(sig) != nil {
			continue
		}
		select {
		case err := <-done:
			return err
		case <-time.After(c.terminate):
		}
	}
	return fmt.Errorf("the upstream's process %d did not exit", c.cmd.Process.Pid)
}

// httpClient is the client of an HTTP upstream: its configured headers go only to
// the configured URL's origin, a redirect to another origin is refused, and the
// responses are read through the message limit (wire).
func httpClient(s Server, limit int, base http.RoundTripper) *http.Client {
	u, _ := url.Parse(s.URL) // checked by Parse
	home := origin(u)
	return &http.Client{
		Transport: &wire{home: home, headers: s.Headers, limit: limit, base: base},
		// Refused, not followed without the headers: a 307 or 308 would send the call
		// (the program's arguments) to a server the operator did not name.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if to := origin(req.URL); to != home {
				return fmt.Errorf("upstream %q redirected to another origin, %s; refused (set its \"url\" to where the server is)", s.Name, to)
			}
			if len(via) >= 10 {
				return fmt.Errorf("upstream %q: stopped after 10 redirects", s.Name)
			}
			return nil
		},
	}
}

// origin is u's scheme, host and port, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// wire adds the configured headers to requests to home only, whatever redirect or
// endpoint the SDK follows (Go's client drops Authorization on a redirect to another
// host, but a RoundTripper that adds it on every hop would undo that), and bounds
// what is read of each response.
type wire struct {
	home    string
	headers map[string]string
	limit   int
	base    http.RoundTripper
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(w.headers) > 0 && origin(r.URL) == w.home {
		r = r.Clone(r.Context())
		for k, v := range w.headers {
			r.Header.Set(k, v)
		}
	}
	id := callID(r)
	resp, err := w.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		resp.Body = limited{io.LimitReader(resp.Body, int64(w.limit)), resp.Body}
	case mt == "text/event-stream":
		resp.Body = newSSELimiter(resp.Body, w.limit, id)
	case mt == "application/json" && id != nil:
		return w.readJSON(resp, id)
	case mt == "application/json":
		resp.Body = limited{io.LimitReader(resp.Body, int64(w.limit)), resp.Body}
	}
	return resp, nil
}

// readJSON reads an answer to the call id up to the limit; over it, the answer is
// replaced with tooLargeReply and the rest never read.
func (w *wire) readJSON(resp *http.Response, id json.RawMessage) (*http.Response, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(w.limit)+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(b) > w.limit {
		b = tooLargeReply(id, max(resp.ContentLength, -1))
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

type limited struct {
	io.Reader
	io.Closer
}

// callID is the id of the JSON-RPC call r sends, or nil (a notification, an answer,
// a GET).
func callID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(body).Decode(&m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil
	}
	return m.ID
}
