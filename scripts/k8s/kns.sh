#!/bin/bash
# kns.sh NAMESPACE...: creates each namespace (when missing) and its ServiceAccount "default".
# Pod admission needs that ServiceAccount even when a pod mounts no token, and the test cluster
# runs no controller-manager, whose serviceaccount controller would create it (blocker 4).
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/env.sh"
KC="$KCACHE/bin/kubectl --kubeconfig $KSTATE/etc/admin.kubeconfig"
for ns in "$@"; do
  $KC get namespace "$ns" >/dev/null 2>&1 || $KC create namespace "$ns"
  $KC -n "$ns" get serviceaccount default >/dev/null 2>&1 || $KC -n "$ns" create serviceaccount default
done
