package backend

import (
	"errors"
	"strings"
)

// Setting names one of the operator's settings by its flag, without the dashes:
// "engine-wait-s". Libraries name a setting this way and never by an environment
// variable: the variables belong to the command that reads them (cmd/mcp-exec's table
// of settings), which passes them in as Vars, so that a message can name both.
type Setting string

// String is the flag: "--engine-wait-s".
func (s Setting) String() string { return "--" + string(s) }

// Vars gives a setting's environment variable, "" when it has none; a nil Vars
// knows none. The command that reads the configuration has the one Vars, from its
// table of settings.
type Vars func(Setting) string

// Var is s's variable, or its flag when there is none.
func (v Vars) Var(s Setting) string {
	if v != nil {
		if name := v(s); name != "" {
			return name
		}
	}
	return s.String()
}

// Name is how a message names s: its flag, a comma and its variable
// ("--engine-wait-s, " and the variable), or the flag alone when s has none.
func (v Vars) Name(s Setting) string {
	if v != nil {
		if name := v(s); name != "" {
			return s.String() + ", " + name
		}
	}
	return s.String()
}

// SettingError is a failure the operator remedies with a setting. Its message is
// written by Text, which names the setting through the Vars it is given: Error gives
// none (the flag alone), and Spell gives the command's, which is how an error made
// deep in a library reaches the operator or the client naming the variable too.
type SettingError struct {
	Setting Setting
	Err     error             // what failed, for errors.Is and As; nil when Text says it all
	Text    func(Vars) string // the message
}

func (e *SettingError) Error() string { return e.Text(nil) }

func (e *SettingError) Unwrap() error { return e.Err }

// Spell is err's message with the text of every SettingError in its chain written
// with v. Wrapping (fmt.Errorf's %w, errors.Join) repeats the wrapped message
// verbatim, so each is found in the whole and replaced there.
func Spell(err error, v Vars) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if v == nil {
		return msg
	}
	var walk func(error)
	walk = func(e error) {
		if se, ok := e.(*SettingError); ok {
			msg = strings.Replace(msg, se.Error(), se.Text(v), 1)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if w := u.Unwrap(); w != nil {
				walk(w)
			}
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				walk(w)
			}
		}
	}
	walk(err)
	return msg
}

// Spelled is err with Spell's message, still wrapping err (errors.Is and As see
// through it); nil stays nil.
func Spelled(err error, v Vars) error {
	if err == nil || v == nil {
		return err
	}
	var se *SettingError
	if !errors.As(err, &se) {
		return err
	}
	return &spelled{msg: Spell(err, v), err: err}
}

type spelled struct {
	msg string
	err error
}

func (e *spelled) Error() string { return e.msg }
func (e *spelled) Unwrap() error { return e.err }
