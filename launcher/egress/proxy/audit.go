package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mcp-exec/mcp-exec/launcher/egress"
)

// AuditMaxBytes bounds an audit file: past it the file is renamed to FILE.1 (replacing
// the one before) and a new FILE begins, so the audit takes at most twice this on disk.
const AuditMaxBytes = 64 << 20

// Audit writes the egress audit log: one JSON line per connection and, for a host with
// inject rules, one per request. A line holds metadata only (AuditLine): never a body,
// a header's value, a query string or a credential. It is safe for concurrent use.
type Audit struct {
	mu   sync.Mutex
	w    io.Writer
	f    *os.File // nil for a writer that is not a file (stdout)
	path string
	max  int64
	size int64
}

// OpenAudit opens the audit log at path for appending ("-": w, the server's stdout,
// never rotated).
func OpenAudit(path string, stdout io.Writer) (*Audit, error) {
	if path == "-" {
		return &Audit{w: stdout}, nil
	}
	a := &Audit{path: path, max: AuditMaxBytes}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Audit) open() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the egress audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening the egress audit log: %w", err)
	}
	a.f, a.w, a.size = f, f, st.Size()
	return nil
}

// Close closes the audit file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f, a.w = nil, io.Discard
	return err
}

// AuditLine is one line of the audit log.
type AuditLine struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"` // "connection" or "request"
	Profile string    `json:"profile"`
	// Channel is a random id per sandbox (one exec call, or one session's sandbox):
	// the lines of one sandbox share it.
	Channel string `json:"channel"`
	// ExecID, Session and Run name what the sandbox serves with the server log's keys
	// and values (backend.AuditLabel): a one-shot call's exec_id (and its background
	// run's hash), or a session's hash.
	ExecID  string `json:"exec_id,omitempty"`
	Session string `json:"session,omitempty"`
	Run     string `json:"run,omitempty"`
	// Host is the profile's entry that admitted the name (the name itself for an
	// exact entry); a name under a wildcard is the program's text, so it is a keyed
	// hash in HostHash, as in the server's log.
	Host        string   `json:"host,omitempty"`
	HostHash    string   `json:"host_hash,omitempty"`
	Port        int      `json:"port,omitempty"`
	Method      string   `json:"method"`
	Path        string   `json:"path,omitempty"` // requests to injected hosts: the path, no query
	Intercepted bool     `json:"intercepted,omitempty"`
	Injected    []string `json:"injected,omitempty"` // the header names set, never values
	Decision    string   `json:"decision"`
	Reason      string   `json:"reason,omitempty"`
	Status      int      `json:"status,omitempty"`
	BytesUp     int64    `json:"bytes_up"`
	BytesDown   int64    `json:"bytes_down"`
	DurationMS  int64    `json:"duration_ms"`
}

// write appends one line, rotating first when it would pass the bound. A failure to
// write is the server log's, once per failure: egress goes on.
func (a *Audit) write(l AuditLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil && a.size > 0 && a.size+int64(len(b)) > a.max {
		if err := a.rotate(); err != nil {
			return err
		}
	}
	n, err := a.w.Write(b)
	a.size += int64(n)
	return err
}

func (a *Audit) rotate() error {
	a.f.Close()
	a.f, a.w = nil, io.Discard
	if err := os.Rename(a.path, a.path+".1"); err != nil {
		return fmt.Errorf("rotating the egress audit log: %w", err)
	}
	return a.open()
}

// SetAudit makes the Server write its egress audit log to a (nil: none).
func (s *Server) SetAudit(a *Audit) { s.audit = a }

func (s *Server) auditConn(c *Channel, r *record, decision, host, hash string) {
	if s.audit == nil {
		return
	}
	s.writeAudit(AuditLine{
		Time: time.Now().UTC(), Event: "connection", Profile: c.p.Name(), Channel: c.id,
		ExecID: c.label.ExecID, Session: c.label.Session, Run: c.label.Run,
		Host: host, HostHash: hash, Port: r.port, Method: r.method, Intercepted: r.intercepted,
		Decision: decision, Reason: r.reason, BytesUp: r.up, BytesDown: r.down,
		DurationMS: time.Since(r.began).Milliseconds(),
	})
}

// auditRequest writes one request to an injected host: an exact entry of the
// profile, so the operator's text.
func (s *Server) auditRequest(c *Channel, host string, port int, rr *requestRecord, hs []egress.Header) {
	if s.audit == nil {
		return
	}
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.Name
	}
	path := rr.path
	if len(path) > maxAuditPath {
		path = path[:maxAuditPath] + "..."
	}
	s.writeAudit(AuditLine{
		Time: time.Now().UTC(), Event: "request", Profile: c.p.Name(), Channel: c.id,
		ExecID: c.label.ExecID, Session: c.label.Session, Run: c.label.Run,
		Host: host, Port: port, Method: rr.method, Path: path, Intercepted: true, Injected: names,
		Decision: rr.decision, Reason: rr.reason, Status: rr.status,
		BytesUp: rr.up, BytesDown: rr.down, DurationMS: time.Since(rr.began).Milliseconds(),
	})
}

// maxAuditPath bounds a path in the audit log (the program chooses it).
const maxAuditPath = 256

func (s *Server) writeAudit(l AuditLine) {
	if err := s.audit.write(l); err != nil {
		s.log.Warn().Err(err).Msg("egress audit: a line was not written")
	}
}
