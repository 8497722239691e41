package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
	"github.com/mcp-exec/mcp-exec/launcher/process"
	"github.com/mcp-exec/mcp-exec/mcpserver"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

const cfgTestHost = "testhost"

// cfgTestCanary is a token that must never show up in anything printed.
const cfgTestCanary = "canary-7f3a9c2e51b84d06-SECRET"

// cfgStubHostname makes the default --instance predictable.
func cfgStubHostname(t *testing.T) {
	t.Helper()
	old := cfgHostname
	cfgHostname = func() (string, error) { return cfgTestHost, nil }
	t.Cleanup(func() { cfgHostname = old })
}

// cfgEnv turns a map into a getenv function.
func cfgEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// cfgLoad runs Load on a fresh, silent flag set.
func cfgLoad(args []string, env map[string]string) (Config, error) {
	fs := flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return Load(fs, args, cfgEnv(env))
}

func cfgWantDefaults() Config {
	c := Config{
		Transport:      "stdio",
		Backend:        "docker",
		KubePullPolicy: "IfNotPresent",
		KubeNamespace:  "mcp-exec-sandbox",
		Addr:           ":8080",
		DefaultTimeout: 30 * time.Second,
		MaxTimeout:     300 * time.Second,
		MaxOutputBytes: 1048576,
		MaxStdinBytes:  1048576,
		MaxCodeBytes:   1048576,
		Python:         "python3",
		Image:          "mcp-exec/python-sandbox:v1",
		Memory:         256 << 20,
		Pids:           128,
		CPUs:           1.0,
		TmpfsSize:      64 << 20,
		MaxConcurrent:  2,
		MaxQueue:       64,
		ShutdownGrace:  30 * time.Second,
		EngineWait:     60 * time.Second,
		MaxFiles:       32,
		MaxFileBytes:   8 << 20,
		MaxFilesBytes:  16 << 20,
		PoolSize:       2,
		Languages:      "python,javascript,typescript,bash",
		Instance:       cfgTestHost,
		LogLevel:       "info",
		LogFormat:      "auto",
	}
	c.HTTPMaxRequests, c.HTTPBodyTimeout = 256, 60*time.Second
	c.MaxSessions, c.SessionIdleTimeout, c.SessionMaxLifetime, c.SessionMemory = 4, 10*time.Minute, time.Hour, 512<<20
	c.SessionPoolSize = 1
	c.UpstreamMaxSessions, c.UpstreamIdleTimeout = 16, 5*time.Minute
	c.MaxBackgroundRuns, c.RunTTL, c.RunResultsMaxBytes = 8, 15*time.Minute, 160<<20
	c.KubeUnschedulable = 30 * time.Second
	return c
}

func TestLoadDefaults(t *testing.T) {
	cfgStubHostname(t)
	got, err := cfgLoad(nil, nil)
	if err != nil {
		t.Fatalf("Load: got error %v, want nil", err)
	}
	if diff := cmp.Diff(cfgWantDefaults(), got); diff != "" {
		t.Errorf("Load defaults mismatch (-want +got):\n%s", diff)
	}
	if got.TokenSet() {
		t.Errorf("TokenSet: got true, want false")
	}
}

func TestLoadEnv(t *testing.T) {
	cfgStubHostname(t)
	env := map[string]string{
		"MCP_EXEC_TRANSPORT":         "http",
		"MCP_EXEC_ADDR":              "127.0.0.1:9000",
		"MCP_EXEC_DEFAULT_TIMEOUT_S": "10",
		"MCP_EXEC_MAX_TIMEOUT_S":     "60",
		"MCP_EXEC_MAX_OUTPUT_BYTES":  "2m",
		"MCP_EXEC_MAX_STDIN_BYTES":   "4096",
		"MCP_EXEC_MAX_CODE_BYTES":    "512k",
		"MCP_EXEC_PYTHON":            "/usr/bin/python3.12",
		"MCP_EXEC_AUTH_TOKEN":        "tok",
		"MCP_EXEC_IMAGE":             "example/sandbox:v2",
		"MCP_EXEC_MEMORY":            "1g",
		"MCP_EXEC_PIDS":              "64",
		"MCP_EXEC_CPUS":              "0.5",
		"MCP_EXEC_TMPFS_SIZE":        "16m",
		"MCP_EXEC_ENGINE_HOST":       "unix:///run/podman/podman.sock",
		"MCP_EXEC_RUNTIME":           "runsc",
		"MCP_EXEC_MAX_CONCURRENT":    "2",
		"MCP_EXEC_MAX_QUEUE":         "0",
		"MCP_EXEC_POOL_SIZE":         "0",
		"MCP_EXEC_MAX_FILES":         "3",
		"MCP_EXEC_MAX_FILE_BYTES":    "1m",
		"MCP_EXEC_MAX_FILES_BYTES":   "2m",
		"MCP_EXEC_STATELESS":         "true",
		"MCP_EXEC_HTTP_MAX_REQUESTS": "50",
		"MCP_EXEC_SHUTDOWN_GRACE_S":  "5",
		"MCP_EXEC_ENGINE_WAIT_S":     "7",
		"MCP_EXEC_PRELOAD":           "numpy,pandas",
		"MCP_EXEC_INSTANCE":          "prod-1",
		"MCP_EXEC_LOG_LEVEL":         "debug",
		"MCP_EXEC_LOG_FORMAT":        "console",
	}
	want := Config{
		Transport:      "http",
		Backend:        "docker",
		KubePullPolicy: "IfNotPresent",
		KubeNamespace:  "mcp-exec-sandbox",
		Addr:           "127.0.0.1:9000",
		DefaultTimeout: 10 * time.Second,
		MaxTimeout:     60 * time.Second,
		MaxOutputBytes: 2 << 20,
		MaxStdinBytes:  4096,
		MaxCodeBytes:   512 << 10,
		MaxFiles:       3,
		MaxFileBytes:   1 << 20,
		MaxFilesBytes:  2 << 20,
		Python:         "/usr/bin/python3.12",
		AuthToken:      "tok",
		Image:          "example/sandbox:v2",
		Memory:         1 << 30,
		Pids:           64,
		CPUs:           0.5,
		TmpfsSize:      16 << 20,
		EngineHost:     "unix:///run/podman/podman.sock",
		Runtime:        "runsc",
		MaxConcurrent:  2,
		MaxQueue:       0,
		Stateless:      true,
		ShutdownGrace:  5 * time.Second,
		EngineWait:     7 * time.Second,
		PoolSize:       0,
		Preload:        "numpy,pandas",
		Languages:      "python,javascript,typescript,bash",
		Instance:       "prod-1",
		LogLevel:       "debug",
		LogFormat:      "console",
	}
	want.HTTPMaxRequests, want.HTTPBodyTimeout = 50, 60*time.Second
	env["MCP_EXEC_MAX_SESSIONS"], env["MCP_EXEC_SESSION_IDLE_TIMEOUT_S"] = "0", "5"
	env["MCP_EXEC_SESSION_MAX_LIFETIME_S"], env["MCP_EXEC_SESSION_MEMORY"] = "60", "1g"
	want.MaxSessions, want.SessionIdleTimeout, want.SessionMaxLifetime, want.SessionMemory = 0, 5*time.Second, time.Minute, 1<<30
	env["MCP_EXEC_MAX_SESSIONS_PER_IDENTITY"], want.MaxSessionsPerIdentity = "2", 2
	env["MCP_EXEC_SESSION_POOL_SIZE"], want.SessionPoolSize = "0", 0
	env["MCP_EXEC_UPSTREAM_MAX_SESSIONS"], want.UpstreamMaxSessions = "3", 3
	env["MCP_EXEC_UPSTREAM_IDLE_TIMEOUT_S"], want.UpstreamIdleTimeout = "7", 7*time.Second
	env["MCP_EXEC_MAX_BACKGROUND_RUNS"], want.MaxBackgroundRuns = "5", 5
	env["MCP_EXEC_MAX_BACKGROUND_RUNS_PER_IDENTITY"], want.MaxBackgroundRunsPerIdentity = "2", 2
	env["MCP_EXEC_RUN_TTL_S"], want.RunTTL = "30", 30*time.Second
	env["MCP_EXEC_RUN_RESULTS_MAX_BYTES"], want.RunResultsMaxBytes = "100m", 100<<20
	env["MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S"], want.KubeUnschedulable = "90", 90*time.Second
	got, err := cfgLoad(nil, env)
	if err != nil {
		t.Fatalf("Load: got error %v, want nil", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load from env mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadFlagWinsOverEnv(t *testing.T) {
	cfgStubHostname(t)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		edit func(*Config) // applied to the defaults to get the wanted Config
	}{
		{
			name: "transport",
			env:  map[string]string{"MCP_EXEC_TRANSPORT": "http"},
			args: []string{"--transport", "sse"},
			edit: func(c *Config) { c.Transport = "sse" },
		},
		{
			name: "memory",
			env:  map[string]string{"MCP_EXEC_MEMORY": "1g"},
			args: []string{"--memory=512m"},
			edit: func(c *Config) { c.Memory = 512 << 20 },
		},
		{
			name: "timeouts",
			env:  map[string]string{"MCP_EXEC_DEFAULT_TIMEOUT_S": "5", "MCP_EXEC_MAX_TIMEOUT_S": "10"},
			args: []string{"-default-timeout-s", "100", "--max-timeout-s", "1000"},
			edit: func(c *Config) { c.DefaultTimeout, c.MaxTimeout = 100*time.Second, 1000*time.Second },
		},
		{
			name: "cpus",
			env:  map[string]string{"MCP_EXEC_CPUS": "8"},
			args: []string{"--cpus", "1.5"},
			edit: func(c *Config) { c.CPUs = 1.5 },
		},
		{
			name: "env still applies to other fields",
			env:  map[string]string{"MCP_EXEC_PIDS": "32", "MCP_EXEC_MAX_QUEUE": "7"},
			args: []string{"--pids", "16"},
			edit: func(c *Config) { c.Pids, c.MaxQueue = 16, 7 },
		},
		{
			name: "instance",
			env:  map[string]string{"MCP_EXEC_INSTANCE": "from-env"},
			args: []string{"--instance", "from-flag"},
			edit: func(c *Config) { c.Instance = "from-flag" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := cfgWantDefaults()
			tt.edit(&want)
			got, err := cfgLoad(tt.args, tt.env)
			if err != nil {
				t.Fatalf("Load: got error %v, want nil", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Load mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadBadEnvNamesVariable(t *testing.T) {
	cfgStubHostname(t)
	tests := []struct {
		env, value string
		args       []string
	}{
		{"MCP_EXEC_DEFAULT_TIMEOUT_S", "30s", nil},
		{"MCP_EXEC_MAX_TIMEOUT_S", "abc", nil},
		{"MCP_EXEC_MAX_TIMEOUT_S", "99999999999999", nil}, // overflows time.Duration
		{"MCP_EXEC_MAX_OUTPUT_BYTES", "lots", nil},
		{"MCP_EXEC_MAX_STDIN_BYTES", "-1", nil},
		{"MCP_EXEC_MAX_CODE_BYTES", "1x", nil},
		{"MCP_EXEC_MEMORY", "256q", nil},
		{"MCP_EXEC_MEMORY", "1e30g", nil}, // overflows int64
		{"MCP_EXEC_PIDS", "many", nil},
		{"MCP_EXEC_CPUS", "one", nil},
		{"MCP_EXEC_TMPFS_SIZE", "big", nil},
		{"MCP_EXEC_MAX_CONCURRENT", "1.5", nil},
		{"MCP_EXEC_MAX_QUEUE", "x", nil},
		// A bad variable is an error even when the flag overrides it.
		{"MCP_EXEC_MEMORY", "nonsense", []string{"--memory", "1g"}},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			_, err := cfgLoad(tt.args, map[string]string{tt.env: tt.value})
			if err == nil {
				t.Fatalf("Load: got nil error, want one naming %s", tt.env)
			}
			if !strings.Contains(err.Error(), tt.env) {
				t.Errorf("Load error: got %q, want it to name %s", err, tt.env)
			}
		})
	}
}

func TestLoadBadFlag(t *testing.T) {
	cfgStubHostname(t)
	for _, args := range [][]string{
		{"--memory", "lots"},
		{"--max-timeout-s", "1m"},
		{"--no-such-flag"},
	} {
		if _, err := cfgLoad(args, nil); err == nil {
			t.Errorf("Load(%q): got nil error, want one", args)
		}
	}
}

func TestValidateErrorsNameFlagAndVariable(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // substring of the error
	}{
		{"transport", func(c *Config) { c.Transport = "grpc" }, "--transport (MCP_EXEC_TRANSPORT) must be one of stdio, http, sse"},
		{"addr empty for http", func(c *Config) { c.Transport, c.Addr = "http", "" }, "--addr (MCP_EXEC_ADDR) must be set"},
		{"addr malformed for sse", func(c *Config) { c.Transport, c.Addr = "sse", "8080" }, "--addr (MCP_EXEC_ADDR) must be host:port"},
		{"max timeout zero", func(c *Config) { c.MaxTimeout = 0 }, "--max-timeout-s (MCP_EXEC_MAX_TIMEOUT_S) must be at least 1, got 0"},
		{"default timeout zero", func(c *Config) { c.DefaultTimeout = 0 }, "--default-timeout-s (MCP_EXEC_DEFAULT_TIMEOUT_S) must be at least 1, got 0"},
		{"code bytes zero", func(c *Config) { c.MaxCodeBytes = 0 }, "--max-code-bytes (MCP_EXEC_MAX_CODE_BYTES) must be at least 1, got 0"},
		{"code bytes too big", func(c *Config) { c.MaxCodeBytes = 65 << 20 }, "--max-code-bytes (MCP_EXEC_MAX_CODE_BYTES) must be at most 64m, got 65m"},
		{"stdin bytes too big", func(c *Config) { c.MaxStdinBytes = 1 << 30 }, "--max-stdin-bytes (MCP_EXEC_MAX_STDIN_BYTES) must be at most 64m, got 1g"},
		{"output bytes too small", func(c *Config) { c.MaxOutputBytes = 1000 }, "--max-output-bytes (MCP_EXEC_MAX_OUTPUT_BYTES) must be at least 1k, got 1000"},
		{"output bytes too big", func(c *Config) { c.MaxOutputBytes = 64<<20 + 1 }, "--max-output-bytes (MCP_EXEC_MAX_OUTPUT_BYTES) must be at most 64m"},
		{"python", func(c *Config) { c.Python = "" }, "--python (MCP_EXEC_PYTHON) must not be empty"},
		{"image", func(c *Config) { c.Image = "" }, "--image (MCP_EXEC_IMAGE)"},
		{"memory", func(c *Config) { c.Memory = 8 << 20 }, "--memory (MCP_EXEC_MEMORY) must be at least 16m, got 8m"},
		{"sessions", func(c *Config) { c.MaxSessions = -1 }, "--max-sessions (MCP_EXEC_MAX_SESSIONS) must be from 0 to 256, got -1"},
		{"sessions per identity", func(c *Config) { c.MaxSessionsPerIdentity = 257 }, "--max-sessions-per-identity (MCP_EXEC_MAX_SESSIONS_PER_IDENTITY) must be from -1 to 256, got 257"},
		{"session idle", func(c *Config) { c.SessionIdleTimeout = 0 }, "--session-idle-timeout-s (MCP_EXEC_SESSION_IDLE_TIMEOUT_S) must be at least 1, got 0"},
		{"background runs", func(c *Config) { c.MaxBackgroundRuns = 1025 }, "--max-background-runs (MCP_EXEC_MAX_BACKGROUND_RUNS) must be from 0 to 1024, got 1025"},
		{"run ttl", func(c *Config) { c.RunTTL = 0 }, "--run-ttl-s (MCP_EXEC_RUN_TTL_S) must be at least 1, got 0"},
		{"run results below one result", func(c *Config) { c.RunResultsMaxBytes = 16 << 20 }, "--run-results-max-bytes (MCP_EXEC_RUN_RESULTS_MAX_BYTES) must be 0 or at least 18496k, the most one background run's result can take with --max-output-bytes 1m and --max-files-bytes 16m"},
		{"run results negative", func(c *Config) { c.RunResultsMaxBytes = -1 }, "--run-results-max-bytes (MCP_EXEC_RUN_RESULTS_MAX_BYTES) must be 0 or more, got -1"},
		{"session lifetime", func(c *Config) { c.SessionMaxLifetime = 8 * 24 * time.Hour }, "--session-max-lifetime-s (MCP_EXEC_SESSION_MAX_LIFETIME_S) must be from 0 to 604800"},
		{"session memory", func(c *Config) { c.SessionMemory = 8 << 20 }, "--session-memory (MCP_EXEC_SESSION_MEMORY) must be at least 16m, got 8m"},
		{"unschedulable wait negative", func(c *Config) { c.KubeUnschedulable = -time.Second },
			"--kube-unschedulable-wait-s (MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S) must be from 0 to 120, got -1"},
		{"unschedulable wait past the start timeout", func(c *Config) { c.KubeUnschedulable = 121 * time.Second },
			"--kube-unschedulable-wait-s (MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S) must be from 0 to 120, got 121"},
		{"pids", func(c *Config) { c.Pids = 4 }, "--pids (MCP_EXEC_PIDS) must be at least 8, got 4"},
		{"cpus zero", func(c *Config) { c.CPUs = 0 }, "--cpus (MCP_EXEC_CPUS) must be more than 0 and at most 64, got 0"},
		{"cpus too many", func(c *Config) { c.CPUs = 65 }, "--cpus (MCP_EXEC_CPUS)"},
		{"cpus NaN", func(c *Config) { c.CPUs = math.NaN() }, "--cpus (MCP_EXEC_CPUS)"},
		{"tmpfs", func(c *Config) { c.TmpfsSize = 512 << 10 }, "--tmpfs-size (MCP_EXEC_TMPFS_SIZE) must be at least 1m, got 512k"},
		{"engine host", func(c *Config) { c.EngineHost = "/var/run/docker.sock" }, "--engine-host (MCP_EXEC_ENGINE_HOST)"},
		{"runtime", func(c *Config) { c.Runtime = "run sc" }, "--runtime (MCP_EXEC_RUNTIME)"},
		{"max concurrent", func(c *Config) { c.MaxConcurrent = 0 }, "--max-concurrent (MCP_EXEC_MAX_CONCURRENT) must be at least 1, got 0"},
		{"max queue", func(c *Config) { c.MaxQueue = -1 }, "--max-queue (MCP_EXEC_MAX_QUEUE) must be at least 0, got -1"},
		{"pool size", func(c *Config) { c.PoolSize = -1 }, "--pool-size (MCP_EXEC_POOL_SIZE) must be from 0 to 64, got -1"},
		{"session pool size", func(c *Config) { c.SessionPoolSize = 65 }, "--session-pool-size (MCP_EXEC_SESSION_POOL_SIZE) must be from 0 to 64, got 65"},
		{"preload", func(c *Config) { c.Preload = "numpy;os.system" }, "--preload (MCP_EXEC_PRELOAD) must be module names separated by commas"},
		{"languages unknown", func(c *Config) { c.Languages = "python,ruby" }, `--languages (MCP_EXEC_LANGUAGES) must be languages separated by commas, from python, javascript, typescript and bash; got "ruby"`},
		{"languages twice", func(c *Config) { c.Languages = "python,bash,bash" }, `--languages (MCP_EXEC_LANGUAGES) names "bash" twice`},
		{"languages without python", func(c *Config) { c.Languages = "bash" }, `--languages (MCP_EXEC_LANGUAGES) must include python`},
		{"prestart python", func(c *Config) { c.PoolPrestart = "bash,python" }, `--pool-prestart (MCP_EXEC_POOL_PRESTART) must be languages separated by commas, from bash and javascript; got "python"`},
		{"prestart javascript not served", func(c *Config) { c.Languages, c.PoolPrestart = "python,bash", "javascript" }, `--pool-prestart (MCP_EXEC_POOL_PRESTART) names "javascript", which is not one of --languages (MCP_EXEC_LANGUAGES) ("python,bash")`},
		{"prestart not served", func(c *Config) { c.Languages, c.PoolPrestart = "python,javascript", "bash" }, `--pool-prestart (MCP_EXEC_POOL_PRESTART) names "bash", which is not one of --languages (MCP_EXEC_LANGUAGES) ("python,javascript")`},
		{"instance empty", func(c *Config) { c.Instance = "" }, "--instance (MCP_EXEC_INSTANCE) must match"},
		{"instance bad char", func(c *Config) { c.Instance = "a/b" }, "--instance (MCP_EXEC_INSTANCE) must match"},
		{"instance too long", func(c *Config) { c.Instance = strings.Repeat("a", 64) }, "--instance (MCP_EXEC_INSTANCE) must match"},
		{"log level", func(c *Config) { c.LogLevel = "verbose" }, "--log-level (MCP_EXEC_LOG_LEVEL) must be one of trace, debug, info, warn, error"},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, "--log-format (MCP_EXEC_LOG_FORMAT) must be one of auto, json, console"},
		{"oauth issuer without resource", func(c *Config) { c.OAuthIssuer = "https://issuer.example" }, "--oauth-resource (MCP_EXEC_OAUTH_RESOURCE) must be set with --oauth-issuer"},
		{"oauth scopes without issuer", func(c *Config) { c.OAuthScopes = "mcp:exec" }, "--oauth-scopes (MCP_EXEC_OAUTH_SCOPES) needs --oauth-issuer (MCP_EXEC_OAUTH_ISSUER)"},
		{"oauth jwks without issuer", func(c *Config) { c.OAuthJWKSURL = "https://issuer.example/jwks" }, "--oauth-jwks-url (MCP_EXEC_OAUTH_JWKS_URL) needs --oauth-issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgWantDefaults()
			tt.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate: got nil error, want one containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestScopes(t *testing.T) {
	c := Config{OAuthScopes: " mcp:exec, openid  profile,"}
	if got, want := strings.Join(c.Scopes(), "|"), "mcp:exec|openid|profile"; got != want {
		t.Errorf("Scopes() = %q, want %q", got, want)
	}
}

func TestValidateAcceptsDefaultsAndEdges(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"http with default addr", func(c *Config) { c.Transport = "http" }},
		{"sse on loopback", func(c *Config) { c.Transport, c.Addr = "sse", "127.0.0.1:0" }},
		{"stdio ignores empty addr", func(c *Config) { c.Addr = "" }},
		{"smallest limits", func(c *Config) {
			c.MaxCodeBytes, c.MaxStdinBytes, c.MaxOutputBytes = 1, 1, 1024
			c.Memory, c.Pids, c.TmpfsSize = 16<<20, 8, 1<<20
			c.MaxConcurrent, c.MaxQueue = 1, 0
			c.DefaultTimeout, c.MaxTimeout = time.Second, time.Second
		}},
		{"largest limits", func(c *Config) {
			c.MaxCodeBytes, c.MaxStdinBytes, c.MaxOutputBytes = 64<<20, 64<<20, 64<<20
			c.RunResultsMaxBytes = 2*64<<20 + 16<<20 + 64<<10 // one result at these caps (Load raises the default to it)
			c.CPUs = 64
			c.MaxTimeout = 86400 * time.Second
		}},
		{"fractional cpus", func(c *Config) { c.CPUs = 0.01 }},
		{"instance longest", func(c *Config) { c.Instance = strings.Repeat("a", 63) }},
		{"instance fqdn", func(c *Config) { c.Instance = "host-1.example.com" }},
		{"engine and runtime", func(c *Config) { c.EngineHost, c.Runtime = "tcp://10.0.0.1:2376", "io.containerd.runc.v2" }},
		{"prestart both", func(c *Config) { c.PoolPrestart = "javascript,bash" }},
		{"unschedulable wait off", func(c *Config) { c.KubeUnschedulable = 0 }},
		{"unschedulable wait the start timeout", func(c *Config) { c.KubeUnschedulable = 120 * time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgWantDefaults()
			tt.edit(&c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: got %v, want nil", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := cfgWantDefaults()
	c.Transport = "grpc"
	c.Pids = 1
	c.LogLevel = "loud"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate: got nil error, want three problems")
	}
	for _, want := range []string{"MCP_EXEC_TRANSPORT", "MCP_EXEC_PIDS", "MCP_EXEC_LOG_LEVEL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: got %q, want it to mention %s", err, want)
		}
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 3 {
		t.Errorf("Validate: got %d lines, want 3 (one per problem): %q", got, err)
	}
}

func TestTimeoutCaps(t *testing.T) {
	cfgStubHostname(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" means no error
	}{
		{"max at cap", []string{"--max-timeout-s", "86400"}, ""},
		{"max over cap", []string{"--max-timeout-s", "86401"}, "--max-timeout-s (MCP_EXEC_MAX_TIMEOUT_S) must be at most 86400, got 86401"},
		{"max zero", []string{"--max-timeout-s", "0"}, "--max-timeout-s (MCP_EXEC_MAX_TIMEOUT_S) must be at least 1, got 0"},
		{"default equals max", []string{"--default-timeout-s", "60", "--max-timeout-s", "60"}, ""},
		{"default over max", []string{"--default-timeout-s", "61", "--max-timeout-s", "60"},
			"--default-timeout-s (MCP_EXEC_DEFAULT_TIMEOUT_S) must not exceed --max-timeout-s (MCP_EXEC_MAX_TIMEOUT_S), which is 60; got 61"},
		{"default over default max", []string{"--default-timeout-s", "301"}, "--default-timeout-s (MCP_EXEC_DEFAULT_TIMEOUT_S) must not exceed"},
		{"default negative", []string{"--default-timeout-s", "-5"}, "--default-timeout-s (MCP_EXEC_DEFAULT_TIMEOUT_S) must be at least 1, got -5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cfgLoad(tt.args, nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Load(%q): got error %v, want nil", tt.args, err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("Load(%q): got nil error, want %q", tt.args, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("Load(%q): got error %q, want it to contain %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

func TestSizeParsing(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "64m", want: 64 << 20},
		{in: "1g", want: 1 << 30},
		{in: "1048576", want: 1048576},
		{in: "256M", want: 256 << 20},
		{in: "256MiB", want: 256 << 20},
		{in: "512k", want: 512 << 10},
		{in: "1.5g", want: 3 << 29},
		{in: " 16m ", want: 16 << 20},
		{in: "", wantErr: true},
		{in: "abc", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "10x", wantErr: true},
		{in: "1e30g", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var v cfgSize
			err := v.Set(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Errorf("Set(%q): got %d, want an error", tt.in, int64(v))
				}
				return
			}
			if err != nil {
				t.Fatalf("Set(%q): got error %v, want %d", tt.in, err, tt.want)
			}
			if int64(v) != tt.want {
				t.Errorf("Set(%q): got %d, want %d", tt.in, int64(v), tt.want)
			}
		})
	}
}

func TestSizeAndSecondsFormat(t *testing.T) {
	sizes := []struct {
		in   int64
		want string
	}{
		{0, "0"}, {1, "1"}, {1000, "1000"}, {1024, "1k"}, {1048576, "1m"},
		{256 << 20, "256m"}, {1 << 30, "1g"}, {3 << 29, "1536m"}, {2 << 40, "2t"},
	}
	for _, tt := range sizes {
		if got := cfgFormatSize(tt.in); got != tt.want {
			t.Errorf("cfgFormatSize(%d): got %q, want %q", tt.in, got, tt.want)
		}
		// What the help shows must parse back to the same value.
		var v cfgSize
		if err := v.Set(cfgFormatSize(tt.in)); err != nil || int64(v) != tt.in {
			t.Errorf("Set(cfgFormatSize(%d)): got %d, %v, want %d, nil", tt.in, int64(v), err, tt.in)
		}
	}
	secs := []struct {
		in   time.Duration
		want string
	}{
		{0, "0"}, {30 * time.Second, "30"}, {1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range secs {
		if got := FormatSeconds(tt.in); got != tt.want {
			t.Errorf("FormatSeconds(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLoadTokenFile(t *testing.T) {
	cfgStubHostname(t)
	tests := []struct {
		name, content, want string
	}{
		{"newline", "s3cret\n", "s3cret"},
		{"crlf", "s3cret\r\n", "s3cret"},
		{"several newlines", "s3cret\n\n", "s3cret"},
		{"no newline", "s3cret", "s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, src := range []struct {
				name string
				args []string
				env  map[string]string
			}{
				{"flag", []string{"--auth-token-file", path}, nil},
				{"env", nil, map[string]string{"MCP_EXEC_AUTH_TOKEN_FILE": path}},
			} {
				got, err := cfgLoad(src.args, src.env)
				if err != nil {
					t.Fatalf("Load via %s: got error %v, want nil", src.name, err)
				}
				if got.AuthToken.Reveal() != tt.want {
					t.Errorf("Load via %s: got token %q, want %q", src.name, got.AuthToken.Reveal(), tt.want)
				}
				if got.AuthTokenFile != path {
					t.Errorf("Load via %s: got AuthTokenFile %q, want %q", src.name, got.AuthTokenFile, path)
				}
				if !got.TokenSet() {
					t.Errorf("Load via %s: TokenSet got false, want true", src.name)
				}
			}
		})
	}
}

func TestLoadTokenFileErrors(t *testing.T) {
	cfgStubHostname(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // substrings of the error
	}{
		{
			name: "token and file",
			args: []string{"--auth-token-file", tokenFile},
			env:  map[string]string{"MCP_EXEC_AUTH_TOKEN": "from-env"},
			want: []string{"MCP_EXEC_AUTH_TOKEN and --auth-token-file (MCP_EXEC_AUTH_TOKEN_FILE) are both set"},
		},
		{
			name: "token and file both from env",
			env:  map[string]string{"MCP_EXEC_AUTH_TOKEN": "from-env", "MCP_EXEC_AUTH_TOKEN_FILE": tokenFile},
			want: []string{"both set"},
		},
		{
			name: "missing file",
			args: []string{"--auth-token-file", filepath.Join(dir, "nope")},
			want: []string{"--auth-token-file (MCP_EXEC_AUTH_TOKEN_FILE)", "nope"},
		},
		{
			name: "empty file",
			args: []string{"--auth-token-file", emptyFile},
			want: []string{"--auth-token-file (MCP_EXEC_AUTH_TOKEN_FILE)", "empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cfgLoad(tt.args, tt.env)
			if err == nil {
				t.Fatalf("Load: got nil error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load: got %q, want it to contain %q", err, w)
				}
			}
			for _, secret := range []string{"from-env", "from-file"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Load: got %q, want no token in it", err)
				}
			}
		})
	}
}

func TestTokenNeverShown(t *testing.T) {
	cfgStubHostname(t)
	env := map[string]string{"MCP_EXEC_AUTH_TOKEN": cfgTestCanary}

	// Usage text, with the token set in the environment.
	fs := flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := Load(fs, nil, cfgEnv(env))
	if err != nil {
		t.Fatalf("Load: got error %v, want nil", err)
	}
	if c.AuthToken.Reveal() != cfgTestCanary || !c.TokenSet() {
		t.Fatalf("Load: got token %q (set %v), want the canary", c.AuthToken.Reveal(), c.TokenSet())
	}
	var help bytes.Buffer
	Usage(fs, &help)
	if strings.Contains(help.String(), cfgTestCanary) {
		t.Errorf("usage: got the token in the help text, want it absent")
	}

	// Log fields.
	var logBuf bytes.Buffer
	logger := zerolog.New(&logBuf)
	c.LogFields(logger.Info()).Msg("config")
	if strings.Contains(logBuf.String(), cfgTestCanary) {
		t.Errorf("LogFields: got %s, want no token", logBuf.String())
	}
	if !strings.Contains(logBuf.String(), `"auth_token":"[redacted]"`) {
		t.Errorf("LogFields: got %s, want auth_token [redacted]", logBuf.String())
	}

	// fmt verbs.
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(verb, c); strings.Contains(s, cfgTestCanary) {
			t.Errorf("Sprintf(%s): got %s, want no token", verb, s)
		}
	}

	// Errors: every way Load or Validate can fail with the canary configured.
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(cfgTestCanary+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badEnv := map[string]string{
		"MCP_EXEC_AUTH_TOKEN": cfgTestCanary,
		"MCP_EXEC_MEMORY":     "lots",
		"MCP_EXEC_TRANSPORT":  "grpc",
		"MCP_EXEC_PIDS":       "1",
	}
	errCases := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"bad settings", nil, badEnv},
		{"token and file", []string{"--auth-token-file", path}, env},
		{"bad flag", []string{"--cpus", "x"}, env},
		{"unknown flag", []string{"--auth-token", cfgTestCanary + "x"}, nil},
		{"unknown flag with =", []string{"--auth-token=" + cfgTestCanary}, nil},
		{"token with space", nil, map[string]string{"MCP_EXEC_AUTH_TOKEN": cfgTestCanary + " x"}},
	}
	for _, tt := range errCases {
		var out bytes.Buffer
		fs := flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
		fs.SetOutput(&out)
		_, err := Load(fs, tt.args, cfgEnv(tt.env))
		if err == nil {
			t.Errorf("%s: Load got nil error, want one", tt.name)
			continue
		}
		if strings.Contains(err.Error(), cfgTestCanary) {
			t.Errorf("%s: Load error got %q, want no token", tt.name, err)
		}
		if strings.Contains(out.String(), cfgTestCanary) {
			t.Errorf("%s: Load output got %q, want no token", tt.name, out.String())
		}
	}

	// Validate directly.
	c.LogLevel = "nope"
	c.AuthToken = Secret(cfgTestCanary + "\n")
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), cfgTestCanary) {
		t.Errorf("Validate: got %v, want an error without the token", err)
	}
}

func TestLogFieldsWithoutToken(t *testing.T) {
	c := cfgWantDefaults()
	var buf bytes.Buffer
	logger := zerolog.New(&buf)
	c.LogFields(logger.Info()).Msg("config")
	for _, want := range []string{`"auth_token":""`, `"memory":268435456`, `"default_timeout_s":30`, `"instance":"testhost"`, `"cpus":1`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("LogFields: got %s, want it to contain %s", buf.String(), want)
		}
	}
}

func TestUsageListsEveryFlag(t *testing.T) {
	cfgStubHostname(t)
	fs := flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("json", false, "print the result as JSON") // as a subcommand might
	if _, err := Load(fs, nil, cfgEnv(map[string]string{"MCP_EXEC_PIDS": "99"})); err != nil {
		t.Fatalf("Load: got error %v, want nil", err)
	}
	var buf bytes.Buffer
	Usage(fs, &buf)
	help := buf.String()

	lines := strings.Split(help, "\n")
	lineOf := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	for _, f := range cfgFields {
		def := fs.Lookup(f.flag).DefValue
		if def == "" {
			def = `""`
		}
		prefix := "  --" + f.flag + " " + def + " "
		l := lineOf(prefix)
		if l == "" {
			t.Errorf("usage: got no line starting %q, want one", prefix)
			continue
		}
		if !strings.HasSuffix(l, "("+f.env+")") {
			t.Errorf("usage line for --%s: got %q, want it to end with (%s)", f.flag, l, f.env)
		}
	}
	for _, want := range []string{
		"  --memory 256m ", "  --tmpfs-size 64m ", "  --default-timeout-s 30 ", "  --max-timeout-s 300 ",
		"  --cpus 1 ", "  --pids 99 ", "  --instance testhost ", "  --max-output-bytes 1m ", "  --json ",
		"MCP_EXEC_AUTH_TOKEN",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("usage: got\n%s\nwant it to contain %q", help, want)
		}
	}
}

func TestValidateKubernetesSettings(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MCP_EXEC_BACKEND": "k8s"}, "--backend (MCP_EXEC_BACKEND) must be one of docker, kubernetes"},
		{map[string]string{"MCP_EXEC_KUBE_IMAGE_PULL_POLICY": "Sometimes"}, "--kube-image-pull-policy (MCP_EXEC_KUBE_IMAGE_PULL_POLICY)"},
		{map[string]string{"MCP_EXEC_KUBE_NODE_SELECTOR": "pool"}, "--kube-node-selector (MCP_EXEC_KUBE_NODE_SELECTOR)"},
		{map[string]string{"MCP_EXEC_KUBE_POD_LABELS": "a=b c"}, "--kube-pod-labels (MCP_EXEC_KUBE_POD_LABELS)"},
		{map[string]string{"MCP_EXEC_KUBE_TOLERATIONS": "k:Sometimes"}, "--kube-tolerations (MCP_EXEC_KUBE_TOLERATIONS)"},
		{map[string]string{"MCP_EXEC_BACKEND": "kubernetes", "MCP_EXEC_KUBE_NAMESPACE": "Sandbox_1"}, "--kube-namespace (MCP_EXEC_KUBE_NAMESPACE) sandbox namespace \"Sandbox_1\""},
		{map[string]string{"MCP_EXEC_KUBE_USER_NAMESPACE": "maybe"}, `MCP_EXEC_KUBE_USER_NAMESPACE="maybe" is invalid (flag --kube-user-namespace)`},
	} {
		_, err := cfgLoad(nil, tt.env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want an error containing %q", tt.env, err, tt.want)
		}
	}
	c, err := cfgLoad([]string{"--backend", "kubernetes", "--kube-namespace", "sbx", "--kube-tolerations", "sandbox=gvisor:NoSchedule"}, nil)
	if err != nil || c.Backend != "kubernetes" || c.KubeNamespace != "sbx" {
		t.Errorf("got %+v, %v; want the kubernetes backend in namespace sbx", c, err)
	}
	if _, err := cfgLoad([]string{"--backend", "kubernetes", "--kube-namespace", ""}, nil); err == nil || !strings.Contains(err.Error(), "--kube-namespace (MCP_EXEC_KUBE_NAMESPACE)") {
		t.Errorf("an empty --kube-namespace: got %v, want an error naming it", err)
	}
	// The default is docs/deploy/kubernetes' sandbox namespace, never the server's own.
	if c, err := cfgLoad([]string{"--backend", "kubernetes"}, nil); err != nil || c.KubeNamespace != "mcp-exec-sandbox" || c.KubeUserNamespace {
		t.Errorf("defaults: got namespace %q, user namespace %v, %v; want mcp-exec-sandbox, false", c.KubeNamespace, c.KubeUserNamespace, err)
	}
}

// The process backend serializes runs and starts none ahead of its call unless the
// operator sets max-concurrent or pool-size (by flag or variable).
func TestLoadProcessBackendDefaults(t *testing.T) {
	cfgStubHostname(t)
	for _, tc := range []struct {
		name           string
		args           []string
		env            map[string]string
		wantConc, pool int
	}{
		{"defaults", []string{"--backend", "process"}, nil, 1, 0},
		{"env", nil, map[string]string{"MCP_EXEC_BACKEND": "process", "MCP_EXEC_MAX_CONCURRENT": "3", "MCP_EXEC_POOL_SIZE": "1"}, 3, 1},
		{"flags", []string{"--backend=process", "--max-concurrent=2", "--pool-size=1"}, nil, 2, 1},
		{"docker", nil, nil, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cfgLoad(tc.args, tc.env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got.MaxConcurrent != tc.wantConc || got.PoolSize != tc.pool {
				t.Errorf("got max-concurrent %d pool-size %d, want %d %d", got.MaxConcurrent, got.PoolSize, tc.wantConc, tc.pool)
			}
		})
	}
}

// TestProcessBackendRefusesTokenInEnvironment: with the process
// backend the token in the environment is refused, naming both ways that work; its
// SHA-256 is accepted (and only a well-formed one, alone); other backends still take
// the variable.
func TestProcessBackendRefusesTokenInEnvironment(t *testing.T) {
	tok := "0123456789abcdef0123456789abcdef"
	_, err := cfgLoad(nil, map[string]string{"MCP_EXEC_BACKEND": "process", "MCP_EXEC_AUTH_TOKEN": tok})
	if err == nil {
		t.Fatal("process backend with MCP_EXEC_AUTH_TOKEN: no error")
	}
	for _, want := range []string{"MCP_EXEC_AUTH_TOKEN is refused with the process backend", "--auth-token-sha256 (MCP_EXEC_AUTH_TOKEN_SHA256)", "--auth-token-file (MCP_EXEC_AUTH_TOKEN_FILE)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), tok) {
		t.Errorf("the error shows the token: %v", err)
	}
	sum := sha256.Sum256([]byte(tok))
	c, err := cfgLoad(nil, map[string]string{"MCP_EXEC_BACKEND": "process", "MCP_EXEC_AUTH_TOKEN_SHA256": hex.EncodeToString(sum[:])})
	if err != nil || !c.AuthOn() || !c.TokenSet() || !bytes.Equal(c.TokenSum(), sum[:]) || c.AuthToken.Set() {
		t.Fatalf("process backend with the SHA-256: %v (AuthOn %v, TokenSum %x)", err, c.AuthOn(), c.TokenSum())
	}
	if _, err := cfgLoad(nil, map[string]string{"MCP_EXEC_AUTH_TOKEN": tok}); err != nil {
		t.Errorf("docker backend with MCP_EXEC_AUTH_TOKEN: %v", err)
	}
	for _, bad := range []map[string]string{
		{"MCP_EXEC_AUTH_TOKEN_SHA256": "abc"},
		{"MCP_EXEC_AUTH_TOKEN_SHA256": strings.Repeat("zz", 32)},
		{"MCP_EXEC_AUTH_TOKEN_SHA256": hex.EncodeToString(sum[:]), "MCP_EXEC_AUTH_TOKEN": tok},
	} {
		if _, err := cfgLoad(nil, bad); err == nil || !strings.Contains(err.Error(), "--auth-token-sha256 (MCP_EXEC_AUTH_TOKEN_SHA256)") {
			t.Errorf("%v: got %v, want an error naming --auth-token-sha256", bad, err)
		}
	}
}

// TestLoadBadUpstreams: a bad upstreams file is a start-up error naming the flag, the
// variable, the server and the field.
func TestLoadBadUpstreams(t *testing.T) {
	cfgStubHostname(t)
	file := filepath.Join(t.TempDir(), "upstreams.json")
	if err := os.WriteFile(file, []byte(`{"mcpServers": {"gh": {"url": "https://h/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := cfgLoad(nil, map[string]string{"MCP_EXEC_UPSTREAMS": file})
	for _, want := range []string{"--upstreams", "MCP_EXEC_UPSTREAMS", `server "gh": tools: required`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load: got %v, want an error naming %s", err, want)
		}
	}
}

// TestMaxSessionsPerIdentityDefault: under OAuth one identity may hold half of
// --max-sessions (at least 1) unless told otherwise; without OAuth every client is one
// identity and the default leaves it --max-sessions; an explicit value, 0 included,
// wins.
func TestMaxSessionsPerIdentityDefault(t *testing.T) {
	cfgStubHostname(t)
	oauth := map[string]string{"MCP_EXEC_OAUTH_ISSUER": "https://issuer.example.com", "MCP_EXEC_OAUTH_RESOURCE": "https://mcp.example.com/mcp"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"oauth, default --max-sessions 4", nil, oauth, 2},
		{"oauth, --max-sessions 9", []string{"--max-sessions", "9"}, oauth, 4},
		{"oauth, --max-sessions 1", []string{"--max-sessions", "1"}, oauth, 1},
		{"oauth, sessions off", []string{"--max-sessions", "0"}, oauth, 0},
		{"oauth, explicit 3", []string{"--max-sessions-per-identity", "3"}, oauth, 3},
		{"oauth, explicit 0: no bound", nil, with(oauth, "MCP_EXEC_MAX_SESSIONS_PER_IDENTITY", "0"), 0},
		{"oauth, -1 spelt out", []string{"--max-sessions-per-identity", "-1"}, oauth, 2},
		{"static token: one identity", nil, map[string]string{"MCP_EXEC_AUTH_TOKEN": "t"}, 0},
		{"stdio", nil, nil, 0},
		{"token, explicit 1", []string{"--max-sessions-per-identity", "1"}, map[string]string{"MCP_EXEC_AUTH_TOKEN": "t"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cfgLoad(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.MaxSessionsPerIdentity != tc.want {
				t.Errorf("got %d sessions per identity, want %d", c.MaxSessionsPerIdentity, tc.want)
			}
		})
	}
	if _, err := cfgLoad([]string{"--max-sessions-per-identity", "-2"}, nil); err == nil || !strings.Contains(err.Error(), "must be from -1 to 256, got -2") {
		t.Errorf("-2: got %v, want a range error", err)
	}
}

// TestVarNamesLibrarySettings: every setting a library's message names (by flag) is a
// row of the table, so that Var spells it with its variable; a renamed flag fails here
// rather than leaving a message that names a setting that no longer exists.
func TestVarNamesLibrarySettings(t *testing.T) {
	for _, s := range []backend.Setting{
		launcher.SettingEngineWait, engine.SettingAllowInsecure, kube.SettingSeccompProfile,
		process.SettingTmpfsSize, process.SettingEgressDenied,
		mcpserver.SettingMaxCodeBytes, mcpserver.SettingMaxStdinBytes, mcpserver.SettingEgressProfiles,
		mcpserver.SettingMaxSessions, mcpserver.SettingMaxSessionsPerIdentity, mcpserver.SettingSessionMaxLifetime,
		mcpserver.SettingMaxBackgroundRuns, mcpserver.SettingMaxBackgroundRunsPerIdentity, mcpserver.SettingRunTTL,
		mcpserver.SettingRunResultsMaxBytes,
		upstream.SettingMaxSessions, upstream.SettingIdleTimeout,
	} {
		want := "MCP_EXEC_" + strings.ToUpper(strings.ReplaceAll(string(s), "-", "_"))
		if got := Var(s); got != want {
			t.Errorf("Var(%q): got %q, want %q", s, got, want)
		}
	}
	if got := Var("no-such-setting"); got != "" {
		t.Errorf("Var of no setting: got %q, want none", got)
	}
}

// TestMaxBackgroundRunsPerIdentityDefault: -1 resolves as --max-sessions-per-identity's
// does: half of --max-background-runs under OAuth, else no bound but it.
func TestMaxBackgroundRunsPerIdentityDefault(t *testing.T) {
	cfgStubHostname(t)
	oauth := map[string]string{"MCP_EXEC_OAUTH_ISSUER": "https://issuer.example.com", "MCP_EXEC_OAUTH_RESOURCE": "https://mcp.example.com/mcp"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"no oauth", nil, nil, 0},
		{"oauth, default 8", nil, oauth, 4},
		{"oauth, --max-background-runs 1", []string{"--max-background-runs", "1"}, oauth, 1},
		{"oauth, runs off", []string{"--max-background-runs", "0"}, oauth, 0},
		{"oauth, explicit 3", []string{"--max-background-runs-per-identity", "3"}, oauth, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cfgLoad(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.MaxBackgroundRunsPerIdentity != tc.want || c.RunTTL != 15*time.Minute {
				t.Errorf("got %d runs per identity (TTL %s), want %d (15m0s)", c.MaxBackgroundRunsPerIdentity, c.RunTTL, tc.want)
			}
		})
	}
}

// TestRunResultsMaxBytesDefault: unset, --run-results-max-bytes is 160m, or one result at
// the output caps when they make that more, so that raising them refuses no run; set, it
// is what it says, and below one result it is refused, naming both limits.
func TestRunResultsMaxBytesDefault(t *testing.T) {
	cfgStubHostname(t)
	one := int64(2*64<<20 + 64<<20 + 64<<10)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int64
	}{
		{"default", nil, nil, 160 << 20},
		{"large caps", []string{"--max-output-bytes", "64m", "--max-files-bytes", "64m"}, nil, one},
		{"large caps, env", nil, map[string]string{"MCP_EXEC_MAX_OUTPUT_BYTES": "64m", "MCP_EXEC_MAX_FILES_BYTES": "64m"}, one},
		{"explicit", []string{"--run-results-max-bytes", "1g"}, nil, 1 << 30},
		{"explicit 0", nil, map[string]string{"MCP_EXEC_RUN_RESULTS_MAX_BYTES": "0"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cfgLoad(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.RunResultsMaxBytes != tc.want {
				t.Errorf("got %d, want %d", c.RunResultsMaxBytes, tc.want)
			}
		})
	}
	_, err := cfgLoad([]string{"--max-output-bytes", "64m", "--run-results-max-bytes", "64m"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--run-results-max-bytes (MCP_EXEC_RUN_RESULTS_MAX_BYTES) must be 0 or at least") || !strings.Contains(err.Error(), "--max-output-bytes 64m") {
		t.Errorf("an explicit budget below one result: %v", err)
	}
}

// TestKubeBackgroundRunsOptIn: on kubernetes --max-background-runs is 0 unless set (a
// kept result holds its pod until the TTL); set by flag or variable, it is what it says.
func TestKubeBackgroundRunsOptIn(t *testing.T) {
	cfgStubHostname(t)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"docker default", nil, nil, 8},
		{"kubernetes default", []string{"--backend", "kubernetes"}, nil, 0},
		{"kubernetes, flag", []string{"--backend", "kubernetes", "--max-background-runs", "8"}, nil, 8},
		{"kubernetes, env", nil, map[string]string{"MCP_EXEC_BACKEND": "kubernetes", "MCP_EXEC_MAX_BACKGROUND_RUNS": "3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cfgLoad(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.MaxBackgroundRuns != tc.want {
				t.Errorf("--max-background-runs: got %d, want %d", c.MaxBackgroundRuns, tc.want)
			}
		})
	}
}
