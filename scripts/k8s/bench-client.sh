#!/bin/bash
# bench-client.sh [bench.mjs arguments]: the client-side benchmark (`make bench-client`,
# cmd/mcp-exec-bench/client.sh) against the Kubernetes backend on the test cluster: brings
# the cluster up when it is not (and down again at the end only then), applies the sandbox
# namespace, its admission policy and NetworkPolicy, installs the seccomp profiles where the
# kubelet finds them, and runs the bench with MCP_EXEC_BACKEND=kubernetes. Its baselines are
# pods through the API server (bench.mjs, podBody). Markdown on stdout, progress on stderr.
# Under the RuntimeClass gvisor: bench-client.sh --runtime gvisor (the gVisor seccomp profile
# and process limit are then used, as scripts/k8s/ci.sh's selftest does).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$here/env.sh"
started=
if ! kc get --raw /readyz >/dev/null 2>&1; then
  bash "$here/up.sh" >&2
  started=1
fi
finish() { if [ -n "$started" ]; then bash "$here/down.sh" >&2; fi; }
trap finish EXIT
bash "$here/kns.sh" mcp-exec mcp-exec-sandbox >&2
kc apply -f docs/deploy/kubernetes/namespace.yaml -f docs/deploy/kubernetes/admission.yaml \
  -f docs/deploy/kubernetes/networkpolicy.yaml >&2
mkdir -p "$KSTATE/kubelet/seccomp/profiles"
go run ./cmd/mcp-exec seccomp-profile > "$KSTATE/kubelet/seccomp/profiles/mcp-exec.json"
go run ./cmd/mcp-exec seccomp-profile --gvisor > "$KSTATE/kubelet/seccomp/profiles/mcp-exec-gvisor.json"
export MCP_EXEC_BACKEND=kubernetes MCP_EXEC_KUBECONFIG=$KUBECONFIG_ADMIN MCP_EXEC_KUBE_NAMESPACE=mcp-exec-sandbox \
  MCP_EXEC_KUBE_IMAGE_PULL_POLICY=Never MCP_EXEC_KUBE_SECCOMP_PROFILE=profiles/mcp-exec.json
case " $* " in
  *" --runtime gvisor "*) export MCP_EXEC_KUBE_SECCOMP_PROFILE=profiles/mcp-exec-gvisor.json MCP_EXEC_PIDS=$KGVISORPIDS ;;
esac
bash cmd/mcp-exec-bench/client.sh "$@"
