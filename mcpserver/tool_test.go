package mcpserver

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcp-exec/mcp-exec/launcher"
)

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Options
		want Options
	}{{
		name: "zero",
		want: Options{Name: "mcp-exec", Version: "dev", MaxCodeBytes: 1048576, MaxStdinBytes: 1048576,
			DefaultTimeout: 30 * time.Second, MaxTimeout: 300 * time.Second,
			MaxFiles: 32, MaxFileBytes: 8388608, MaxFilesBytes: 16777216},
	}, {
		name: "set values kept",
		in: Options{Name: "n", Version: "v", MaxCodeBytes: 1, MaxStdinBytes: 2,
			DefaultTimeout: time.Second, MaxTimeout: time.Minute,
			MaxFiles: 4, MaxFileBytes: 5, MaxFilesBytes: 6},
		want: Options{Name: "n", Version: "v", MaxCodeBytes: 1, MaxStdinBytes: 2,
			DefaultTimeout: time.Second, MaxTimeout: time.Minute,
			MaxFiles: 4, MaxFileBytes: 5, MaxFilesBytes: 6},
	}, {
		name: "default above max is lowered, negatives mean default",
		in:   Options{MaxCodeBytes: -1, DefaultTimeout: time.Hour, MaxTimeout: time.Minute, MaxFiles: -1, MaxFilesBytes: -5},
		want: Options{Name: "mcp-exec", Version: "dev", MaxCodeBytes: 1048576, MaxStdinBytes: 1048576,
			DefaultTimeout: time.Minute, MaxTimeout: time.Minute,
			MaxFiles: 32, MaxFileBytes: 8388608, MaxFilesBytes: 16777216},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.withDefaults()
			// Logger is not defaulted (its zero value is already silent) and
			// has unexported fields, so it is left out of the comparison.
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Options{}, "Logger")); diff != "" {
				t.Errorf("withDefaults (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLimitsOf: the runner's caps on a result and its interpreter, as the description
// states them; a zero or negative field is the launcher's default.
func TestLimitsOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   launcher.Options
		want runnerLimits
	}{
		{"zero", launcher.Options{}, runnerLimits{Python: "python3", MaxOutputBytes: 1048576, MaxOutputFileBytes: 8388608, MaxOutputFilesBytes: 16777216}},
		{"set values kept", launcher.Options{Python: "python3.13", MaxOutputBytes: 3, MaxFileBytes: 7, MaxFilesBytes: 8},
			runnerLimits{Python: "python3.13", MaxOutputBytes: 3, MaxOutputFileBytes: 7, MaxOutputFilesBytes: 8}},
		{"negatives mean default", launcher.Options{MaxOutputBytes: -1, MaxFilesBytes: -5},
			runnerLimits{Python: "python3", MaxOutputBytes: 1048576, MaxOutputFileBytes: 8388608, MaxOutputFilesBytes: 16777216}},
	} {
		if diff := cmp.Diff(tt.want, limitsOf(tt.in)); diff != "" {
			t.Errorf("%s: limitsOf (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestEffectiveTimeout(t *testing.T) {
	o := Options{}.withDefaults()
	ptr := func(v wholeSeconds) *wholeSeconds { return &v }
	tests := []struct {
		name    string
		in      *wholeSeconds
		want    time.Duration
		wantErr string
	}{
		{"absent", nil, 30 * time.Second, ""},
		{"one", ptr(1), time.Second, ""},
		{"max", ptr(300), 300 * time.Second, ""},
		{"over max", ptr(301), 300 * time.Second, ""},
		{"would overflow Duration", ptr(1e18), 300 * time.Second, ""},
		{"max int64", ptr(math.MaxInt64), 300 * time.Second, ""},
		{"zero", ptr(0), 0, "timeout_s is 0; it must be a whole number of seconds from 1 to 300 (absent means 30)"},
		{"min int64", ptr(math.MinInt64), 0, "timeout_s is -9223372036854775808;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := effectiveTimeout(tt.in, o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error: got %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got (%v, %v), want (%v, nil)", got, err, tt.want)
			}
		})
	}
}

func TestWholeSecondsUnmarshal(t *testing.T) {
	tests := []struct {
		in   string
		want wholeSeconds
	}{
		{"5", 5},
		{"10.0", 10},
		{"1e+300", math.MaxInt64},
		{"-1e+300", math.MinInt64},
		{"9223372036854775808", math.MaxInt64},
	}
	for _, tt := range tests {
		var got wholeSeconds
		if err := got.UnmarshalJSON([]byte(tt.in)); err != nil || got != tt.want {
			t.Errorf("UnmarshalJSON(%s): got (%d, %v), want (%d, nil)", tt.in, got, err, tt.want)
		}
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		in   int
		want string
	}{{1048576, "1 MiB"}, {3 << 20, "3 MiB"}, {65536, "64 KiB"}, {1000, "1000 bytes"}, {1048577, "1048577 bytes"}}
	for _, tt := range tests {
		if got := size(tt.in); got != tt.want {
			t.Errorf("size(%d): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestDescriptionFollowsOptions checks the numbers a model relies on come from Options
// and from the runner's.
func TestDescriptionFollowsOptions(t *testing.T) {
	d := description(Options{DefaultTimeout: 10 * time.Second, MaxTimeout: time.Minute,
		MaxCodeBytes: 2 << 20, MaxStdinBytes: 1000,
		MaxFiles: 7, MaxFileBytes: 3 << 20, MaxFilesBytes: 5 << 20}.withDefaults(),
		limitsOf(launcher.Options{Python: "python3.12", MaxOutputBytes: 64 << 10, MaxFileBytes: 100, MaxFilesBytes: 4 << 10}))
	for _, want := range []string{"(python3.12)", "defaults to 10 s", "capped at 60 s", "capped at 64 KiB",
		"code is limited to 2 MiB", "stdin to 1000 bytes", "no network", "/tmp", "matplotlib",
		"Input files: at most 7, each at most 3 MiB and 5 MiB together", "come back up to 100 bytes each and 4 KiB together",
		"/tmp/outputs", "plt.show()", "PNG images", `"files"`, "working directory /tmp", `"encoding": "base64"`} {
		if !strings.Contains(d, want) {
			t.Errorf("description: got %q, want it to contain %q", d, want)
		}
	}
}
