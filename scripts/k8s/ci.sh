#!/bin/bash
# The Kubernetes part of scripts/test.sh: brings the test cluster up (building its binaries
# once), runs what needs a real cluster, takes it down whatever happened, and checks that the
# host is as it was. Run alone: `bash scripts/k8s/ci.sh`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$here/env.sh"
before=$(mktemp)
# On exit, whatever happened: down, the host check, and the first failure as the exit status
# (the script's own, else down's, else the host check's).
finish() {
  local rc=$? down=0 check=0
  bash "$here/down.sh" || down=$?
  bash "$here/hostcheck.sh" check "$before" || check=$?
  rm -f "$before"
  [ "$rc" != 0 ] || rc=$down
  [ "$rc" != 0 ] || rc=$check
  exit "$rc"
}
trap finish EXIT
bash "$here/hostcheck.sh" snapshot "$before"
s=$(date +%s)
bash "$here/up.sh"
kts "cluster up in $(( $(date +%s) - s )) s"
export MCP_EXEC_TEST_KUBECONFIG=$KUBECONFIG_ADMIN
# the node state TestLiveOutputNotOnNode searches for caller data (podLogsDir, containerd, ...)
export MCP_EXEC_TEST_KSTATE=$KSTATE

# The sandboxes' seccomp profiles (resolved for no capabilities) where the kubelet finds
# Localhost profiles: the one for runc, and the one for gVisor (clone3 allowed: runsc answers a
# denial with EPERM, and glibc falls back from clone3 to clone only on ENOSYS).
mkdir -p "$KSTATE/kubelet/seccomp/profiles"
go run ./cmd/mcp-exec seccomp-profile > "$KSTATE/kubelet/seccomp/profiles/mcp-exec.json"
go run ./cmd/mcp-exec seccomp-profile --gvisor > "$KSTATE/kubelet/seccomp/profiles/mcp-exec-gvisor.json"

# The manifests (server-side dry run, Pod Security, RBAC) and the backend, as the server's
# ServiceAccount, against the cluster. They apply docs/deploy/kubernetes' namespaces, ServiceAccount,
# Role, admission policy and NetworkPolicy for real. TestLiveGVisor* run pods of the RuntimeClass
# gvisor (~15 s).
MCP_EXEC_TEST_KUBE_GVISOR_SECCOMP=profiles/mcp-exec-gvisor.json \
  go test -race -count=1 -p 1 -timeout 20m ./launcher/kube/...

# A server on the Kubernetes backend: every probe of the selftest, under runc and under gVisor
# (RuntimeClass gvisor; --pids is RLIMIT_NPROC of the runsc runtime's base spec, up.sh; ~45 s),
# the TypeScript client's end-to-end test over stdio, HTTP and SSE, and sessions through the
# binary (TestKubeSessionServer: close, idle expiry, maximum lifetime; 50-70 s, most of it the
# expiry waits; TestKubeSessionReplicas: two replicas behind nginx serving one session, 19 s;
# TestE2ECodeMode: code mode, an upstream's tools called from a pod over the bridge, with
# --cpus 0.5 so that its session's pod fits beside the warm pool, 58 s;
# TestKubeRunReplicas: background runs and a task kept in their pods, served across two
# replicas behind nginx, one SIGKILLed, 57-63 s; TestKubeSessionsBesidePool: two sessions
# open at once beside a full warm pool, pods sized to fit the node's 2 CPUs, 13 s),
# the probes of what a session's holder changes as a session's first call
# (TestKubeSessionInvariants, $session_probes below: a session pod per probe, one after the
# other, about 5 s each at load ~15; the other probes check the pod's spec, which a session
# pod shares with a one-shot pod, and the selftests above ran them on those), and TestLiveSession, TestLiveGVisorSession and TestLiveSessionOutputNotOnNode
# run above with ./launcher/kube/... (9 s, 14 s, 10-30 s).
export MCP_EXEC_BACKEND=kubernetes MCP_EXEC_KUBECONFIG=$KUBECONFIG_ADMIN MCP_EXEC_KUBE_NAMESPACE=mcp-exec-sandbox \
  MCP_EXEC_KUBE_IMAGE_PULL_POLICY=Never MCP_EXEC_KUBE_SECCOMP_PROFILE=profiles/mcp-exec.json
go run ./cmd/mcp-exec selftest --log-level warn
MCP_EXEC_RUNTIME=gvisor MCP_EXEC_KUBE_SECCOMP_PROFILE=profiles/mcp-exec-gvisor.json MCP_EXEC_PIDS=$KGVISORPIDS \
  go run ./cmd/mcp-exec selftest --log-level warn
CI=true go test -count=1 -timeout 15m -run '^(TestE2E|TestE2ECodeMode|TestKubeRestartReapsOrphans|TestKubeSessionServer|TestKubeSessionReplicas|TestKubeRunReplicas|TestKubeSessionsBesidePool)$' ./e2e
# Sessions through the binary under the RuntimeClass gvisor (~45 s; TestLiveGVisorSharedSession
# ran above with ./launcher/kube/...).
MCP_EXEC_TEST_RUNTIME=gvisor CI=true go test -count=1 -timeout 10m -run '^TestKubeSessionServer$' ./e2e
session_probes='fds_only_std|bootstrap_unreachable|environment_isolated|runs_as_unprivileged_user|capabilities_empty|no_new_privs|seccomp_filter_active|seccomp_denies_dangerous_syscalls|core_dumps_disabled|memory_limit_kills_program|memory_oom_reported_for_child|pids_limit_stops_fork_bomb|tmp_not_persisted|daemon_not_persisted'
CI=true go test -count=1 -timeout 10m -run "^TestKubeSessionInvariants\$/^($session_probes)\$" ./cmd/mcp-exec

left=$(kc get pods -A -l dev.mcp-exec.role=sandbox --no-headers 2>/dev/null | wc -l)
if [ "$left" != 0 ]; then
  echo "$left sandbox pods were left:"; kc get pods -A -l dev.mcp-exec.role=sandbox --show-labels; exit 1
fi
kts "no sandbox pod left"
