package egress

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSecrets resolves "${env:NAME}" from a map, as upstream.Resolver does from the
// environment.
type fakeSecrets map[string]string

func (f fakeSecrets) Resolve(v string) (string, error) {
	out := v
	for k, val := range f {
		out = strings.ReplaceAll(out, "${env:"+k+"}", val)
	}
	if strings.Contains(out, "${") {
		return "", fmt.Errorf("${env:...} in %q is not set", v)
	}
	return out, nil
}

const secretValue = "s3cr3t-TOKEN-value"

func TestInjectRules(t *testing.T) {
	ps, err := ParseProfilesSecrets([]byte(`{"profiles": {
	  "gh": {"hosts": ["API.GitHub.com.", "codeload.github.com", "*.github.com"],
	         "inject": {"api.github.com": {"headers": {"authorization": "Bearer ${env:TOK}", "X-Api-Key": "${env:TOK}"}}}},
	  "plain": {"hosts": ["pypi.org"]}
	}}`), fakeSecrets{"TOK": secretValue})
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := ps.Lookup("gh")
	got := gh.Inject("Api.GitHub.COM.")
	if len(got) != 2 || got[0].Name != "Authorization" || got[0].Value() != "Bearer "+secretValue ||
		got[1].Name != "X-Api-Key" || got[1].Value() != secretValue {
		t.Errorf("Inject(api.github.com) = %v with values %q, %q; want Authorization and X-Api-Key", got, got[0].Value(), got[1].Value())
	}
	if h := gh.Inject("codeload.github.com"); h != nil {
		t.Errorf("Inject(codeload.github.com) = %v, want none", h)
	}
	if diff := cmp.Diff([]string{"api.github.com"}, ps.InjectHosts()); diff != "" {
		t.Errorf("InjectHosts (-want +got):\n%s", diff)
	}
	// No way of printing a Header reaches its value.
	j, _ := json.Marshal(got)
	for _, s := range []string{fmt.Sprint(got), fmt.Sprintf("%v %+v %#v %s %q %x %d", got[0], got[0], got[0], got[0], got[0], got[0], got[0]), string(j)} {
		if strings.Contains(s, secretValue) || strings.Contains(s, fmt.Sprintf("%x", secretValue)) {
			t.Errorf("a formatted Header shows the value: %s", s)
		}
	}
}

func TestInjectErrors(t *testing.T) {
	sec := fakeSecrets{"TOK": secretValue, "NL": "a\r\nEvil: 1", "EMPTY": ""}
	rule := func(host, headers string) string {
		return `{"profiles": {"p": {"hosts": ["api.example.org", "*.example.net"], "inject": {"` + host + `": {"headers": ` + headers + `}}}}}`
	}
	for _, tc := range []struct {
		name, data string
		sec        Secrets
		want       []string
	}{
		{"wildcard", rule("*.example.net", `{"A": "${env:TOK}"}`), sec, []string{`profile "p"`, `inject "*.example.net"`, "exact names only"}},
		{"under a wildcard", rule("x.example.net", `{"A": "${env:TOK}"}`), sec, []string{`inject "x.example.net"`, "not in hosts"}},
		{"not in hosts", rule("other.org", `{"A": "${env:TOK}"}`), sec, []string{`inject "other.org"`, "not in hosts"}},
		{"no headers", rule("api.example.org", `{}`), sec, []string{`inject "api.example.org"`, "headers: missing"}},
		{"bad name", rule("api.example.org", `{"A B": "x"}`), sec, []string{`headers "A B"`, "not a header name"}},
		{"host", rule("api.example.org", `{"host": "x"}`), sec, []string{`headers "host"`, "refused"}},
		{"length", rule("api.example.org", `{"Content-Length": "1"}`), sec, []string{`headers "Content-Length"`, "refused"}},
		{"twice", rule("api.example.org", `{"A": "1", "a": "2"}`), sec, []string{"named twice"}},
		{"unset", rule("api.example.org", `{"A": "${env:NOPE}"}`), sec, []string{`profile "p"`, `inject "api.example.org"`, `headers "A"`, "not set"}},
		{"line break", rule("api.example.org", `{"A": "${env:NL}"}`), sec, []string{`headers "A"`, "line break"}},
		{"empty", rule("api.example.org", `{"A": "${env:EMPTY}"}`), sec, []string{`headers "A"`, "empty"}},
		{"unknown field", rule("api.example.org", `{"A": "1"}, "set": {}`), sec, []string{`profile "p"`, "unknown field"}},
		{"no resolver", rule("api.example.org", `{"A": "1"}`), nil, []string{`profile "p"`, "no secret resolver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProfilesSecrets([]byte(tc.data), tc.sec)
			if err == nil {
				t.Fatal("got no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secretValue) || strings.Contains(err.Error(), "Evil") {
				t.Errorf("the error shows a value: %q", err)
			}
		})
	}
}
