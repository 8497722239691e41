package egress

import (
	"errors"
	"strings"
	"testing"
)

func TestAllowName(t *testing.T) {
	pypi := mustProfile(t, pypiFile, "pypi")
	api := mustProfile(t, pypiFile, "api")
	for _, tc := range []struct {
		p    *Profile
		host string
		port int
		want Reason // "" for allowed
	}{
		{pypi, "pypi.org", 443, ""},
		{pypi, "PyPI.ORG", 443, ""},
		{pypi, "pypi.org.", 443, ""},
		{pypi, "pypi.org..", 443, ReasonInvalidName},
		{pypi, "files.pythonhosted.org", 443, ""},
		{pypi, "a.b.c.pythonhosted.org", 443, ""},
		{pypi, "FILES.PythonHosted.org.", 443, ""},
		{pypi, "pythonhosted.org", 443, ReasonHostNotAllowed}, // *.x matches only below x
		{pypi, "evilpythonhosted.org", 443, ReasonHostNotAllowed},
		{pypi, "pythonhosted.org.evil.com", 443, ReasonHostNotAllowed},
		{pypi, "pypi.org.evil.com", 443, ReasonHostNotAllowed},
		{pypi, "www.pypi.org", 443, ReasonHostNotAllowed}, // exact means exact
		{pypi, "xpypi.org", 443, ReasonHostNotAllowed},
		{pypi, "pypi.org", 80, ReasonPortNotAllowed},
		{pypi, "pypi.org", 8443, ReasonPortNotAllowed},
		{pypi, "pypi.org", 0, ReasonPortNotAllowed},
		{pypi, "pypi.org", -443, ReasonPortNotAllowed},
		{pypi, "pypi.org", 65979, ReasonPortNotAllowed}, // 443 + 65536
		{pypi, "evil.com", 80, ReasonHostNotAllowed},    // the name is judged first
		{pypi, "", 443, ReasonInvalidName},
		{pypi, "*.pythonhosted.org", 443, ReasonInvalidName}, // a pattern is not a name
		{pypi, "127.0.0.1", 443, ReasonIPLiteral},
		{pypi, "[::1]", 443, ReasonIPLiteral},
		{pypi, "[::1", 443, ReasonIPLiteral},
		{pypi, "::ffff:127.0.0.1", 443, ReasonIPLiteral},
		{pypi, "2130706433", 443, ReasonIPLiteral},
		{pypi, "0x7f.1", 443, ReasonIPLiteral},
		{pypi, "0x7F.0.0.1", 443, ReasonIPLiteral},
		{pypi, "017700000001", 443, ReasonIPLiteral},
		{pypi, "１２７.０.０.１", 443, ReasonIPLiteral},
		{pypi, "127。0。0。1", 443, ReasonIPLiteral}, // ideographic full stops map to dots
		{pypi, "⑫⑦.0.0.1", 443, ReasonIPLiteral},  // circled numbers map to digits
		{pypi, "１２７.１", 443, ReasonIPLiteral},
		{pypi, "ｆｅ８０：：１", 443, ReasonInvalidName},
		{pypi, "［：：１］", 443, ReasonInvalidName},
		{pypi, "localhost", 443, ReasonSpecialName},
		{pypi, "localhost.", 443, ReasonSpecialName},
		{pypi, "pypi.org.localhost", 443, ReasonSpecialName},
		{pypi, "metadata.google.internal", 443, ReasonSpecialName},
		{pypi, "kubernetes.default.svc.cluster.local", 443, ReasonSpecialName},
		{pypi, "pypi.org:443", 443, ReasonInvalidName},
		{pypi, "pypi.org/simple", 443, ReasonInvalidName},
		{pypi, "pypi.org\x00.evil.com", 443, ReasonInvalidName},
		{pypi, "pypi.org ", 443, ReasonInvalidName},
		{pypi, "xn--a.org", 443, ReasonInvalidName},
		{pypi, "ｐｙｐｉ.org", 443, ""}, // fullwidth letters map to pypi.org, which is what is resolved
		{pypi, strings.Repeat("a", 5000), 443, ReasonInvalidName},
		{api, "api.example.com", 443, ""},
		{api, "api.example.com", 8443, ""},
		{api, "b.github.io", 443, ReasonHostNotAllowed},
		{api, "a.b.github.io", 443, ""},
		{api, "x.a.b.github.io", 443, ""},
		{api, "bücher.de", 443, ""},
		{api, "BÜCHER.de", 443, ""},
		{api, "xn--bcher-kva.de", 443, ""},
		{api, "XN--BCHER-KVA.DE.", 443, ""},
		{api, "bucher.de", 443, ReasonHostNotAllowed},
	} {
		err := tc.p.AllowName(tc.host, tc.port)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s.AllowName(%q, %d) = %v, want nil", tc.p.Name(), tc.host, tc.port, err)
			}
			continue
		}
		var d *Denial
		if !errors.As(err, &d) {
			t.Errorf("%s.AllowName(%q, %d) = %v, want a *Denial", tc.p.Name(), tc.host, tc.port, err)
			continue
		}
		if d.Reason != tc.want {
			t.Errorf("%s.AllowName(%q, %d) reason = %s (%v), want %s", tc.p.Name(), tc.host, tc.port, d.Reason, err, tc.want)
		}
		if d.Port != tc.port {
			t.Errorf("%s.AllowName(%q, %d) denial port = %d, want %d", tc.p.Name(), tc.host, tc.port, d.Port, tc.port)
		}
	}
}

func TestDenialText(t *testing.T) {
	pypi := mustProfile(t, pypiFile, "pypi")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{pypi.AllowName("Evil.com.", 443), `egress denied (host_not_allowed) "evil.com" port 443: not in profile "pypi"`},
		{pypi.AllowName("pypi.org", 22), `egress denied (port_not_allowed) "pypi.org" port 22: port not in profile "pypi"`},
		{pypi.AllowName("", 443), `egress denied (invalid_name) port 443: empty host name`},
		{pypi.AllowName("127.0.0.1", 443), `egress denied (ip_literal) "127.0.0.1" port 443: an IP address, not a name`},
		// The mapped spelling is caught as the address it maps to, not only by its last label.
		{pypi.AllowName("127。0。0。1", 443), `egress denied (ip_literal) "127。0。0。1" port 443: an IP address, not a name`},
		{pypi.AllowName("0x7f.1", 443), `egress denied (ip_literal) "0x7f.1" port 443: a numeric form of an IP address, not a name`},
		{&Denial{Reason: ReasonByteLimit}, `egress denied (byte_limit)`},
		{&Denial{Reason: ReasonInvalidName, Host: strings.Repeat("a", 100)}, `egress denied (invalid_name) "` + strings.Repeat("a", 80) + `..."`},
		{&Denial{Reason: ReasonInvalidName, Host: "a\nb.org"}, `egress denied (invalid_name) "a\nb.org"`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %s, want %s", got, tc.want)
		}
	}
}
