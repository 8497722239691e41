package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/docker/go-units"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/kube"
	"github.com/mcp-exec/mcp-exec/mcpserver"
	"github.com/mcp-exec/mcp-exec/mcpserver/upstream"
)

// Config is the whole configuration of mcp-exec. Every field has a flag, an
// MCP_EXEC_* environment variable and a default; the variable supplies the flag's
// default, so a flag given on the command line wins. The one exception is the
// auth token, which has no flag (flags are visible in ps): it comes from
// MCP_EXEC_AUTH_TOKEN or from the file named by --auth-token-file.
//
// A setting is added in two places besides its field: its entry in cfgTable (flag,
// variable, default, help, validation) and its entry in cfgDocs (what
// docs/configuration.md says of it); loading, the help text, the start-up log line
// and the page's table (go generate ./cmd/mcp-exec; TestConfigDocCurrent) follow.
type Config struct {
	Transport             string        // --transport MCP_EXEC_TRANSPORT: stdio, http or sse
	EgressDenied          bool          // --standalone-egress-denied MCP_EXEC_STANDALONE_EGRESS_DENIED: the operator states egress is denied outside (process backend, http/sse)
	EgressProbes          string        // --standalone-egress-probes MCP_EXEC_STANDALONE_EGRESS_PROBES: host:port list the start-up egress check must fail to reach
	Addr                  string        // --addr MCP_EXEC_ADDR: listen address for http and sse
	DefaultTimeout        time.Duration // --default-timeout-s MCP_EXEC_DEFAULT_TIMEOUT_S
	MaxTimeout            time.Duration // --max-timeout-s MCP_EXEC_MAX_TIMEOUT_S
	MaxOutputBytes        int64         // --max-output-bytes MCP_EXEC_MAX_OUTPUT_BYTES
	MaxStdinBytes         int64         // --max-stdin-bytes MCP_EXEC_MAX_STDIN_BYTES
	MaxCodeBytes          int64         // --max-code-bytes MCP_EXEC_MAX_CODE_BYTES
	MaxFiles              int           // --max-files MCP_EXEC_MAX_FILES: input files per call
	MaxFileBytes          int64         // --max-file-bytes MCP_EXEC_MAX_FILE_BYTES: one file, in or out
	MaxFilesBytes         int64         // --max-files-bytes MCP_EXEC_MAX_FILES_BYTES: all files of a call, in or out
	Python                string        // --python MCP_EXEC_PYTHON: interpreter inside the image
	Upstreams             string        // --upstreams MCP_EXEC_UPSTREAMS: code mode's upstreams file; "" = off
	UpstreamMaxSessions   int           // --upstream-max-sessions MCP_EXEC_UPSTREAM_MAX_SESSIONS: callers' sessions per upstream at once
	UpstreamIdleTimeout   time.Duration // --upstream-idle-timeout-s MCP_EXEC_UPSTREAM_IDLE_TIMEOUT_S: a caller's upstream session closes after it
	AuthToken             Secret        // MCP_EXEC_AUTH_TOKEN only (or read from AuthTokenFile); never printed
	AuthTokenFile         string        // --auth-token-file MCP_EXEC_AUTH_TOKEN_FILE
	AuthTokenSHA256       string        // --auth-token-sha256 MCP_EXEC_AUTH_TOKEN_SHA256: hex SHA-256 of the token
	OAuthIssuer           string        // --oauth-issuer MCP_EXEC_OAUTH_ISSUER: "" = OAuth off
	OAuthResource         string        // --oauth-resource MCP_EXEC_OAUTH_RESOURCE: the public URL of the MCP endpoint
	OAuthAudience         string        // --oauth-audience MCP_EXEC_OAUTH_AUDIENCE: "" = OAuthResource
	OAuthScopes           string        // --oauth-scopes MCP_EXEC_OAUTH_SCOPES: required scopes, comma- or space-separated
	OAuthJWKSURL          string        // --oauth-jwks-url MCP_EXEC_OAUTH_JWKS_URL: "" = from the issuer's metadata
	InsecureNoAuth        bool          // --insecure-no-auth MCP_EXEC_INSECURE_NO_AUTH: serve http/sse beyond loopback without authentication
	Image                 string        // --image MCP_EXEC_IMAGE
	Memory                int64         // --memory MCP_EXEC_MEMORY, bytes
	Pids                  int64         // --pids MCP_EXEC_PIDS
	CPUs                  float64       // --cpus MCP_EXEC_CPUS
	TmpfsSize             int64         // --tmpfs-size MCP_EXEC_TMPFS_SIZE, bytes
	Backend               string        // --backend MCP_EXEC_BACKEND: docker (Docker or Podman), kubernetes, or process (standalone: child processes)
	EngineHost            string        // --engine-host MCP_EXEC_ENGINE_HOST; "" = DOCKER_HOST or the default socket
	Runtime               string        // --runtime MCP_EXEC_RUNTIME; "" = the engine's default (kubernetes: the RuntimeClass)
	Kubeconfig            string        // --kubeconfig MCP_EXEC_KUBECONFIG; "" = in a pod its ServiceAccount, else KUBECONFIG or ~/.kube/config
	KubeContext           string        // --kube-context MCP_EXEC_KUBE_CONTEXT; "" = the kubeconfig's current context
	KubeNamespace         string        // --kube-namespace MCP_EXEC_KUBE_NAMESPACE: the sandboxes' own (kube.DefaultNamespace)
	KubeUserNamespace     bool          // --kube-user-namespace MCP_EXEC_KUBE_USER_NAMESPACE: hostUsers false
	KubeNodeSelector      string        // --kube-node-selector MCP_EXEC_KUBE_NODE_SELECTOR: k=v,...
	KubeTolerations       string        // --kube-tolerations MCP_EXEC_KUBE_TOLERATIONS: key[=value][:Effect],...
	KubePullPolicy        string        // --kube-image-pull-policy MCP_EXEC_KUBE_IMAGE_PULL_POLICY
	KubePodLabels         string        // --kube-pod-labels MCP_EXEC_KUBE_POD_LABELS: k=v,...
	KubeSeccompProfile    string        // --kube-seccomp-profile MCP_EXEC_KUBE_SECCOMP_PROFILE: a Localhost profile; "" = RuntimeDefault
	KubeUnschedulable     time.Duration // --kube-unschedulable-wait-s MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S: how long a pod may find no node before its start fails; 0 = kube.DefaultStartTimeout
	MaxConcurrent         int           // --max-concurrent MCP_EXEC_MAX_CONCURRENT
	MaxQueue              int           // --max-queue MCP_EXEC_MAX_QUEUE
	MetricsAddr           string        // --metrics-addr MCP_EXEC_METRICS_ADDR: "" = /metrics on the http/sse listener; "off"; or host:port of its own
	Stateless             bool          // --stateless MCP_EXEC_STATELESS: streamable HTTP without sessions, for replicas behind a load balancer
	HTTPMaxRequests       int           // --http-max-requests MCP_EXEC_HTTP_MAX_REQUESTS: requests (streams included) in flight at once on http/sse
	HTTPBodyTimeout       time.Duration // --http-body-timeout-s MCP_EXEC_HTTP_BODY_TIMEOUT_S: to receive a whole request body
	ShutdownGrace         time.Duration // --shutdown-grace-s MCP_EXEC_SHUTDOWN_GRACE_S: how long in-flight execs may finish after SIGTERM
	EngineWait            time.Duration // --engine-wait-s MCP_EXEC_ENGINE_WAIT_S: how long a call waits for an engine that went away
	AllowUnenforcedLimits bool          // --allow-unenforced-limits MCP_EXEC_ALLOW_UNENFORCED_LIMITS: serve even if the engine ignores a limit
	AllowInsecureEngine   bool          // --allow-insecure-engine MCP_EXEC_ALLOW_INSECURE_ENGINE: a remote tcp:// engine without verified TLS
	PoolSize              int           // --pool-size MCP_EXEC_POOL_SIZE: warm sandboxes kept ready; 0 = cold mode
	// Sessions (docs/sessions.md).
	MaxSessions            int           // --max-sessions MCP_EXEC_MAX_SESSIONS: 0 removes the session tools
	MaxSessionsPerIdentity int           // --max-sessions-per-identity MCP_EXEC_MAX_SESSIONS_PER_IDENTITY: 0 is no bound but --max-sessions
	SessionIdleTimeout     time.Duration // --session-idle-timeout-s MCP_EXEC_SESSION_IDLE_TIMEOUT_S
	SessionMaxLifetime     time.Duration // --session-max-lifetime-s MCP_EXEC_SESSION_MAX_LIFETIME_S
	SessionMemory          int64         // --session-memory MCP_EXEC_SESSION_MEMORY, bytes
	SessionPoolSize        int           // --session-pool-size MCP_EXEC_SESSION_POOL_SIZE: session sandboxes kept ready (docker backend); 0 = every session starts cold
	Preload                string        // --preload MCP_EXEC_PRELOAD: comma-separated modules imported before the code arrives
	Languages              string        // --languages MCP_EXEC_LANGUAGES: comma-separated languages exec's language may name; python among them
	PoolPrestart           string        // --pool-prestart MCP_EXEC_POOL_PRESTART: comma-separated languages (bash, javascript) whose interpreter each warm sandbox starts ahead
	Instance               string        // --instance MCP_EXEC_INSTANCE: label value marking this server's containers
	LogLevel               string        // --log-level MCP_EXEC_LOG_LEVEL
	LogFormat              string        // --log-format MCP_EXEC_LOG_FORMAT
	EgressProfiles         string        // --egress-profiles MCP_EXEC_EGRESS_PROFILES: JSON file of egress profiles; "" = none: no network, no egress field
	EgressDir              string        // --egress-dir MCP_EXEC_EGRESS_DIR: where the per-sandbox proxy sockets live; "" = under the temp directory
	EgressAudit            string        // --egress-audit MCP_EXEC_EGRESS_AUDIT: file of the egress audit log, "-" for stdout; "" = none
	EgressInjectCA         string        // --egress-inject-ca MCP_EXEC_EGRESS_INJECT_CA: PEM file of the CAs injected hosts are verified against; "" = the system's

	// Background runs (docs/background-runs.md).
	MaxBackgroundRuns            int           // --max-background-runs MCP_EXEC_MAX_BACKGROUND_RUNS: 0 removes background and the run tools
	MaxBackgroundRunsPerIdentity int           // --max-background-runs-per-identity MCP_EXEC_MAX_BACKGROUND_RUNS_PER_IDENTITY: 0 is no bound but --max-background-runs
	RunTTL                       time.Duration // --run-ttl-s MCP_EXEC_RUN_TTL_S: how long a run's result is kept after it ends
	RunResultsMaxBytes           int64         // --run-results-max-bytes MCP_EXEC_RUN_RESULTS_MAX_BYTES: memory for runs' results; 0 is no bound but --max-background-runs
}

// runResultsCheck: --run-results-max-bytes is 0 or holds at least one run's result at
// its caps, else every background run would be refused.
func (c *Config) runResultsCheck() string {
	one := mcpserver.ResultCap(c.MaxOutputBytes, c.MaxFilesBytes)
	if c.RunResultsMaxBytes == 0 || c.MaxBackgroundRuns == 0 || c.RunResultsMaxBytes >= one {
		return ""
	}
	if c.RunResultsMaxBytes < 0 {
		return fmt.Sprintf("must be 0 or more, got %d", c.RunResultsMaxBytes)
	}
	return fmt.Sprintf("must be 0 or at least %s, the most one background run's result can take with --max-output-bytes %s and --max-files-bytes %s (twice the one, the other, and 64 KiB), got %s",
		cfgFormatSize(one), cfgFormatSize(c.MaxOutputBytes), cfgFormatSize(c.MaxFilesBytes), cfgFormatSize(c.RunResultsMaxBytes))
}

// AuthTokenEnv is the only source of the token besides the token file.
const AuthTokenEnv = "MCP_EXEC_AUTH_TOKEN"

// Limits enforced by Validate.

// cfgMaxSessions bounds --max-sessions: each session holds a sandbox's memory.
const cfgMaxSessions = 256

// cfgMaxBackgroundRuns bounds --max-background-runs: each kept result holds up to a
// result's caps in memory.
const cfgMaxBackgroundRuns = 1024
const (
	cfgMaxTimeoutCap  = 86400 * time.Second
	cfgMaxInputBytes  = 64 * units.MiB // code and stdin
	cfgMinOutputBytes = 1 * units.KiB
	cfgMaxOutputBytes = 64 * units.MiB
	cfgMinMemory      = 16 * units.MiB
	cfgMinPids        = 8
	cfgMaxCPUs        = 64.0
	cfgMinTmpfs       = 1 * units.MiB
	cfgMaxPool        = 64
)

var (
	cfgTransports = []string{"stdio", "http", "sse"}
	cfgBackends   = []string{"docker", "kubernetes", "process"}
	cfgPullPolicy = []string{"Always", "IfNotPresent", "Never"}
	cfgLogLevels  = []string{"trace", "debug", "info", "warn", "error"}
	cfgLogFormats = []string{"auto", "json", "console"}

	cfgInstanceRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	cfgRuntimeRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	cfgPreloadRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*(,[A-Za-z_][A-Za-z0-9_.]*)*$`)
)

// cfgHostname supplies the default --instance; tests replace it.
var cfgHostname = os.Hostname

// cfgField describes one configuration field of a Config: its flag, its variable,
// its default (as the variable would spell it), its help text, the field itself as a
// flag.Value, and its validation (nil: any value parses into a valid one). check
// returns what is wrong, or ""; its message follows the setting's name. The order is
// the order of the help text and of the start-up log line, whose keys are the flag
// names in snake_case.
type cfgField struct {
	flag  string
	env   string
	def   string
	help  string
	value flag.Value
	check func() string
}

// cfgFields is the table of settings, bound to no Config in use: what each setting
// is called and defaults to. init fills it: a check may name another setting
// (Name), which reads the table.
var cfgFields []cfgField

func init() { cfgFields = cfgTable(new(Config)) }

// cfgTable is the table of settings, bound to the fields of c.
func cfgTable(c *Config) []cfgField {
	return []cfgField{
		{"transport", "MCP_EXEC_TRANSPORT", "stdio", "MCP transport: stdio, http or sse",
			(*cfgString)(&c.Transport), func() string { return cfgOneOf(c.Transport, cfgTransports) }},
		{"addr", "MCP_EXEC_ADDR", ":8080", "listen address (host:port) for http and sse",
			(*cfgString)(&c.Addr),
			func() string {
				switch {
				case c.Transport != "http" && c.Transport != "sse":
					return ""
				case c.Addr == "":
					return "must be set for transport " + c.Transport
				}
				return cfgUnless(cfgIsHostPort(c.Addr), "must be host:port (host may be empty), got %q", c.Addr)
			}},
		{"standalone-egress-denied", "MCP_EXEC_STANDALONE_EGRESS_DENIED", "false", "process backend serving http/sse: state that egress outside the container is denied (a NetworkPolicy); the start-up check then proves it from a child",
			(*cfgBool)(&c.EgressDenied), nil},
		{"standalone-egress-probes", "MCP_EXEC_STANDALONE_EGRESS_PROBES", "", "comma-separated host:port (TCP) or udp:host:port (a DNS query) the start-up egress check must fail to reach (empty: public resolvers over IPv4 and IPv6, one address per private range); the container's resolvers, gateways and neighbours are always tried too",
			(*cfgString)(&c.EgressProbes),
			func() string {
				for _, p := range SplitList(c.EgressProbes) {
					if !cfgIsHostPort(strings.TrimPrefix(p, "udp:")) {
						return fmt.Sprintf("must be host:port (TCP) or udp:host:port (a DNS query) entries separated by commas, got %q", p)
					}
				}
				return ""
			}},
		{"auth-token-file", "MCP_EXEC_AUTH_TOKEN_FILE", "", "file holding the bearer token http/sse clients must send (trailing newline trimmed)",
			(*cfgString)(&c.AuthTokenFile), nil},
		{"auth-token-sha256", "MCP_EXEC_AUTH_TOKEN_SHA256", "", "hex SHA-256 of the bearer token http/sse clients must send, instead of the token (the server then never holds it: the way in standalone mode)",
			(*cfgString)(&c.AuthTokenSHA256),
			func() string {
				if c.AuthTokenSHA256 == "" {
					return ""
				}
				if b, err := hex.DecodeString(c.AuthTokenSHA256); err != nil || len(b) != sha256.Size {
					return fmt.Sprintf("must be %d hex digits (printf %%s \"$TOKEN\" | sha256sum), got %d characters", 2*sha256.Size, len(c.AuthTokenSHA256))
				}
				if c.AuthToken.Set() || c.AuthTokenFile != "" {
					return fmt.Sprintf("and %s or %s are both set; use one", AuthTokenEnv, Name("auth-token-file"))
				}
				return ""
			}},
		{"oauth-issuer", "MCP_EXEC_OAUTH_ISSUER", "", "OAuth: accept JWT access tokens from this issuer (https; http only on loopback); empty: OAuth off",
			(*cfgString)(&c.OAuthIssuer), nil},
		{"oauth-resource", "MCP_EXEC_OAUTH_RESOURCE", "", "OAuth: this server's public MCP URL, e.g. https://mcp.example.com/mcp (the resource in its metadata)",
			(*cfgString)(&c.OAuthResource),
			func() string {
				if c.OAuthIssuer != "" && c.OAuthResource == "" {
					return fmt.Sprintf("must be set with %s: the URL clients reach this server's MCP endpoint at", Name("oauth-issuer"))
				}
				return cfgNeedsIssuer(*c, c.OAuthResource)
			}},
		{"oauth-audience", "MCP_EXEC_OAUTH_AUDIENCE", "", "OAuth: the audience tokens must carry; empty: --oauth-resource",
			(*cfgString)(&c.OAuthAudience), func() string { return cfgNeedsIssuer(*c, c.OAuthAudience) }},
		{"oauth-scopes", "MCP_EXEC_OAUTH_SCOPES", "", "OAuth: scopes a token must carry, comma-separated",
			(*cfgString)(&c.OAuthScopes), func() string { return cfgNeedsIssuer(*c, c.OAuthScopes) }},
		{"oauth-jwks-url", "MCP_EXEC_OAUTH_JWKS_URL", "", "OAuth: the issuer's key set; empty: the jwks_uri of its metadata",
			(*cfgString)(&c.OAuthJWKSURL), func() string { return cfgNeedsIssuer(*c, c.OAuthJWKSURL) }},
		{"insecure-no-auth", "MCP_EXEC_INSECURE_NO_AUTH", "false", "serve http/sse beyond loopback without a token or OAuth, so that anyone who reaches the port can run code (UNSAFE; refused otherwise; logged loudly)",
			(*cfgBool)(&c.InsecureNoAuth), nil},
		{"default-timeout-s", "MCP_EXEC_DEFAULT_TIMEOUT_S", "30", "wall-clock limit in seconds when a call names none",
			(*cfgSeconds)(&c.DefaultTimeout),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.DefaultTimeout), cfgUnless(c.DefaultTimeout <= c.MaxTimeout, "must not exceed %s, which is %s; got %s",
					Name("max-timeout-s"), FormatSeconds(c.MaxTimeout), FormatSeconds(c.DefaultTimeout)))
			}},
		{"max-timeout-s", "MCP_EXEC_MAX_TIMEOUT_S", "300", "largest wall-clock limit in seconds a call may ask for",
			(*cfgSeconds)(&c.MaxTimeout),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.MaxTimeout), cfgUnless(c.MaxTimeout <= cfgMaxTimeoutCap, "must be at most %d, got %s",
					int64(cfgMaxTimeoutCap/time.Second), FormatSeconds(c.MaxTimeout)))
			}},
		{"max-code-bytes", "MCP_EXEC_MAX_CODE_BYTES", "1m", "largest accepted program (bytes, or with unit k/m)",
			(*cfgSize)(&c.MaxCodeBytes), func() string { return cfgSizeRange(c.MaxCodeBytes, 1, cfgMaxInputBytes) }},
		{"max-stdin-bytes", "MCP_EXEC_MAX_STDIN_BYTES", "1m", "largest accepted stdin (bytes, or with unit k/m)",
			(*cfgSize)(&c.MaxStdinBytes), func() string { return cfgSizeRange(c.MaxStdinBytes, 1, cfgMaxInputBytes) }},
		{"max-output-bytes", "MCP_EXEC_MAX_OUTPUT_BYTES", "1m", "stdout+stderr kept per run; the rest is cut (bytes, or with unit k/m)",
			(*cfgSize)(&c.MaxOutputBytes), func() string { return cfgSizeRange(c.MaxOutputBytes, cfgMinOutputBytes, cfgMaxOutputBytes) }},
		{"max-files", "MCP_EXEC_MAX_FILES", "32", "input files one call may carry",
			(*cfgInt)(&c.MaxFiles), func() string { return cfgIntRange(c.MaxFiles, 0, 1000) }},
		{"max-file-bytes", "MCP_EXEC_MAX_FILE_BYTES", "8m", "largest file passed in or returned from /tmp/outputs (bytes, or with unit k/m)",
			(*cfgSize)(&c.MaxFileBytes), func() string { return cfgSizeRange(c.MaxFileBytes, 1, cfgMaxInputBytes) }},
		{"max-files-bytes", "MCP_EXEC_MAX_FILES_BYTES", "16m", "all files of one call together, in and out each (bytes, or with unit k/m)",
			(*cfgSize)(&c.MaxFilesBytes), func() string { return cfgSizeRange(c.MaxFilesBytes, 1, cfgMaxInputBytes) }},
		{"image", "MCP_EXEC_IMAGE", "mcp-exec/python-sandbox:v1", "sandbox image",
			(*cfgString)(&c.Image),
			func() string {
				return cfgUnless(c.Image != "" && !strings.ContainsFunc(c.Image, unicode.IsSpace), "must be a non-empty image reference without spaces, got %q", c.Image)
			}},
		{"python", "MCP_EXEC_PYTHON", "python3", "Python interpreter inside the image",
			(*cfgString)(&c.Python), func() string { return cfgUnless(c.Python != "", "must not be empty") }},
		{"upstreams", "MCP_EXEC_UPSTREAMS", "", "code mode: JSON file of upstream MCP servers (mcpServers) whose allowed tools programs may call (docker and kubernetes backends; refused with process); empty: off",
			(*cfgString)(&c.Upstreams), func() string {
				if _, err := upstream.Load(c.Upstreams); c.Upstreams != "" && err != nil {
					return err.Error()
				}
				return ""
			}},
		{"upstream-max-sessions", "MCP_EXEC_UPSTREAM_MAX_SESSIONS", "16", "code mode: sessions one upstream server (not \"shared\") has open at once, one per calling identity; a further identity's calls fail as unavailable",
			(*cfgInt)(&c.UpstreamMaxSessions), func() string { return cfgIntRange(c.UpstreamMaxSessions, 1, 1024) }},
		{"upstream-idle-timeout-s", "MCP_EXEC_UPSTREAM_IDLE_TIMEOUT_S", "300", "code mode: seconds without a call after which an identity's upstream session closes (and what the upstream kept in it is gone)",
			(*cfgSeconds)(&c.UpstreamIdleTimeout),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.UpstreamIdleTimeout), cfgSecondsUpTo(c.UpstreamIdleTimeout, 24*time.Hour))
			}},
		{"memory", "MCP_EXEC_MEMORY", "256m", "memory limit per sandbox (e.g. 256m, 1g, or bytes)",
			(*cfgSize)(&c.Memory), func() string { return cfgSizeRange(c.Memory, cfgMinMemory, math.MaxInt64) }},
		{"pids", "MCP_EXEC_PIDS", "128", "process limit per sandbox",
			(*cfgInt64)(&c.Pids), func() string { return cfgAtLeast(c.Pids, cfgMinPids) }},
		{"cpus", "MCP_EXEC_CPUS", "1", "CPU limit per sandbox (fractions allowed)",
			(*cfgFloat)(&c.CPUs), func() string { return cfgPositiveUpTo(c.CPUs, cfgMaxCPUs) }},
		{"tmpfs-size", "MCP_EXEC_TMPFS_SIZE", "64m", "size of the writable /tmp per sandbox",
			(*cfgSize)(&c.TmpfsSize), func() string { return cfgSizeRange(c.TmpfsSize, cfgMinTmpfs, math.MaxInt64) }},
		{"backend", "MCP_EXEC_BACKEND", "docker", "where sandboxes run: docker (a Docker or Podman engine), kubernetes (one pod per sandbox) or process (standalone mode: each exec a child process of the server in its own locked container; max-concurrent defaults to 1, pool-size to 0)",
			(*cfgString)(&c.Backend), func() string { return cfgOneOf(c.Backend, cfgBackends) }},
		{"engine-host", "MCP_EXEC_ENGINE_HOST", "", "container engine address, e.g. unix:///run/docker.sock; empty: DOCKER_HOST or the engine's default socket",
			(*cfgString)(&c.EngineHost),
			func() string {
				return cfgUnless(c.EngineHost == "" || strings.Contains(c.EngineHost, "://"), "must be an address with a scheme such as unix:///var/run/docker.sock, tcp://host:2376 or ssh://user@host, got %q", c.EngineHost)
			}},
		{"allow-insecure-engine", "MCP_EXEC_ALLOW_INSECURE_ENGINE", "false", "connect to a tcp:// engine off this machine without verified TLS (plain TCP, or DOCKER_TLS without DOCKER_TLS_VERIFY; UNSAFE; logged loudly)",
			(*cfgBool)(&c.AllowInsecureEngine), nil},
		{"runtime", "MCP_EXEC_RUNTIME", "", "OCI runtime, e.g. runc, crun, runsc; empty: the engine's default (kubernetes: the pods' RuntimeClass, e.g. gvisor)",
			(*cfgString)(&c.Runtime),
			func() string {
				return cfgUnless(c.Runtime == "" || cfgRuntimeRE.MatchString(c.Runtime), "must be a runtime name such as runc, crun or runsc, got %q", c.Runtime)
			}},
		{"kubeconfig", "MCP_EXEC_KUBECONFIG", "", "kubernetes: kubeconfig file; empty: in a pod its ServiceAccount, else KUBECONFIG or ~/.kube/config",
			(*cfgString)(&c.Kubeconfig), nil},
		{"kube-context", "MCP_EXEC_KUBE_CONTEXT", "", "kubernetes: kubeconfig context; empty: its current context",
			(*cfgString)(&c.KubeContext), nil},
		{"kube-namespace", "MCP_EXEC_KUBE_NAMESPACE", kube.DefaultNamespace, "kubernetes: namespace of the sandbox pods, a namespace of their own: never the server pod's (refused), which holds its token Secret",
			(*cfgString)(&c.KubeNamespace), func() string {
				if c.Backend != "kubernetes" {
					return ""
				}
				return cfgErrText(0, kube.CheckNamespace(c.KubeNamespace, ""))
			}},
		{"kube-user-namespace", "MCP_EXEC_KUBE_USER_NAMESPACE", "false", "kubernetes: run each sandbox pod in a user namespace of its own (hostUsers: false); every node that runs sandboxes must support it",
			(*cfgBool)(&c.KubeUserNamespace), nil},
		{"kube-node-selector", "MCP_EXEC_KUBE_NODE_SELECTOR", "", "kubernetes: node labels the sandbox pods require, k=v,k2=v2",
			(*cfgString)(&c.KubeNodeSelector), func() string { return cfgErrText(kube.ParseLabels(c.KubeNodeSelector)) }},
		{"kube-tolerations", "MCP_EXEC_KUBE_TOLERATIONS", "", "kubernetes: taints the sandbox pods tolerate, key[=value][:Effect],...",
			(*cfgString)(&c.KubeTolerations), func() string { return cfgErrText(kube.ParseTolerations(c.KubeTolerations)) }},
		{"kube-image-pull-policy", "MCP_EXEC_KUBE_IMAGE_PULL_POLICY", "IfNotPresent", "kubernetes: Always, IfNotPresent or Never",
			(*cfgString)(&c.KubePullPolicy), func() string { return cfgOneOf(c.KubePullPolicy, cfgPullPolicy) }},
		{"kube-pod-labels", "MCP_EXEC_KUBE_POD_LABELS", "", "kubernetes: extra labels on every sandbox pod, k=v,k2=v2 (never dev.mcp-exec.*)",
			(*cfgString)(&c.KubePodLabels), func() string { return cfgErrText(kube.ParseLabels(c.KubePodLabels)) }},
		{"kube-seccomp-profile", "MCP_EXEC_KUBE_SECCOMP_PROFILE", "", "kubernetes: a Localhost seccomp profile (path under the kubelet's seccomp directory); empty: RuntimeDefault",
			(*cfgString)(&c.KubeSeccompProfile), nil},
		{"kube-unschedulable-wait-s", "MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S", "30", "kubernetes: seconds a sandbox pod may find no node with room for it before its start fails with the scheduler's reason, unless a node autoscaler is adding one for it (the pod's events); 0: only the start timeout (2 minutes) bounds it",
			(*cfgSeconds)(&c.KubeUnschedulable), func() string { return cfgSecondsUpTo(c.KubeUnschedulable, kube.DefaultStartTimeout) }},
		{"max-concurrent", "MCP_EXEC_MAX_CONCURRENT", "2", "sandboxes running at once",
			(*cfgInt)(&c.MaxConcurrent), func() string { return cfgAtLeast(int64(c.MaxConcurrent), 1) }},
		{"max-queue", "MCP_EXEC_MAX_QUEUE", "64", "calls waiting for a free slot before new ones are refused",
			(*cfgInt)(&c.MaxQueue), func() string { return cfgAtLeast(int64(c.MaxQueue), 0) }},
		{"metrics-addr", "MCP_EXEC_METRICS_ADDR", "", "Prometheus /metrics: empty serves it on the http/sse listener, off disables it, host:port gives it a listener of its own",
			(*cfgString)(&c.MetricsAddr),
			func() string {
				ok := c.MetricsAddr == "" || c.MetricsAddr == "off" || cfgIsHostPort(c.MetricsAddr)
				return cfgUnless(ok, "must be empty, off, or host:port, got %q", c.MetricsAddr)
			}},
		{"stateless", "MCP_EXEC_STATELESS", "false", "streamable HTTP without sessions, so replicas need no affinity behind a load balancer (http only)",
			(*cfgBool)(&c.Stateless), nil},
		{"http-max-requests", "MCP_EXEC_HTTP_MAX_REQUESTS", "256", "http/sse: requests in flight at once, open streams included; beyond, 503 with Retry-After",
			(*cfgInt)(&c.HTTPMaxRequests), func() string { return cfgIntRange(c.HTTPMaxRequests, 1, 100000) }},
		{"http-body-timeout-s", "MCP_EXEC_HTTP_BODY_TIMEOUT_S", "60", "http/sse: seconds a request body may take to arrive whole; slower, 408 and the connection closed",
			(*cfgSeconds)(&c.HTTPBodyTimeout),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.HTTPBodyTimeout), cfgSecondsUpTo(c.HTTPBodyTimeout, time.Hour))
			}},
		{"shutdown-grace-s", "MCP_EXEC_SHUTDOWN_GRACE_S", "30", "seconds in-flight execs may take to finish after SIGTERM/SIGINT before their sandboxes are killed",
			(*cfgSeconds)(&c.ShutdownGrace), func() string { return cfgSecondsUpTo(c.ShutdownGrace, cfgMaxTimeoutCap) }},
		{"engine-wait-s", "MCP_EXEC_ENGINE_WAIT_S", "60", "seconds a call waits for an engine that went away (a restart) before it fails, at most its own timeout; 0: it fails at once",
			(*cfgSeconds)(&c.EngineWait), func() string { return cfgSecondsUpTo(c.EngineWait, cfgMaxTimeoutCap) }},
		{"allow-unenforced-limits", "MCP_EXEC_ALLOW_UNENFORCED_LIMITS", "false", "serve even when the engine does not enforce the memory, pids or CPU limit (UNSAFE; logged loudly)",
			(*cfgBool)(&c.AllowUnenforcedLimits), nil},
		{"pool-size", "MCP_EXEC_POOL_SIZE", "2", "sandboxes kept started and waiting for code (0: cold mode, one container started per call)",
			(*cfgInt)(&c.PoolSize), func() string { return cfgIntRange(c.PoolSize, 0, cfgMaxPool) }},
		// Sessions (docs/sessions.md).
		{"max-sessions", "MCP_EXEC_MAX_SESSIONS", "4", "sessions (session_create) open at once; 0 removes the session tools (docker and kubernetes backends only)",
			(*cfgInt)(&c.MaxSessions), func() string { return cfgIntRange(c.MaxSessions, 0, cfgMaxSessions) }},
		{"max-sessions-per-identity", "MCP_EXEC_MAX_SESSIONS_PER_IDENTITY", "-1", "sessions open at once for one identity (an OAuth subject; with the static token or stdio every client is one identity); -1: a fair share, half of --max-sessions (at least 1) with --oauth-issuer, else no bound but --max-sessions; 0: no bound but --max-sessions",
			(*cfgInt)(&c.MaxSessionsPerIdentity), func() string { return cfgIntRange(c.MaxSessionsPerIdentity, -1, cfgMaxSessions) }},
		{"session-idle-timeout-s", "MCP_EXEC_SESSION_IDLE_TIMEOUT_S", "600", "seconds without a call after which a session ends (each call restarts the clock)",
			(*cfgSeconds)(&c.SessionIdleTimeout),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.SessionIdleTimeout), cfgSecondsUpTo(c.SessionIdleTimeout, 24*time.Hour))
			}},
		{"session-max-lifetime-s", "MCP_EXEC_SESSION_MAX_LIFETIME_S", "3600", "seconds after session_create at which a session ends in any case",
			(*cfgSeconds)(&c.SessionMaxLifetime),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.SessionMaxLifetime), cfgSecondsUpTo(c.SessionMaxLifetime, 7*24*time.Hour))
			}},
		{"session-memory", "MCP_EXEC_SESSION_MEMORY", "512m", "memory limit of a session's sandbox, its interpreter and each call together (e.g. 512m, 1g, or bytes)",
			(*cfgSize)(&c.SessionMemory), func() string { return cfgSizeRange(c.SessionMemory, cfgMinMemory, math.MaxInt64) }},
		{"session-pool-size", "MCP_EXEC_SESSION_POOL_SIZE", "1", "session sandboxes kept started for session_create, at most --max-sessions (docker backend; 0: each session starts its sandbox cold; a pooled session's lifetime counts from its sandbox's start, at most 5 min earlier: docs/sessions.md)",
			(*cfgInt)(&c.SessionPoolSize), func() string { return cfgIntRange(c.SessionPoolSize, 0, cfgMaxPool) }},
		// Background runs (docs/background-runs.md).
		{"max-background-runs", "MCP_EXEC_MAX_BACKGROUND_RUNS", "8", "background runs (exec with background) kept at once, running or with a result not yet expired; bounds the memory results take (this times one result's caps); 0 removes background, run_wait and run_cancel (on kubernetes: 0 unless set, opt-in since a kept result holds its pod until --run-ttl-s; kept in the runs' pods, every replica's counted together)",
			(*cfgInt)(&c.MaxBackgroundRuns), func() string { return cfgIntRange(c.MaxBackgroundRuns, 0, cfgMaxBackgroundRuns) }},
		{"max-background-runs-per-identity", "MCP_EXEC_MAX_BACKGROUND_RUNS_PER_IDENTITY", "-1", "background runs kept at once for one identity, counted as --max-background-runs; -1: half of --max-background-runs (at least 1) with --oauth-issuer, else no bound but --max-background-runs; 0: no bound but --max-background-runs",
			(*cfgInt)(&c.MaxBackgroundRunsPerIdentity), func() string { return cfgIntRange(c.MaxBackgroundRunsPerIdentity, -1, cfgMaxBackgroundRuns) }},
		{"run-ttl-s", "MCP_EXEC_RUN_TTL_S", "900", "seconds a background run's result is kept after the run ends (for any number of run_wait calls), then removed",
			(*cfgSeconds)(&c.RunTTL),
			func() string {
				return cmp.Or(cfgAtLeastOneSecond(c.RunTTL), cfgSecondsUpTo(c.RunTTL, 24*time.Hour))
			}},
		{"run-results-max-bytes", "MCP_EXEC_RUN_RESULTS_MAX_BYTES", "160m", "memory for background runs' results: a running run holds the most its result can take, an ended one its result's size until it expires; a run that does not fit is refused at its start; unset, at least one result at the output caps; 0: no bound but --max-background-runs",
			(*cfgSize)(&c.RunResultsMaxBytes), c.runResultsCheck},
		{"preload", "MCP_EXEC_PRELOAD", "", "comma-separated modules each sandbox imports before its code arrives, e.g. numpy,pandas",
			(*cfgString)(&c.Preload),
			func() string {
				return cfgUnless(c.Preload == "" || cfgPreloadRE.MatchString(c.Preload), "must be module names separated by commas (e.g. numpy,pandas), got %q", c.Preload)
			}},
		{"languages", "MCP_EXEC_LANGUAGES", "python,javascript,typescript,bash", "comma-separated languages exec's language may name, from python, javascript, typescript and bash (python among them); each one besides python is checked at start by running a program in it, and the server refuses to start when the image cannot",
			(*cfgString)(&c.Languages), func() string { return cfgLanguages(c.Languages) }},
		{"pool-prestart", "MCP_EXEC_POOL_PRESTART", "", "comma-separated languages of --languages besides python (bash, javascript) whose interpreter each warm-pool sandbox starts ahead, waiting for its code: a warm call in it skips the interpreter's start, a call in another language kills the idle one first; off by default, since it costs every pooled sandbox a process, its memory and its start for calls that are mostly Python",
			(*cfgString)(&c.PoolPrestart), func() string { return cfgPrestart(c.PoolPrestart, c.Languages) }},
		{"instance", "MCP_EXEC_INSTANCE", cfgHostDefault, "label value marking this server's containers (default: host name)",
			(*cfgString)(&c.Instance),
			func() string {
				return cfgUnless(cfgInstanceRE.MatchString(c.Instance), "must match %s, got %q", cfgInstanceRE, c.Instance)
			}},
		{"log-level", "MCP_EXEC_LOG_LEVEL", "info", "trace, debug, info, warn or error",
			(*cfgString)(&c.LogLevel), func() string { return cfgOneOf(c.LogLevel, cfgLogLevels) }},
		{"log-format", "MCP_EXEC_LOG_FORMAT", "auto", "auto (json unless stderr is a terminal), json or console",
			(*cfgString)(&c.LogFormat), func() string { return cfgOneOf(c.LogFormat, cfgLogFormats) }},
		// Egress profiles (egress.go).
		{"egress-profiles", "MCP_EXEC_EGRESS_PROFILES", "", "JSON file of egress profiles: a call may name one in exec's egress to reach its hosts through the server's proxy (docker backend: a socket per sandbox; kubernetes: port-forward streams to the pod; a start-up check proves a sandbox reaches its channel: under gVisor the runtime needs --host-uds=open); empty: none, no network at all",
			(*cfgString)(&c.EgressProfiles), func() string { return cfgEgressProfiles(*c) }},
		{"egress-dir", "MCP_EXEC_EGRESS_DIR", "", "egress: directory of the per-sandbox proxy sockets, bind-mounted into sandboxes, so the same path on the engine's host (required when the server runs in a container); empty: under the temp directory",
			(*cfgString)(&c.EgressDir),
			func() string {
				return cfgUnless(c.EgressDir == "" || filepath.IsAbs(c.EgressDir), "must be an absolute path, got %q", c.EgressDir)
			}},
		{"egress-audit", "MCP_EXEC_EGRESS_AUDIT", "", "egress: file of the audit log, one JSON line per connection and per request to a host with inject rules (metadata only; rotated to FILE.1 past 64 MiB), or - for stdout (not with --transport stdio); empty: none",
			(*cfgString)(&c.EgressAudit), func() string { return cfgEgressAudit(*c) }},
		{"egress-inject-ca", "MCP_EXEC_EGRESS_INJECT_CA", "", "egress: PEM file of the CAs that hosts with inject rules are verified against, instead of the system's trust store",
			(*cfgString)(&c.EgressInjectCA), func() string { return cfgEgressInjectCA(*c) }},
	}
}

// cfgHostDefault, as a default, stands for the host name (cfgHostname).
const cfgHostDefault = "$HOSTNAME"

// Defaults returns the built-in defaults, before environment and flags.
func Defaults() Config {
	var c Config
	for _, f := range cfgTable(&c) {
		def := f.def
		if def == cfgHostDefault {
			def, _ = cfgHostname() // on failure the empty Instance fails Validate
		}
		if err := f.value.Set(def); err != nil {
			panic(fmt.Sprintf("default of --%s: %v", f.flag, err)) // a bad table; TestLoadDefaults catches it
		}
	}
	return c
}

// cfgNeedsIssuer: an OAuth setting given without --oauth-issuer.
func cfgNeedsIssuer(c Config, v string) string {
	if c.OAuthIssuer == "" && v != "" {
		return "needs " + Name("oauth-issuer")
	}
	return ""
}

func cfgOneOf(got string, set []string) string {
	if slices.Contains(set, got) {
		return ""
	}
	return fmt.Sprintf("must be one of %s, got %q", strings.Join(set, ", "), got)
}

func cfgAtLeast(got, min int64) string {
	if got < min {
		return fmt.Sprintf("must be at least %d, got %d", min, got)
	}
	return ""
}

// cfgUnless is "" when ok holds, else the message.
// cfgLanguages: known names, no repeats, python among them (the bootstrap itself is
// Python, and so are sessions and code mode).
func cfgLanguages(s string) string {
	seen := map[string]bool{}
	for _, l := range SplitList(s) {
		if l != "python" && l != "javascript" && l != "typescript" && l != "bash" {
			return fmt.Sprintf("must be languages separated by commas, from python, javascript, typescript and bash; got %q", l)
		}
		if seen[l] {
			return fmt.Sprintf("names %q twice", l)
		}
		seen[l] = true
	}
	return cfgUnless(seen["python"], "must include python (the default language), got %q", s)
}

// cfgPrestart: languages of --languages whose interpreter a pooled sandbox can start
// ahead. Python's is there in every sandbox already.
func cfgPrestart(s, languages string) string {
	for _, l := range SplitList(s) {
		if l != "bash" && l != "javascript" {
			return fmt.Sprintf("must be languages separated by commas, from bash and javascript; got %q", l)
		}
		if !slices.Contains(SplitList(languages), l) {
			return fmt.Sprintf("names %q, which is not one of %s (%q)", l, Name("languages"), languages)
		}
	}
	return ""
}

func cfgUnless(ok bool, format string, a ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, a...)
}

func cfgIsHostPort(s string) bool {
	_, _, err := net.SplitHostPort(s)
	return err == nil
}

func cfgIntRange(got, min, max int) string {
	return cfgUnless(got >= min && got <= max, "must be from %d to %d, got %d", min, max, got)
}

func cfgAtLeastOneSecond(got time.Duration) string {
	return cfgUnless(got >= time.Second, "must be at least 1, got %s", FormatSeconds(got))
}

func cfgPositiveUpTo(got, max float64) string {
	// NaN fails both comparisons.
	return cfgUnless(got > 0 && got <= max, "must be more than 0 and at most %g, got %g", max, got)
}

func cfgSecondsUpTo(got, max time.Duration) string {
	return cfgUnless(got >= 0 && got <= max, "must be from 0 to %d, got %s", int64(max/time.Second), FormatSeconds(got))
}

func cfgSizeRange(got, min, max int64) string {
	switch {
	case got < min:
		return fmt.Sprintf("must be at least %s, got %s", cfgFormatSize(min), cfgFormatSize(got))
	case got > max:
		return fmt.Sprintf("must be at most %s, got %s", cfgFormatSize(max), cfgFormatSize(got))
	}
	return ""
}

// Name is how errors name a setting: "--memory (MCP_EXEC_MEMORY)".
func Name(flagName string) string {
	for _, f := range cfgFields {
		if f.flag == flagName {
			return fmt.Sprintf("--%s (%s)", flagName, f.env)
		}
	}
	panic("config.Name: no setting --" + flagName)
}

// Var is the environment variable of the setting s, "" when there is none: the one
// backend.Vars, which the libraries' messages name settings with (they know flags
// only; backend.Spell).
func Var(s backend.Setting) string {
	for _, f := range cfgFields {
		if f.flag == string(s) {
			return f.env
		}
	}
	return ""
}

// Load builds the configuration from the environment (getenv) and the arguments
// (flag syntax), validates it, and returns it. fs is the flag set to register on
// (so subcommands can reuse it); its Usage is the caller's, which prints Usage's
// text among its own. A nil getenv means os.Getenv. An empty variable counts as unset. A variable
// that does not parse is an error naming the variable, even when the flag is
// also given. flag.ErrHelp is returned as is. On error the Config is zero.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	if fs == nil {
		fs = flag.NewFlagSet("mcp-exec", flag.ContinueOnError)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Defaults()
	var errs []error
	for _, f := range cfgTable(&c) {
		v := f.value
		if s := getenv(f.env); s != "" {
			if err := v.Set(s); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is invalid (flag --%s): %w", f.env, s, f.flag, err))
			}
		}
		// The variable, already applied, becomes the flag's default.
		fs.Var(v, f.flag, f.help+" ("+f.env+")")
	}
	c.AuthToken = Secret(getenv(AuthTokenEnv))
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	explicit := map[string]bool{} // the flags set on the command line
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if c.Backend == "process" {
		// Standalone mode: runs share the server's user, so they are serialized and
		// none is started ahead of its call, unless the operator says otherwise.
		if !explicit["max-concurrent"] && getenv("MCP_EXEC_MAX_CONCURRENT") == "" {
			c.MaxConcurrent = 1
		}
		if !explicit["pool-size"] && getenv("MCP_EXEC_POOL_SIZE") == "" {
			c.PoolSize = 0
		}
	}

	if c.Backend == "kubernetes" && !explicit["max-background-runs"] && getenv("MCP_EXEC_MAX_BACKGROUND_RUNS") == "" {
		// Opt-in there: a kept result holds its pod (its CPU and memory requests) until
		// --run-ttl-s, and a run's pod is started beside the warm pool's, so on a small
		// cluster runs and the pool can starve each other. Setting the bound turns them on.
		c.MaxBackgroundRuns = 0
	}
	c.MaxSessionsPerIdentity = c.sessionsPerIdentity()
	c.MaxBackgroundRunsPerIdentity = fairShare(c.MaxBackgroundRunsPerIdentity, c.MaxBackgroundRuns, c.OAuthIssuer != "")
	if !explicit["run-results-max-bytes"] && getenv("MCP_EXEC_RUN_RESULTS_MAX_BYTES") == "" {
		// The default holds at least one result at the output caps set, so that raising
		// them does not refuse every background run.
		c.RunResultsMaxBytes = max(c.RunResultsMaxBytes, mcpserver.ResultCap(c.MaxOutputBytes, c.MaxFilesBytes))
	}

	if c.AuthTokenFile != "" {
		if c.AuthToken.Set() {
			errs = append(errs, fmt.Errorf("%s and %s are both set; use one", AuthTokenEnv, Name("auth-token-file")))
		} else if tok, err := cfgReadToken(c.AuthTokenFile); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", Name("auth-token-file"), err))
		} else {
			c.AuthToken = Secret(tok)
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// cfgReadToken reads a token file. Its errors never contain the file's content.
func cfgReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading token: %w", err)
	}
	tok := strings.TrimRight(string(b), "\r\n")
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// Validate checks every field and returns all problems at once (errors.Join),
// each naming the flag and the variable. It never mentions the token's value.
func (c Config) Validate() error {
	var errs []error
	for _, f := range cfgTable(&c) {
		if f.check == nil {
			continue
		}
		if msg := f.check(); msg != "" {
			errs = append(errs, fmt.Errorf("%s %s", Name(f.flag), msg))
		}
	}
	errs = append(errs, cfgStandalone(c)...)
	// The token: its value never goes into a message.
	if strings.ContainsFunc(c.AuthToken.Reveal(), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}) {
		errs = append(errs, fmt.Errorf("the auth token (%s or %s) must not contain spaces or control characters",
			AuthTokenEnv, Name("auth-token-file")))
	}
	return errors.Join(errs...)
}

// SplitList splits a comma-separated setting (--preload, --standalone-egress-probes);
// empty is none.
func SplitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// fairShare resolves a per-identity bound's -1 (sessionsPerIdentity) for a
// server-wide bound of all.
func fairShare(perIdentity, all int, oauth bool) int {
	switch {
	case perIdentity != -1:
		return perIdentity
	case !oauth || all == 0:
		return 0
	}
	return max(all/2, 1)
}

// sessionsPerIdentity resolves --max-sessions-per-identity's -1: under OAuth, where
// callers are identities of their own, half of --max-sessions (at least 1), so that
// one cannot hold every session; otherwise every client is one identity, and a share
// would only shrink --max-sessions. Any other value is the operator's and stays.
func (c Config) sessionsPerIdentity() int {
	return fairShare(c.MaxSessionsPerIdentity, c.MaxSessions, c.OAuthIssuer != "")
}

// TokenSet reports whether an auth token is configured.
func (c Config) TokenSet() bool { return c.AuthToken.Set() || c.AuthTokenSHA256 != "" }

// AuthOn reports whether http/sse requests must carry a credential.
func (c Config) AuthOn() bool { return c.TokenSet() || c.OAuthIssuer != "" }

// TokenSum is the token's SHA-256 from AuthTokenSHA256, nil when it is not set.
func (c Config) TokenSum() []byte {
	b, err := hex.DecodeString(c.AuthTokenSHA256)
	if err != nil || len(b) != sha256.Size {
		return nil
	}
	return b
}

// Scopes splits OAuthScopes at commas and spaces.
func (c Config) Scopes() []string {
	return strings.FieldsFunc(c.OAuthScopes, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// LogFields adds every field to e, for logging the configuration once at start,
// keyed by the flag's name in snake_case. The token is shown as "[redacted]" when set
// and "" when not, never itself. Durations are in seconds and sizes in bytes.
func (c Config) LogFields(e *zerolog.Event) *zerolog.Event {
	for _, f := range cfgTable(&c) {
		if f.flag == "auth-token-file" {
			e = e.Str("auth_token", c.AuthToken.String())
		}
		key := strings.ReplaceAll(f.flag, "-", "_")
		switch v := f.value.(flag.Getter).Get().(type) {
		case string:
			e = e.Str(key, v)
		case bool:
			e = e.Bool(key, v)
		case int:
			e = e.Int(key, v)
		case int64:
			e = e.Int64(key, v)
		case float64:
			e = e.Float64(key, v)
		case time.Duration:
			e = e.Float64(key, v.Seconds())
		default:
			panic(fmt.Sprintf("LogFields: --%s has a value of type %T", f.flag, v))
		}
	}
	return e
}

// Usage writes the help text of the settings: every flag with its default,
// description and variable, then the settings that exist only as variables. Flags
// registered on fs by others (a subcommand's) are listed after the settings' flags.
func Usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintln(w, "Flags (each defaults to its environment variable when set; a flag given here wins):")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	line := func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		name := "--" + f.Name
		if def != "" {
			name += " " + def
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, f.Usage)
	}
	known := make(map[string]bool, len(cfgFields))
	for _, cf := range cfgFields {
		known[cf.flag] = true
		if f := fs.Lookup(cf.flag); f != nil {
			line(f)
		}
	}
	var others []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !known[f.Name] {
			others = append(others, f)
		}
	})
	sort.Slice(others, func(i, j int) bool { return others[i].Name < others[j].Name })
	for _, f := range others {
		line(f)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Environment only (no flag, since flags are visible in ps):")
	tw = tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "  %s\t%s\n", AuthTokenEnv, "bearer token http/sse clients must send; or use --auth-token-file, not both")
	tw.Flush()
}

// flag.Value types. Each is a named form of the field's type, so the zero value
// is usable (flag.PrintDefaults calls String on it) and a Config field converts
// to it with a pointer conversion.

// cfgString is a string flag.
type cfgString string

func (v *cfgString) String() string     { return string(*v) }
func (v *cfgString) Set(s string) error { *v = cfgString(s); return nil }
func (v *cfgString) Get() any           { return string(*v) }

// cfgBool is a boolean flag: --name alone means true.
type cfgBool bool

func (v *cfgBool) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *cfgBool) Get() any         { return bool(*v) }
func (v *cfgBool) IsBoolFlag() bool { return true }
func (v *cfgBool) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*v = cfgBool(b)
	return nil
}

// cfgInt is an int flag.
type cfgInt int

func (v *cfgInt) String() string { return strconv.Itoa(int(*v)) }
func (v *cfgInt) Get() any       { return int(*v) }
func (v *cfgInt) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, strconv.IntSize)
	if err != nil {
		return cfgNumError(err)
	}
	*v = cfgInt(n)
	return nil
}

// cfgInt64 is an int64 flag.
type cfgInt64 int64

func (v *cfgInt64) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *cfgInt64) Get() any       { return int64(*v) }
func (v *cfgInt64) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return cfgNumError(err)
	}
	*v = cfgInt64(n)
	return nil
}

// cfgFloat is a float64 flag.
type cfgFloat float64

func (v *cfgFloat) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *cfgFloat) Get() any       { return float64(*v) }
func (v *cfgFloat) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return cfgNumError(err)
	}
	*v = cfgFloat(f)
	return nil
}

// cfgSeconds is a time.Duration given as a whole number of seconds.
type cfgSeconds time.Duration

func (v *cfgSeconds) String() string { return FormatSeconds(time.Duration(*v)) }
func (v *cfgSeconds) Get() any       { return time.Duration(*v) }
func (v *cfgSeconds) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number of seconds: %w", cfgNumError(err))
	}
	if n > math.MaxInt64/int64(time.Second) || n < math.MinInt64/int64(time.Second) {
		return fmt.Errorf("%d seconds is out of range", n)
	}
	*v = cfgSeconds(time.Duration(n) * time.Second)
	return nil
}

// cfgSize is a byte count that accepts units: "1048576", "64m", "1g", "256MiB"
// (binary multiples, as docker's --memory).
type cfgSize int64

func (v *cfgSize) String() string { return cfgFormatSize(int64(*v)) }
func (v *cfgSize) Get() any       { return int64(*v) }
func (v *cfgSize) Set(s string) error {
	n, err := units.RAMInBytes(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want bytes or a size such as 64m or 1g: %w", err)
	}
	if n < 0 { // the float behind the parse overflowed int64
		return fmt.Errorf("size %q is out of range", s)
	}
	*v = cfgSize(n)
	return nil
}

// cfgNumError drops strconv's `strconv.ParseInt: parsing "x":` prefix, which
// repeats the value the caller already names.
func cfgNumError(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// cfgFormatSize writes n with the largest binary unit that divides it exactly:
// 268435456 -> "256m", 1073741824 -> "1g", 1000 -> "1000".
func cfgFormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"t", units.TiB}, {"g", units.GiB}, {"m", units.MiB}, {"k", units.KiB}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// FormatSeconds writes d as whole seconds ("30"), or as a duration ("1.5s")
// when it is not a whole number of seconds.
func FormatSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10)
	}
	return d.String()
}

// cfgErrText is a parser's complaint as a check's message ("" when it parsed).
func cfgErrText[T any](_ T, err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}
