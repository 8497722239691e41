package egress

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const pypiFile = `{"profiles": {
  "pypi": {"hosts": ["pypi.org", "*.pythonhosted.org"], "max_connections": 32, "max_bytes": 268435456},
  "api": {"hosts": ["API.Example.COM.", "*.b.github.io", "bücher.de"], "ports": [8443, 443, 443]}
}}`

func mustProfile(t testing.TB, data, name string) *Profile {
	t.Helper()
	ps, err := ParseProfiles([]byte(data))
	if err != nil {
		t.Fatalf("ParseProfiles: %v", err)
	}
	p, ok := ps.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q): not found", name)
	}
	return p
}

func TestParseProfiles(t *testing.T) {
	ps, err := ParseProfiles([]byte(pypiFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ps.Names(), []string{"api", "pypi"}; !cmp.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	pypi, _ := ps.Lookup("pypi")
	api, _ := ps.Lookup("api")
	if _, ok := ps.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a profile`)
	}
	type view struct {
		Name           string
		Hosts          []string
		Ports          []int
		MaxConnections int64
		MaxBytes       int64
	}
	viewOf := func(p *Profile) view {
		return view{p.Name(), p.Hosts(), p.Ports(), p.MaxConnections(), p.MaxBytes()}
	}
	want := []view{
		{"pypi", []string{"pypi.org", "*.pythonhosted.org"}, []int{443}, 32, 268435456},
		{"api", []string{"api.example.com", "*.b.github.io", "xn--bcher-kva.de"}, []int{443, 8443}, 0, 0},
	}
	if diff := cmp.Diff(want, []view{viewOf(pypi), viewOf(api)}); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}
}

func TestLoadProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(path, []byte(pypiFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadProfiles(path, nil); err != nil {
		t.Errorf("LoadProfiles: %v", err)
	}
	_, err := LoadProfiles(filepath.Join(t.TempDir(), "missing.json"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadProfiles(missing) = %v, want ErrNotExist", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"profiles": {"x": {"hosts": ["*.com"]}}}`), 0o600)
	if _, err := LoadProfiles(bad, nil); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadProfiles(bad) = %v, want an error naming the file", err)
	}
}

// TestParseProfilesErrors: every refused profile is a start-up error naming the
// profile and the field.
func TestParseProfilesErrors(t *testing.T) {
	one := func(profile string) string { return `{"profiles": {"p": ` + profile + `}}` }
	for _, tc := range []struct {
		name, data string
		want       []string // substrings of the error
	}{
		{"not json", `{`, []string{"parsing"}},
		{"trailing data", `{"profiles": {"p": {"hosts": ["a.org"]}}} {}`, []string{"after the top-level"}},
		{"unknown top field", `{"profiles": {}, "x": 1}`, []string{"unknown field"}},
		{"no profiles", `{}`, []string{`"profiles": missing`}},
		{"null profiles", `{"profiles": null}`, []string{`"profiles": missing`}},
		{"profiles not object", `{"profiles": []}`, []string{"not an object"}},
		{"empty profiles", `{"profiles": {}}`, []string{`"profiles": empty`}},
		{"duplicate profile", `{"profiles": {"p": {"hosts": ["a.org"]}, "p": {"hosts": ["b.org"]}}}`, []string{`profile "p"`, "twice"}},
		{"unknown field", one(`{"hosts": ["a.org"], "port": [80]}`), []string{`profile "p"`, "unknown field"}},
		{"wrong type", one(`{"hosts": "a.org"}`), []string{`profile "p"`, "hosts"}},
		{"bad name upper", `{"profiles": {"PyPI": {"hosts": ["a.org"]}}}`, []string{`profile "PyPI"`, "name"}},
		{"bad name space", `{"profiles": {"a b": {"hosts": ["a.org"]}}}`, []string{`profile "a b"`, "name"}},
		{"bad name digit", `{"profiles": {"1a": {"hosts": ["a.org"]}}}`, []string{"name"}},
		{"bad name empty", `{"profiles": {"": {"hosts": ["a.org"]}}}`, []string{"name"}},
		{"bad name long", `{"profiles": {"` + strings.Repeat("a", 33) + `": {"hosts": ["a.org"]}}}`, []string{"name"}},
		{"no hosts", one(`{}`), []string{`profile "p"`, "hosts: missing"}},
		{"empty hosts", one(`{"hosts": []}`), []string{"hosts: missing or empty"}},
		{"duplicate host", one(`{"hosts": ["a.org", "A.org."]}`), []string{`hosts[1] "A.org."`, "twice"}},
		{"ipv4", one(`{"hosts": ["a.org", "127.0.0.1"]}`), []string{`hosts[1] "127.0.0.1"`, "IP address"}},
		{"ipv4 public", one(`{"hosts": ["8.8.8.8"]}`), []string{"IP address"}},
		{"ipv6", one(`{"hosts": ["::1"]}`), []string{"IP address"}},
		{"ipv6 bracketed", one(`{"hosts": ["[2606:4700::1111]"]}`), []string{"IP address"}},
		{"ipv6 zone", one(`{"hosts": ["fe80::1%eth0"]}`), []string{"IP address"}},
		{"decimal integer", one(`{"hosts": ["2130706433"]}`), []string{"numeric form"}},
		{"hex dotted", one(`{"hosts": ["0x7f.1"]}`), []string{"numeric form"}},
		{"hex integer", one(`{"hosts": ["0x7f000001"]}`), []string{"numeric form"}},
		{"octal dotted", one(`{"hosts": ["0177.0.0.1"]}`), []string{"numeric form"}},
		{"short dotted", one(`{"hosts": ["127.1"]}`), []string{"numeric form"}},
		{"fullwidth digits", one(`{"hosts": ["１２７.０.０.１"]}`), []string{"IP address"}},
		{"wildcard ip", one(`{"hosts": ["*.1.2.3.4"]}`), []string{"IP address"}},
		{"localhost", one(`{"hosts": ["localhost"]}`), []string{"single-label"}},
		{"sub localhost", one(`{"hosts": ["a.localhost"]}`), []string{"special-use"}},
		{"internal", one(`{"hosts": ["metadata.google.internal"]}`), []string{"special-use"}},
		{"local", one(`{"hosts": ["printer.local"]}`), []string{"special-use"}},
		{"home arpa", one(`{"hosts": ["router.home.arpa"]}`), []string{"special-use"}},
		{"in-addr arpa", one(`{"hosts": ["1.0.0.127.in-addr.arpa"]}`), []string{"special-use"}},
		{"onion", one(`{"hosts": ["abc.onion"]}`), []string{"special-use"}},
		{"unknown tld", one(`{"hosts": ["svc.cluster"]}`), []string{"public top-level"}},
		{"single label", one(`{"hosts": ["metadata"]}`), []string{"single-label"}},
		{"wildcard com", one(`{"hosts": ["*.com"]}`), []string{`"*.com"`, "public suffix"}},
		{"wildcard co.uk", one(`{"hosts": ["*.co.uk"]}`), []string{"public suffix"}},
		{"wildcard github.io", one(`{"hosts": ["*.github.io"]}`), []string{"public suffix"}},
		{"wildcard star", one(`{"hosts": ["*"]}`), []string{`"*"`}},
		{"wildcard twice", one(`{"hosts": ["*.*.x.org"]}`), []string{"not allowed"}},
		{"wildcard inside", one(`{"hosts": ["a.*.x.org"]}`), []string{"not allowed"}},
		{"wildcard partial", one(`{"hosts": ["a*.x.org"]}`), []string{"not allowed"}},
		{"underscore", one(`{"hosts": ["a_b.org"]}`), []string{"not allowed"}},
		{"space", one(`{"hosts": ["a b.org"]}`), []string{"not allowed"}},
		{"port in host", one(`{"hosts": ["a.org:443"]}`), []string{"not allowed"}},
		{"scheme", one(`{"hosts": ["https://a.org"]}`), []string{"not allowed"}},
		{"empty host", one(`{"hosts": [""]}`), []string{"empty host"}},
		{"empty label", one(`{"hosts": ["a..org"]}`), []string{"empty label"}},
		{"hyphen", one(`{"hosts": ["-a.org"]}`), []string{"hyphen"}},
		{"long label", one(`{"hosts": ["` + strings.Repeat("a", 64) + `.org"]}`), []string{"63"}},
		{"long name", one(`{"hosts": ["` + strings.Repeat("a.", 127) + `org"]}`), []string{"253"}},
		{"huge name", one(`{"hosts": ["` + strings.Repeat("a", 2000) + `"]}`), []string{"longer than 1024"}},
		{"long unicode label", one(`{"hosts": ["` + strings.Repeat("ü", 100) + `.de"]}`), []string{"63"}},
		{"bad punycode", one(`{"hosts": ["xn--a.org"]}`), []string{"internationalized"}},
		{"empty ports", one(`{"hosts": ["a.org"], "ports": []}`), []string{"ports: empty"}},
		{"port zero", one(`{"hosts": ["a.org"], "ports": [443, 0]}`), []string{"ports[1]: 0"}},
		{"port big", one(`{"hosts": ["a.org"], "ports": [65536]}`), []string{"ports[0]: 65536"}},
		{"port negative", one(`{"hosts": ["a.org"], "ports": [-1]}`), []string{"ports[0]"}},
		{"port string", one(`{"hosts": ["a.org"], "ports": ["443"]}`), []string{`profile "p"`, "ports"}},
		{"negative conns", one(`{"hosts": ["a.org"], "max_connections": -1}`), []string{"max_connections: -1"}},
		{"negative bytes", one(`{"hosts": ["a.org"], "max_bytes": -5}`), []string{"max_bytes: -5"}},
		{"fractional bytes", one(`{"hosts": ["a.org"], "max_bytes": 1.5}`), []string{"max_bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProfiles([]byte(tc.data))
			if err == nil {
				t.Fatalf("ParseProfiles succeeded, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestProfileAllowedHosts: the hosts a profile may name.
func TestProfileAllowedHosts(t *testing.T) {
	for _, h := range []string{
		"pypi.org", "files.pythonhosted.org", "*.pythonhosted.org", "github.io",
		"a.b.github.io", "*.s.example.co.uk", "xn--bcher-kva.de", "bücher.de", "EXAMPLE.org.",
		"*.x.org", "a-b.x.org", "1a.org", "0x7f.example.org", "1.2.3.example.org", "*.4.example.org", "my.app",
	} {
		if _, err := profileHost(h); err != nil {
			t.Errorf("profileHost(%q) = %v, want allowed", h, err)
		}
	}
}
