#!/usr/bin/env bash
# The prefetch of scripts/test.sh (see there): builds, at nice 19 (ionice idle where honoured),
# gVisor's runsc and the containerd shim of the test cluster's node, then the cluster's
# binaries, into their caches, when they are not there yet. Started in a session of its
# own, so that test.sh can stop the whole of it (the go builds too) if the run ends first.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
t=$SECONDS
ionice -c3 -p $$ >/dev/null 2>&1 || true
if [ -z "${MCP_EXEC_SKIP_GVISOR:-}" ]; then
  nice -n 19 bash scripts/gvisor-build.sh --node-shim >/dev/null
fi
nice -n 19 bash scripts/k8s/build.sh
echo "prefetch: done in $((SECONDS - t)) s (runsc and its shim, the cluster's binaries)"
