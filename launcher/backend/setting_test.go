package backend

import (
	"errors"
	"fmt"
	"testing"
)

var errWait = errors.New("engine away")

func waitError() *SettingError {
	return &SettingError{Setting: "engine-wait-s", Err: errWait, Text: func(v Vars) string {
		return fmt.Sprintf("%v (the limit: %s, or the call's timeout)", errWait, v.Name("engine-wait-s"))
	}}
}

func testVars(s Setting) string {
	return map[Setting]string{"engine-wait-s": "MCP_EXEC_ENGINE_WAIT_S"}[s]
}

// TestSpell: a SettingError names the flag alone; spelled with the command's Vars,
// wrapped or joined, it names the variable too, and still unwraps to what failed.
func TestSpell(t *testing.T) {
	se := waitError()
	if got, want := se.Error(), "engine away (the limit: --engine-wait-s, or the call's timeout)"; got != want {
		t.Errorf("Error: got %q, want %q", got, want)
	}
	spelled := "engine away (the limit: --engine-wait-s, MCP_EXEC_ENGINE_WAIT_S, or the call's timeout)"
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"alone", se, spelled},
		{"wrapped", fmt.Errorf("sandbox unavailable: %w", se), "sandbox unavailable: " + spelled},
		{"joined", errors.Join(errors.New("first"), fmt.Errorf("x: %w", waitError())), "first\nx: " + spelled},
		{"none", errors.New("plain"), "plain"},
	} {
		if got := Spell(tc.err, testVars); got != tc.want {
			t.Errorf("%s: Spell got %q, want %q", tc.name, got, tc.want)
		}
		err := Spelled(tc.err, testVars)
		if got := err.Error(); got != tc.want {
			t.Errorf("%s: Spelled got %q, want %q", tc.name, got, tc.want)
		}
		var got *SettingError
		if tc.name != "none" && (!errors.Is(err, errWait) || !errors.As(err, &got) || got.Setting != "engine-wait-s") {
			t.Errorf("%s: Spelled hides the error it wraps: %#v", tc.name, err)
		}
	}
	if got := Spell(se, nil); got != se.Error() {
		t.Errorf("Spell with nil Vars: got %q, want %q", got, se.Error())
	}
	if Spelled(nil, testVars) != nil {
		t.Error("Spelled(nil): got an error")
	}
}

func TestVars(t *testing.T) {
	var none Vars
	for _, tc := range []struct{ got, want string }{
		{none.Var("max-code-bytes"), "--max-code-bytes"},
		{none.Name("max-code-bytes"), "--max-code-bytes"},
		{Vars(testVars).Var("engine-wait-s"), "MCP_EXEC_ENGINE_WAIT_S"},
		{Vars(testVars).Name("engine-wait-s"), "--engine-wait-s, MCP_EXEC_ENGINE_WAIT_S"},
		{Vars(testVars).Name("pids"), "--pids"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
