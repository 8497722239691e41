#!/bin/bash
# kns.sh NAMESPACE...: creates each namespace (when missing) and its ServiceAccount "default".
# Pod admission needs that ServiceAccount even when a pod mounts no token, and the test cluster
# runs no controller-manager, whose serviceaccount controller would create it (blocker 4).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(cd "$(dirname "$0")" && pwd)/env.sh"
for ns in "$@"; do
  kc get namespace "$ns" >/dev/null 2>&1 || kc create namespace "$ns"
  kc -n "$ns" get serviceaccount default >/dev/null 2>&1 || kc -n "$ns" create serviceaccount default
done
