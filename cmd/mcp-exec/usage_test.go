package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
)

func TestLoadHelp(t *testing.T) {
	fs := flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	_, err := loadConfig(fs, []string{"-h"}, func(string) string { return "" })
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("loadConfig(-h): got error %v, want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(out.String(), "Usage: mcp-exec") {
		t.Errorf("loadConfig(-h) output: got %q, want the usage text", out.String())
	}
}

// TestUsageSynopsis: the help text starts with the synopsis, before the subcommands
// and the settings (config.TestUsageListsEveryFlag).
func TestUsageSynopsis(t *testing.T) {
	fs := flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, _ = loadConfig(fs, nil, func(string) string { return "" }) // registers the flags, valid or not
	var buf bytes.Buffer
	usage(fs, &buf)
	help := buf.String()

	if first, _, _ := strings.Cut(help, "\n"); first != "Usage: mcp-exec [serve|run|selftest|healthcheck|version] [flags] [args]" {
		t.Errorf("usage first line: got %q, want the synopsis", first)
	}
}

// TestActiveDeadlineCoversSessions: the sandbox pods' backstop outlasts the longest exec
// by an hour and, with sessions on, a session's maximum lifetime with an exec begun at
// its end.
func TestActiveDeadlineCoversSessions(t *testing.T) {
	c := config.Config{MaxTimeout: 5 * time.Minute, SessionMaxLifetime: 24 * time.Hour}
	if got, want := activeDeadline(c), 65*time.Minute; got != want {
		t.Errorf("sessions off: got %v, want %v", got, want)
	}
	c.MaxSessions = 4
	if got, want := activeDeadline(c), 24*time.Hour+6*time.Minute; got != want {
		t.Errorf("sessions on, a day's lifetime: got %v, want %v", got, want)
	}
	c.SessionMaxLifetime = time.Minute
	if got, want := activeDeadline(c), 65*time.Minute; got != want {
		t.Errorf("sessions on, a minute's lifetime: got %v, want %v", got, want)
	}
}

// mapEnv turns a map into a getenv function.
func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestUnschedulableWait: --kube-unschedulable-wait-s 0 is no bound of its own, which
// kube.Options spells negative (its 0 is the default, 30 s).
func TestUnschedulableWait(t *testing.T) {
	for _, tc := range []struct{ flag, want time.Duration }{{0, -1}, {30 * time.Second, 30 * time.Second}, {time.Second, time.Second}} {
		if got := unschedulableWait(tc.flag); got != tc.want {
			t.Errorf("unschedulableWait(%v): got %v, want %v", tc.flag, got, tc.want)
		}
	}
}
