package egress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Secrets resolves the references in an inject rule's header value (${env:NAME},
// ${file:/path}), as the upstreams file's values are resolved: the server passes
// upstream.Resolver, so there is one reading of a reference.
type Secrets interface {
	Resolve(v string) (string, error)
}

// Header is one header an inject rule sets. Its value is never printed: every way of
// formatting a Header shows the name and "[redacted]".
type Header struct {
	Name  string // canonical MIME form
	value string
}

// Value returns the header's value, for the proxy that sets it.
func (h Header) Value() string { return h.value }

func (h Header) String() string               { return h.Name + ": [redacted]" }
func (h Header) GoString() string             { return h.String() }
func (h Header) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, h.String()) }
func (h Header) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// Inject returns the headers the profile sets on requests to host, an exact name of
// its hosts, in name order; nil when it has none for host. host is compared in
// canonical form.
func (p *Profile) Inject(host string) []Header {
	name, d := canonicalName(host)
	if d != nil {
		return nil
	}
	return p.inject[name]
}

// InjectHosts returns the hosts the profile has inject rules for, sorted.
func (p *Profile) InjectHosts() []string {
	hosts := make([]string, 0, len(p.inject))
	for h := range p.inject {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// InjectHosts returns every host that some profile has inject rules for, sorted and
// without duplicates.
func (ps *Profiles) InjectHosts() []string {
	var hosts []string
	for _, p := range ps.byName {
		hosts = append(hosts, p.InjectHosts()...)
	}
	return slices.Compact(slices.Sorted(slices.Values(hosts)))
}

type rawInject struct {
	Headers map[string]string `json:"headers"`
}

// refusedHeaders may not be injected: they frame the message or the connection (the
// proxy and the HTTP library own them), or name the site, which the proxy fixes to
// the host the rule is for.
var refusedHeaders = map[string]string{
	"Host":                "the proxy sets it to the rule's host",
	"Content-Length":      "it frames the message",
	"Transfer-Encoding":   "it frames the message",
	"Connection":          "it is hop-by-hop",
	"Keep-Alive":          "it is hop-by-hop",
	"Te":                  "it is hop-by-hop",
	"Trailer":             "it is hop-by-hop",
	"Upgrade":             "it is hop-by-hop",
	"Proxy-Authorization": "it is for a proxy, not the host",
	"Proxy-Connection":    "it is hop-by-hop",
}

// newInject checks a profile's inject rules against its hosts and resolves their
// values with sec. Errors name the host and the field, never a value.
func newInject(p *Profile, raw map[string]rawInject, sec Secrets) (map[string][]Header, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if sec == nil {
		return nil, errors.New("inject: no secret resolver (the server passes one; a bare ParseProfiles takes no inject rules)")
	}
	out := map[string][]Header{}
	for _, host := range slices.Sorted(func(yield func(string) bool) {
		for h := range raw {
			if !yield(h) {
				return
			}
		}
	}) {
		rule := raw[host]
		if strings.HasPrefix(host, "*") {
			return nil, fmt.Errorf("inject %q: exact names only: a wildcard would let the program choose which site gets the credential", host)
		}
		c, d := canonicalName(host)
		if d != nil {
			return nil, fmt.Errorf("inject %q: %s", host, d.Detail)
		}
		if _, ok := p.exact[c]; !ok {
			return nil, fmt.Errorf("inject %q: not in hosts (list it there exactly)", host)
		}
		if _, dup := out[c]; dup {
			return nil, fmt.Errorf("inject %q: the host has rules twice", host)
		}
		hs, err := injectHeaders(rule, sec)
		if err != nil {
			return nil, fmt.Errorf("inject %q: %w", host, err)
		}
		out[c] = hs
	}
	return out, nil
}

func injectHeaders(rule rawInject, sec Secrets) ([]Header, error) {
	if len(rule.Headers) == 0 {
		return nil, errors.New("headers: missing or empty")
	}
	seen := map[string]bool{}
	var hs []Header
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range rule.Headers {
			if !yield(n) {
				return
			}
		}
	}) {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("headers %q: not a header name", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if why, ok := refusedHeaders[canon]; ok {
			return nil, fmt.Errorf("headers %q: refused: %s", name, why)
		}
		if seen[canon] {
			return nil, fmt.Errorf("headers %q: named twice (header names are case-insensitive)", name)
		}
		seen[canon] = true
		// The resolver's error names the reference (the variable or the file),
		// never the value.
		v, err := sec.Resolve(rule.Headers[name])
		if err != nil {
			return nil, fmt.Errorf("headers %q: %w", name, err)
		}
		if v == "" {
			return nil, fmt.Errorf("headers %q: the value is empty", name)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("headers %q: the value has a character a header cannot carry (a line break or a control character)", name)
		}
		hs = append(hs, Header{Name: canon, value: v})
	}
	slices.SortFunc(hs, func(a, b Header) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}
