# shellcheck shell=bash
# Shared settings for scripts/k8s/*.sh (sourced, not run).
# The settings below are read by the scripts that source this file, not here:
# shellcheck disable=SC2034
#
# Two directories, both outside the clone:
#   KCACHE  built binaries and the pause image, keyed by version; kept between runs so a kept
#           machine builds once (~20 min on 2 cores with a cold Go build cache).
#   KSTATE  everything a running cluster owns: PKI, configs, logs, etcd data, the private
#           containerd's root and state, the kubelet's root, pid files. down.sh empties it
#           (PURGE=1 removes it, except the containerd content store that holds the imported image).
KV=${KV:-1.34.4}
KCACHE=${KCACHE:-/var/cache/mcp-exec/k8s-v$KV}
KSTATE=${KSTATE:-/var/lib/mcp-exec-k8s}
# The node is named localhost: the kubelet rejects a loopback --node-ip, so the apiserver
# reaches the kubelet (bound to 127.0.0.1 only) through the Hostname address "localhost".
KNODE=localhost
KAPIPORT=${KAPIPORT:-16443}
KETCDPORT=12379 KETCDPEER=12380 KKUBELETPORT=20250 KKUBELETHEALTHZ=20248 KSCHEDPORT=20259
# per-pod process limit, set in the kubelet's config: Kubernetes has no per-container pids limit,
# and the sandbox contract needs one (the server's limits check reads it back from inside a pod).
KPODPIDS=${KPODPIDS:-128}
# the process limit of gVisor sandboxes (RuntimeClass gvisor): RLIMIT_NPROC in the runsc runtime's
# base spec (up.sh), as low as it is so that gVisor's own host tasks for that many guest processes
# (~40 + 2 each) stay within KPODPIDS. The gVisor selftest runs with --pids $KGVISORPIDS.
KGVISORPIDS=${KGVISORPIDS:-32}
# ctr on the cluster's own containerd (never dockerd's), as an array: "${KCTR[@]}" ARGS, also
# after timeout or nice.
KCTR=(ctr -a "$KSTATE/containerd.sock" -n k8s.io)
export KUBECONFIG_ADMIN=$KSTATE/etc/admin.kubeconfig
# kc ARGS: kubectl as the cluster's admin.
kc() { "$KCACHE/bin/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

kts() { printf '[k8s %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
# kwaitfor SECONDS CMD...: retries CMD every 0.1 s until it succeeds.
kwaitfor() {
  local n=$(( $1 * 10 )); shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "timeout waiting for: $*" >&2; return 1
}
