#!/bin/bash
# The Kubernetes part of scripts/test.sh: brings the test cluster up (building its binaries
# once), runs what needs a real cluster, takes it down whatever happened, and checks that the
# host is as it was. Run alone: `bash scripts/k8s/ci.sh`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
. "$here/env.sh"
before=$(mktemp)
trap 'bash "$here/down.sh"; bash "$here/hostcheck.sh" check "$before"; rc=$?; rm -f "$before"; exit $rc' EXIT
bash "$here/hostcheck.sh" snapshot "$before"
s=$(date +%s)
bash "$here/up.sh"
kts "cluster up in $(( $(date +%s) - s )) s"
export MCP_EXEC_TEST_KUBECONFIG=$KUBECONFIG_ADMIN

# The manifests (server-side dry run, Pod Security, RBAC) and the backend, as the server's
# ServiceAccount, against the cluster.
go test -race -count=1 -p 1 -timeout 20m ./launcher/kube/...

left=$($KCACHE/bin/kubectl --kubeconfig "$KUBECONFIG_ADMIN" get pods -A -l dev.mcp-exec.role=sandbox --no-headers 2>/dev/null | wc -l)
if [ "$left" != 0 ]; then
  echo "$left sandbox pods were left:"; $KCACHE/bin/kubectl --kubeconfig "$KUBECONFIG_ADMIN" get pods -A -l dev.mcp-exec.role=sandbox; exit 1
fi
kts "no sandbox pod left"
