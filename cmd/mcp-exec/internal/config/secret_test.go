package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestSecretNeverPrints: no way of formatting a Secret, alone or in a struct, shows it.
func TestSecretNeverPrints(t *testing.T) {
	const canary = "s3cr3t-CANARY-7f1e"
	s := Secret(canary)
	if s.Reveal() != canary || !s.Set() {
		t.Fatalf("Reveal: got %q (set %v), want the value", s.Reveal(), s.Set())
	}
	type holder struct {
		Token Secret
		P     *Secret
	}
	h := holder{Token: s, P: &s}
	var shown []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%T"} {
		shown = append(shown, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	shown = append(shown, fmt.Sprint(s), fmt.Sprintln(s, h))
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	shown = append(shown, string(js))
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Interface("i", s).Stringer("s", s).Any("h", h).Msg("")
	shown = append(shown, buf.String())
	for _, out := range shown {
		if strings.Contains(out, canary) || strings.Contains(out, fmt.Sprintf("%x", canary)) {
			t.Errorf("got %q, want the secret redacted", out)
		}
	}
	if got := fmt.Sprint(Secret("")); got != "" {
		t.Errorf("empty secret: got %q, want \"\"", got)
	}
	if !strings.Contains(string(js), `"Token":"[redacted]"`) {
		t.Errorf("JSON: got %s, want the token as [redacted]", js)
	}
}

// TestConfigDocListsEverySetting: the configuration page's table has a row for every
// setting of cfgFields, with its flag, variable and default, and no row for a
// setting that does not exist. The page is generated (TestConfigDocCurrent); this
// checks what the generator wrote, independently of it.
func TestConfigDocListsEverySetting(t *testing.T) {
	b, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // variable -> cells
	row := regexp.MustCompile("^\\| ([^|]+) \\| `(MCP_EXEC_[A-Z0-9_]+)` \\| ([^|]+) \\|")
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows[m[2]] = m[1:]
		}
	}
	known := map[string]bool{AuthTokenEnv: true}
	for _, f := range cfgFields {
		known[f.env] = true
		cells, ok := rows[f.env]
		if !ok {
			t.Errorf("docs/configuration.md: no row for %s (--%s)", f.env, f.flag)
			continue
		}
		if want := "`--" + f.flag + "`"; cells[0] != want {
			t.Errorf("docs/configuration.md row %s: flag %s, want %s", f.env, cells[0], want)
		}
		def, cell := "`"+f.def+"`", strings.TrimSpace(cells[2])
		switch {
		case f.def == cfgHostDefault:
			def = "host name"
		case f.def == "" && (strings.HasPrefix(cell, "(") || strings.HasPrefix(cell, "`--")):
			// Empty, said in words, or standing for another setting's value.
			def = cell
		}
		if !strings.Contains(cell, def) {
			t.Errorf("docs/configuration.md row %s: default %q, want it to say %s", f.env, cell, def)
		}
	}
	for env := range rows {
		if !known[env] {
			t.Errorf("docs/configuration.md: row for %s, which is no setting", env)
		}
	}
}
