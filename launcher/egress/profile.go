package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// DefaultPorts are the ports of a profile that names none.
var DefaultPorts = []int{443}

var profileName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Profile is one named set of hosts and ports, with optional per-call caps. It is
// immutable once parsed and safe for concurrent use.
type Profile struct {
	name     string
	hosts    []string            // canonical, as listed (wildcards as "*.suffix")
	exact    map[string]struct{} // canonical names
	suffixes []string            // ".suffix" of each wildcard
	ports    []int               // sorted, no duplicates
	maxConns int64
	maxBytes int64
	inject   map[string][]Header // canonical exact host -> headers, in name order
}

// MaxConnections returns the cap on connections opened per call; 0 means no cap.
func (p *Profile) MaxConnections() int64 { return p.maxConns }

// MaxBytes returns the cap on bytes carried both ways per call; 0 means no cap.
func (p *Profile) MaxBytes() int64 { return p.maxBytes }

// Name returns the profile's name.
func (p *Profile) Name() string { return p.name }

// Hosts returns the profile's hosts in canonical form, in the file's order.
func (p *Profile) Hosts() []string { return slices.Clone(p.hosts) }

// Ports returns the profile's ports, sorted.
func (p *Profile) Ports() []int { return slices.Clone(p.ports) }

// AllowName reports whether the profile lets a sandbox reach host on port, before any
// lookup. host is compared case-insensitively, with a trailing dot ignored and
// Unicode names taken in their IDNA A-label form. A refusal is a *Denial.
func (p *Profile) AllowName(host string, port int) error {
	if _, d := p.allow(host, port); d != nil {
		return d
	}
	return nil
}

// allow is AllowName returning the canonical name, which is the one to resolve.
func (p *Profile) allow(host string, port int) (string, *Denial) {
	name, d := canonicalName(host)
	if d != nil {
		d.Port = port
		return "", d
	}
	if !p.matches(name) {
		return "", deny(ReasonHostNotAllowed, name, port, "not in profile %q", p.name)
	}
	if _, ok := slices.BinarySearch(p.ports, port); !ok {
		return "", deny(ReasonPortNotAllowed, name, port, "port not in profile %q", p.name)
	}
	return name, nil
}

func (p *Profile) matches(name string) bool {
	return p.entry(name) != ""
}

// entry returns the profile's hosts entry that admits the canonical name: the name
// itself, or the "*.suffix" it falls under; "" when none does.
func (p *Profile) entry(name string) string {
	if _, ok := p.exact[name]; ok {
		return name
	}
	for _, s := range p.suffixes {
		// s starts with a dot and name has no empty label, so this is one or more
		// whole labels before the suffix, never the suffix itself.
		if strings.HasSuffix(name, s) {
			return "*" + s
		}
	}
	return ""
}

// Entry returns the profile's hosts entry that admits host, whatever the port, and
// host's canonical name: for an exact entry the two are equal; under a wildcard the
// entry is "*.suffix" and the name's leftmost labels are the program's choice. ok is
// false when no entry admits host.
func (p *Profile) Entry(host string) (entry, name string, ok bool) {
	name, d := canonicalName(host)
	if d != nil {
		return "", "", false
	}
	entry = p.entry(name)
	return entry, name, entry != ""
}

// Profiles is the operator's set of profiles, by name.
type Profiles struct {
	byName map[string]*Profile
}

// Names returns the profiles' names, sorted.
func (ps *Profiles) Names() []string {
	names := make([]string, 0, len(ps.byName))
	for n := range ps.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the profile called name.
func (ps *Profiles) Lookup(name string) (*Profile, bool) {
	p, ok := ps.byName[name]
	return p, ok
}

// LoadProfiles reads and parses the profiles file at path, resolving the inject
// rules' values with sec (ParseProfilesSecrets).
func LoadProfiles(path string, sec Secrets) (*Profiles, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading egress profiles: %w", err)
	}
	ps, err := ParseProfilesSecrets(data, sec)
	if err != nil {
		return nil, fmt.Errorf("egress profiles %s: %w", path, err)
	}
	return ps, nil
}

type rawProfile struct {
	Hosts          []string `json:"hosts"`
	Ports          *[]int   `json:"ports"`
	MaxConnections int64    `json:"max_connections"`
	MaxBytes       int64    `json:"max_bytes"`

	Inject map[string]rawInject `json:"inject"`
}

// ParseProfiles parses a profiles file:
//
//	{"profiles": {
//	  "pypi": {
//	    "hosts": ["pypi.org", "*.pythonhosted.org"],
//	    "ports": [443],
//	    "max_connections": 32,
//	    "max_bytes": 268435456
//	  }
//	}}
//
// A profile's name is 1 to 32 characters of [a-z0-9_-] starting with a letter (the
// names become a JSON-schema enum). hosts is required and not empty: exact names, or
// "*.suffix" where the wildcard is one whole leftmost label. "*.x.org" matches any name
// with one or more labels before x.org (a.x.org, a.b.x.org) and never x.org itself:
// list x.org too to allow it. A wildcard's suffix must be below a public suffix
// (golang.org/x/net/publicsuffix): *.pythonhosted.org is allowed, *.com, *.co.uk and
// *.github.io are refused. Names under a TLD that is not in the public suffix list
// (localhost, local, internal, lan, ...) and the special-use names of RFC 6761 and
// after (arpa, test, invalid, example, onion, alt) are refused, as are IP literals in
// every spelling. ports defaults to [443] when absent; an empty list is an error.
// max_connections (connections per call, each counted once its name and port pass the
// profile, before its lookup, so that the cap bounds the lookups too) and max_bytes
// (bytes both ways per call) are optional; absent or 0 means no cap. Unknown fields,
// duplicate profile names and trailing data are errors, and every error names the
// profile and the field. A file with inject rules needs ParseProfilesSecrets.
func ParseProfiles(data []byte) (*Profiles, error) { return ParseProfilesSecrets(data, nil) }

// ParseProfilesSecrets is ParseProfiles for a file that may have inject rules, whose
// values sec resolves:
//
//	"github": {
//	  "hosts": ["api.github.com", "codeload.github.com"],
//	  "inject": {
//	    "api.github.com": {"headers": {"Authorization": "Bearer ${env:GITHUB_TOKEN}"}}
//	  }
//	}
//
// inject's keys are exact names that hosts lists exactly (never a wildcard); each has
// headers to set on every request to that host, replacing any of the same name the
// program sent. A value is text with ${env:NAME} and ${file:/path} references, as in
// the upstreams file; it must resolve to a non-empty value a header can carry. Host,
// Content-Length, Transfer-Encoding, Proxy-* and the hop-by-hop headers are refused.
// Errors name the profile, the host and the header, never a value.
func ParseProfilesSecrets(data []byte, sec Secrets) (*Profiles, error) {
	var top struct {
		Profiles json.RawMessage `json:"profiles"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parsing: data after the top-level object")
	}
	if len(top.Profiles) == 0 || string(top.Profiles) == "null" {
		return nil, errors.New(`"profiles": missing`)
	}
	ps := &Profiles{byName: map[string]*Profile{}}
	dec = json.NewDecoder(bytes.NewReader(top.Profiles))
	dec.DisallowUnknownFields()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New(`"profiles": not an object`)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf(`"profiles": %w`, err)
		}
		name := tok.(string) // an object's keys are strings
		var raw rawProfile
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("profile %q: %w", name, err)
		}
		if _, dup := ps.byName[name]; dup {
			return nil, fmt.Errorf("profile %q: defined twice", name)
		}
		p, err := newProfile(name, raw, sec)
		if err != nil {
			return nil, fmt.Errorf("profile %q: %w", name, err)
		}
		ps.byName[name] = p
	}
	if len(ps.byName) == 0 {
		return nil, errors.New(`"profiles": empty`)
	}
	return ps, nil
}

func newProfile(name string, raw rawProfile, sec Secrets) (*Profile, error) {
	if !profileName.MatchString(name) {
		return nil, errors.New("name: want 1 to 32 characters of a-z, 0-9, _ and -, starting with a letter")
	}
	p := &Profile{name: name, exact: map[string]struct{}{}}
	if len(raw.Hosts) == 0 {
		return nil, errors.New("hosts: missing or empty")
	}
	seen := map[string]bool{}
	for i, h := range raw.Hosts {
		c, err := profileHost(h)
		if err != nil {
			return nil, fmt.Errorf("hosts[%d] %q: %w", i, h, err)
		}
		if seen[c] {
			return nil, fmt.Errorf("hosts[%d] %q: listed twice", i, h)
		}
		seen[c] = true
		p.hosts = append(p.hosts, c)
		if s, ok := strings.CutPrefix(c, "*"); ok {
			p.suffixes = append(p.suffixes, s)
		} else {
			p.exact[c] = struct{}{}
		}
	}
	ports := DefaultPorts
	if raw.Ports != nil {
		ports = *raw.Ports
		if len(ports) == 0 {
			return nil, errors.New("ports: empty (leave it out for 443 only)")
		}
	}
	for i, port := range ports {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("ports[%d]: %d is not a port (1 to 65535)", i, port)
		}
	}
	p.ports = slices.Compact(slices.Sorted(slices.Values(ports)))
	if raw.MaxConnections < 0 {
		return nil, fmt.Errorf("max_connections: %d is negative (0 or absent: no cap)", raw.MaxConnections)
	}
	if raw.MaxBytes < 0 {
		return nil, fmt.Errorf("max_bytes: %d is negative (0 or absent: no cap)", raw.MaxBytes)
	}
	p.maxConns, p.maxBytes = raw.MaxConnections, raw.MaxBytes
	inject, err := newInject(p, raw.Inject, sec)
	if err != nil {
		return nil, err
	}
	p.inject = inject
	return p, nil
}

// profileHost validates one entry of a profile's hosts and returns its canonical form.
func profileHost(h string) (string, error) {
	suffix, wild := strings.CutPrefix(h, "*.")
	if wild && !strings.Contains(strings.TrimSuffix(suffix, "."), ".") {
		return "", fmt.Errorf("a wildcard over a public suffix (%s) opens every site under it", suffix)
	}
	c, d := canonicalName(suffix)
	if d != nil {
		return "", errors.New(d.Detail)
	}
	if !wild {
		return c, nil
	}
	// A wildcard may open one site (everything under pythonhosted.org), never a
	// registry of sites: *.com, *.co.uk, *.github.io are refused.
	if _, err := publicsuffix.EffectiveTLDPlusOne(c); err != nil {
		return "", fmt.Errorf("a wildcard over a public suffix (%s) opens every site under it", c)
	}
	return "*." + c, nil
}
