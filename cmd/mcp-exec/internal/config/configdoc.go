package config

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// The settings table of docs/configuration.md is generated from cfgFields and
// cfgDocs, between these two lines (go generate ./cmd/mcp-exec runs
// TestConfigDocCurrent with -update-config-doc); the prose around it is written by hand.
// TestConfigDocCurrent fails when the page differs from what configDoc writes.
const (
	cfgDocBegin = "<!-- BEGIN settings: generated from cmd/mcp-exec/internal/config/config.go by `go generate ./cmd/mcp-exec`; do not edit -->"
	cfgDocEnd   = "<!-- END settings -->"
)

// cfgDoc is what the configuration page says of one setting: its default when the
// literal value would say less (empty: the value, or "(empty)"), and its meaning, in
// Markdown with links relative to docs/. The help text stays the short form --help
// prints.
type cfgDoc struct{ def, meaning string }

// cfgDocs has an entry for every setting of cfgFields and for the token variable,
// which has no flag; TestConfigDocCurrent checks that no setting lacks one.
var cfgDocs = map[string]cfgDoc{
	"MCP_EXEC_TRANSPORT":                 {"", "`stdio`, `http` or `sse`"},
	"MCP_EXEC_ADDR":                      {"", "listen address for http and sse"},
	"MCP_EXEC_STANDALONE_EGRESS_DENIED":  {"", "process backend serving http/sse: the operator states that egress outside the container is denied (a NetworkPolicy); the start-up check then proves it from a child, and refuses to serve without it"},
	"MCP_EXEC_STANDALONE_EGRESS_PROBES":  {"", "comma-separated `host:port` (TCP) or `udp:host:port` (a DNS query) that the start-up egress check must fail to reach; empty: public resolvers over IPv4, IPv6 and UDP, one address per private range, the metadata address. The container's resolvers (loopback ones too), gateways and neighbours (ARP, a bounded sweep of its subnets) are always tried as well (docs/standalone.md)"},
	"MCP_EXEC_AUTH_TOKEN":                {"(empty: off)", "token clients must send as `Authorization: Bearer` or `X-MCP-AUTH` on http/sse; no flag, since flags show in `ps`"},
	"MCP_EXEC_AUTH_TOKEN_FILE":           {"", "file holding that token (trailing newline trimmed); not both"},
	"MCP_EXEC_AUTH_TOKEN_SHA256":         {"", "the token's SHA-256 in hex (`printf %s \"$TOKEN\" \\| sha256sum`) instead of the token: the server never holds the token; the way in standalone mode, where `MCP_EXEC_AUTH_TOKEN` is refused ([The token](transports-and-auth.md#the-token-a-file-or-its-digest-never-the-environment)); not with the other two"},
	"MCP_EXEC_OAUTH_ISSUER":              {"(empty: off)", "accept JWT access tokens from this issuer ([OAuth](transports-and-auth.md#oauth-optional))"},
	"MCP_EXEC_OAUTH_RESOURCE":            {"", "this server's public MCP URL, e.g. `https://mcp-exec.example.com/mcp`; required with an issuer"},
	"MCP_EXEC_OAUTH_AUDIENCE":            {"`--oauth-resource`", "the audience a token must carry"},
	"MCP_EXEC_OAUTH_SCOPES":              {"", "scopes a token must carry, comma-separated"},
	"MCP_EXEC_OAUTH_JWKS_URL":            {"(from the issuer's metadata)", "the issuer's key set"},
	"MCP_EXEC_INSECURE_NO_AUTH":          {"", "serve http/sse beyond loopback with neither a token nor OAuth: anyone who reaches the port can run code. Without it such a server refuses to start, naming this flag; loopback (`127.0.0.0/8`, `::1`, `localhost`) needs no token; `:8080` is every interface (unsafe; logged as an error)"},
	"MCP_EXEC_DEFAULT_TIMEOUT_S":         {"", "wall-clock limit when a call names none"},
	"MCP_EXEC_MAX_TIMEOUT_S":             {"", "cap on `timeout_s`"},
	"MCP_EXEC_MAX_OUTPUT_BYTES":          {"`1m` (1048576)", "cap on stdout+stderr together"},
	"MCP_EXEC_MAX_STDIN_BYTES":           {"", "cap on `stdin`"},
	"MCP_EXEC_MAX_CODE_BYTES":            {"", "cap on `code`"},
	"MCP_EXEC_MAX_FILES":                 {"", "input files (`files`) one call may carry"},
	"MCP_EXEC_MAX_FILE_BYTES":            {"", "cap on one file, passed in or returned from `/tmp/outputs`"},
	"MCP_EXEC_MAX_FILES_BYTES":           {"", "cap on all files of a call together, in and out each"},
	"MCP_EXEC_PYTHON":                    {"", "interpreter inside the sandbox image"},
	"MCP_EXEC_LANGUAGES":                 {"", "languages exec's `language` may name, comma-separated, from `python`, `javascript` (Node.js), `typescript` (Node.js after esbuild) and `bash`; `python` must be among them. The tool's schema lists exactly these; each one besides Python is checked at start by a program run in it, and the server refuses to start when the image cannot run it (drop it here for an image without `node`, esbuild or the shell's tools). A session takes calls in each of them; code mode is Python's, JavaScript's and TypeScript's ([languages.md](languages.md))"},
	"MCP_EXEC_POOL_PRESTART":             {"", "languages besides Python whose interpreter each warm-pool sandbox starts ahead, waiting for its code, comma-separated from `bash` and `javascript`; each must be in `MCP_EXEC_LANGUAGES`. A warm call in it skips the interpreter's start (in the sandbox, bash 5.3 to 3.0 ms, JavaScript 84-151 to 32-53 ms); a call in another language waits for the idle interpreter's kill first (bash ~0.3 ms, node 3-6 ms). `javascript` needs the image's snapshot main (`images/python-sandbox/node-main.js`): the server refuses to start on an image without it. Off by default: every pooled sandbox pays a process, its memory (node: 14 MB and 7 of `MCP_EXEC_PIDS`) and its start (node: ~60-90 ms of CPU) for calls that are mostly Python ([languages.md](languages.md#speed))"},
	"MCP_EXEC_UPSTREAMS":                 {"(empty: off)", "[code mode](code-mode.md#code-mode-in-short): a JSON file of upstream MCP servers whose allowed tools programs may call; a bad file is a start-up error naming the server and field; docker and kubernetes backends (refused with `process`: [standalone.md](standalone.md))"},
	"MCP_EXEC_UPSTREAM_MAX_SESSIONS":     {"", "[code mode](code-mode.md#code-mode-in-short): sessions one upstream server (not `shared`) has open at once, one per calling identity; a further identity's calls fail as unavailable, naming this flag"},
	"MCP_EXEC_UPSTREAM_IDLE_TIMEOUT_S":   {"", "[code mode](code-mode.md#code-mode-in-short): seconds without a call after which an identity's upstream session closes (what the upstream kept in it is gone)"},
	"MCP_EXEC_IMAGE":                     {"", "sandbox image"},
	"MCP_EXEC_MEMORY":                    {"", "memory limit per sandbox; swap is off (memory+swap = this)"},
	"MCP_EXEC_PIDS":                      {"", "processes and threads per sandbox"},
	"MCP_EXEC_CPUS":                      {"", "CPU quota per sandbox (fractions allowed)"},
	"MCP_EXEC_TMPFS_SIZE":                {"", "size of the private `/tmp` (and `/dev/shm`)"},
	"MCP_EXEC_BACKEND":                   {"", "`docker` (a Docker or Podman engine: one sibling container per exec), `kubernetes` (a pod per sandbox; its `--kube*` settings are below and in [kubernetes.md](kubernetes.md)) or `process` (standalone mode: each exec a child process of the server in its own locked container; `--max-concurrent` must be 1 and `--pool-size` 0 there, their defaults in that mode; see [standalone.md](standalone.md))"},
	"MCP_EXEC_ENGINE_HOST":               {"", "engine address: `unix:///run/docker.sock`, `tcp://host:2376` (with the TLS variables below), `ssh://user@host`; empty: `DOCKER_HOST`, then the default socket"},
	"MCP_EXEC_ALLOW_INSECURE_ENGINE":     {"", "connect to a `tcp://` engine that is not on a loopback address without verified TLS (plain TCP, or `DOCKER_TLS` without `DOCKER_TLS_VERIFY`); refused otherwise (unsafe; logged as an error)"},
	"MCP_EXEC_RUNTIME":                   {"", "OCI runtime (`runc`, `crun`, `runsc`); empty: the engine's default; with `kubernetes`, the pods' RuntimeClass (`gvisor`, `kata`)"},
	"MCP_EXEC_KUBECONFIG":                {"", "kubernetes: kubeconfig file; empty: in a pod its ServiceAccount, else `KUBECONFIG` or `~/.kube/config`"},
	"MCP_EXEC_KUBE_CONTEXT":              {"", "kubernetes: kubeconfig context; empty: its current context"},
	"MCP_EXEC_KUBE_NAMESPACE":            {"", "kubernetes: namespace of the sandbox pods, a namespace of their own (no Secrets; an admission policy admits only sandbox-shaped pods there: `docs/deploy/kubernetes`); the server pod's own namespace, which holds its token Secret, is refused"},
	"MCP_EXEC_KUBE_USER_NAMESPACE":       {"", "kubernetes: run every sandbox pod in a user namespace of its own (`hostUsers: false`); every node that runs sandboxes must support it ([kubernetes.md](kubernetes.md#admission))"},
	"MCP_EXEC_KUBE_NODE_SELECTOR":        {"", "kubernetes: node labels the sandbox pods require, `k=v,k2=v2`"},
	"MCP_EXEC_KUBE_TOLERATIONS":          {"", "kubernetes: taints the sandbox pods tolerate, `key[=value][:Effect],...`"},
	"MCP_EXEC_KUBE_IMAGE_PULL_POLICY":    {"", "kubernetes: `Always`, `IfNotPresent` or `Never`"},
	"MCP_EXEC_KUBE_POD_LABELS":           {"", "kubernetes: extra labels on every sandbox pod, `k=v,k2=v2` (never `dev.mcp-exec.*`)"},
	"MCP_EXEC_KUBE_SECCOMP_PROFILE":      {"", "kubernetes: a Localhost seccomp profile (path under the kubelet's seccomp directory, e.g. the output of `mcp-exec seccomp-profile`); empty: `RuntimeDefault`. Either way the bootstrap's own filter denies io_uring and the rest of `launcher/syscalls` (docs/kubernetes.md)"},
	"MCP_EXEC_KUBE_UNSCHEDULABLE_WAIT_S": {"", "kubernetes: seconds a sandbox pod may find no node with room for it (nor a pod to preempt) before its start (`session_create` too) fails with the scheduler's reason and the settings that size the pods, unless its events say that a node autoscaler is adding a node for it (cluster-autoscaler's `TriggeredScaleUp`, Karpenter's `Nominated`); `0`: only the start timeout, 2 minutes, bounds it ([Sizing the cluster](kubernetes.md#scaling))"},
	"MCP_EXEC_MAX_CONCURRENT":            {"", "sandboxes running at once (the benchmark shows no throughput gain beyond the host's CPUs ÷ `--cpus`, only longer latency; see docs/benchmarks.md)"},
	"MCP_EXEC_MAX_QUEUE":                 {"", "calls that may wait for a slot; beyond, a \"busy, try again\" tool error"},
	"MCP_EXEC_POOL_SIZE":                 {"", "sandboxes kept started and waiting for code (the warm pool); `0`: cold mode, one container started per call"},
	"MCP_EXEC_MAX_SESSIONS":              {"", "[sessions](sessions.md#the-session-tools) open at once on this server (on kubernetes: in the sandbox namespace, every replica's together), each a sandbox of its own; `0` removes the session tools (`session_create`, `session_close`, exec's `session_id`); docker and kubernetes backends only (with the process backend the tools are absent)"},
	"MCP_EXEC_MAX_SESSIONS_PER_IDENTITY": {"`-1` (a fair share)", "sessions open at once for one identity (an OAuth issuer and subject; with the static token or stdio all clients are one identity); `-1`: with `--oauth-issuer` half of `--max-sessions`, at least 1 (2 of the default 4), so that no one identity holds them all; without OAuth no bound but `--max-sessions` (there is one identity: a share would only shrink it); `0`: no bound but `--max-sessions`; any other value is the bound"},
	"MCP_EXEC_SESSION_IDLE_TIMEOUT_S":    {"", "seconds without a call after which a session ends; each call restarts the clock"},
	"MCP_EXEC_SESSION_MAX_LIFETIME_S":    {"", "seconds after `session_create` at which a session ends in any case (a call in flight then finishes first)"},
	"MCP_EXEC_SESSION_MEMORY":            {"", "memory limit of a session's sandbox (its interpreter and each call together; a call runs in a copy-on-write fork of the interpreter); pids, CPUs and `/tmp` are the one-shot limits"},
	"MCP_EXEC_SESSION_POOL_SIZE":         {"", "session sandboxes kept started for `session_create` (docker backend only; at most `--max-sessions`; none when it is `0`); `0`: each session starts its sandbox cold. A session from the pool has up to 5 min less than `--session-max-lifetime-s` (its sandbox's wait; [Sessions](sessions.md#the-session-tools))"},
	"MCP_EXEC_PRELOAD":                   {"", "comma-separated modules each warm sandbox imports before its code arrives, e.g. `numpy,pandas` (measured: a pandas call 28 ms instead of ≈ 450 ms, for 6x the memory per idle sandbox and about half the sustained throughput; docs/benchmarks.md)"},
	"MCP_EXEC_STATELESS":                 {"", "streamable HTTP without sessions for every client, so replicas behind a load balancer need no affinity (2026-07-28 clients never get one)"},
	"MCP_EXEC_HTTP_MAX_REQUESTS":         {"", "http/sse: requests in flight at once, open streams (SSE sessions, GET streams) included; beyond, 503 with `Retry-After` at once ([Request size](transports-and-auth.md#http-and-sse))"},
	"MCP_EXEC_HTTP_BODY_TIMEOUT_S":       {"", "http/sse: seconds a request body may take to arrive whole, from the first byte read; slower, 408 and the connection closed (never applies to answers or streams)"},
	"MCP_EXEC_SHUTDOWN_GRACE_S":          {"", "after SIGTERM/SIGINT: seconds the execs in flight may take before their sandboxes are killed"},
	"MCP_EXEC_ENGINE_WAIT_S":             {"", "seconds a call waits for an engine that went away (a restart) before it fails, at most the call's own timeout; `0`: it fails at once (see [Operations](operations.md))"},
	"MCP_EXEC_METRICS_ADDR":              {"", "Prometheus `/metrics`: empty serves it on the http/sse listener behind the MCP endpoint's authentication, `off` disables it, `host:port` gives it (with `/healthz`, `/readyz`) a listener of its own without authentication ([Operations](operations.md))"},
	"MCP_EXEC_ALLOW_UNENFORCED_LIMITS":   {"", "serve even when the engine does not apply the memory, pids or CPU limit (unsafe; logged as an error)"},
	"MCP_EXEC_INSTANCE":                  {"host name", "label value marking this server's containers; servers may share one (each sandbox also names its server process: see below)"},
	"MCP_EXEC_LOG_LEVEL":                 {"", "`trace`, `debug`, `info`, `warn`, `error`"},
	"MCP_EXEC_LOG_FORMAT":                {"", "`auto` (JSON unless stderr is a terminal), `json`, `console`"},
	"MCP_EXEC_EGRESS_PROFILES":           {"(empty: none)", "[egress profiles](egress.md): a JSON file of named host/port allowlists a call may pick with `egress`; a bad file (IP literal, special name, wildcard over a public suffix) is a start-up error naming the profile and field; a profile's optional `inject` rules set headers (credentials by `${env:NAME}`/`${file:/path}`) on requests to named hosts ([egress-inject.md](egress-inject.md)); docker and kubernetes backends; a start-up check proves that a sandbox reaches its channel (under gVisor the runtime needs `--host-uds=open`: `--runtime runsc-egress`)"},
	"MCP_EXEC_EGRESS_DIR":                {"(empty: under the temp directory)", "egress: directory of the per-sandbox proxy sockets; the engine bind-mounts from it, so it must be the same path on the engine's host (required when the server runs in a container); at start the server removes the channel directories a server of its instance now gone left there, never a live server's nor another instance's"},
	"MCP_EXEC_EGRESS_AUDIT":              {"(empty: none)", "egress: the [audit log](egress-inject.md#the-audit-log), one JSON line per connection and per request to a host with inject rules (time, profile, channel, the `exec_id`, `run` or `session` its server log lines have, host, port, method and path for injected hosts, decision, reason, bytes, status, duration; never a body, a query or a header's value); a file rotated once to `FILE.1` past 64 MiB, or `-` for stdout (refused with `--transport stdio`)"},
	"MCP_EXEC_EGRESS_INJECT_CA":          {"(empty: the system's)", "egress: a PEM file of the CAs that the real hosts of [inject rules](egress-inject.md) are verified against (an internal API's CA)"},

	// Background runs: a block of its own, so that its long names leave the others' alignment be.
	"MCP_EXEC_MAX_BACKGROUND_RUNS":              {"`8` (kubernetes: `0` unless set)", "[background runs](background-runs.md) kept at once on this server: running, or ended with their result kept until `--run-ttl-s`; kept results take at most this many times one result's caps in memory; `0` removes exec's `background`, `run_wait` and `run_cancel`; on kubernetes background runs are opt-in (a kept result holds its pod, with its CPU and memory requests, until `--run-ttl-s`, and a run's pod starts beside the warm pool's): setting this turns them on; each run is kept in its pod, and the bound counts every replica's runs together"},
	"MCP_EXEC_MAX_BACKGROUND_RUNS_PER_IDENTITY": {"`-1` (a fair share)", "background runs kept at once for one identity, counted as `--max-background-runs`; `-1`: with `--oauth-issuer` half of `--max-background-runs`, at least 1; without OAuth no bound but `--max-background-runs`; `0`: no bound but `--max-background-runs`"},
	"MCP_EXEC_RUN_TTL_S":                        {"", "seconds a background run's result is kept after the run ends, for any number of `run_wait` calls; then it is removed and `run_wait` answers that it expired"},
	"MCP_EXEC_RUN_RESULTS_MAX_BYTES":            {"`160m` (eight results at the default caps; unset: at least one result at the output caps)", "memory for [background runs](background-runs.md#ttl-and-limits)' results: a running run holds the most its result can take (twice `--max-output-bytes`, plus `--max-files-bytes`, plus 64 KiB; 18.1 MiB with the defaults), an ended one its result's size until `--run-ttl-s`; a run that does not fit is refused at its start, naming this setting, so no result of a started run is lost; `0`: no bound but `--max-background-runs`"},
}

// configDoc returns page with the text between cfgDocBegin and cfgDocEnd replaced by
// the table of every setting: flag, variable, default, meaning, in cfgFields' order
// (the token variable just before the token file).
func configDoc(page []byte) ([]byte, error) {
	before, rest, ok := bytes.Cut(page, []byte(cfgDocBegin+"\n"))
	_, after, ok2 := bytes.Cut(rest, []byte(cfgDocEnd+"\n"))
	if !ok || !ok2 {
		return nil, errors.New("configuration page: no " + cfgDocBegin + " ... " + cfgDocEnd + " lines")
	}
	var b bytes.Buffer
	b.Write(before)
	b.WriteString(cfgDocBegin + "\n\n| flag | variable | default | meaning |\n|---|---|---|---|\n")
	row := func(flag, env, def string) error {
		d, ok := cfgDocs[env]
		if !ok {
			return fmt.Errorf("cfgDocs: no entry for %s", env)
		}
		def = "`" + def + "`"
		switch {
		case d.def != "":
			def = d.def
		case def == "``":
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", flag, env, def, d.meaning)
		return nil
	}
	tokenDone := false
	for _, f := range cfgFields {
		if !tokenDone && strings.HasPrefix(f.env, AuthTokenEnv+"_") {
			tokenDone = true
			if err := row("(none)", AuthTokenEnv, ""); err != nil {
				return nil, err
			}
		}
		if err := row("`--"+f.flag+"`", f.env, f.def); err != nil {
			return nil, err
		}
	}
	if len(cfgDocs) != len(cfgFields)+1 {
		return nil, fmt.Errorf("cfgDocs: %d entries for %d settings and the token variable", len(cfgDocs), len(cfgFields))
	}
	b.WriteString("\n" + cfgDocEnd + "\n")
	b.Write(after)
	return b.Bytes(), nil
}
