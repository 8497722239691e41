#!/bin/bash
# hostcheck.sh snapshot FILE | check FILE
# Records, then checks, what the test cluster must leave as it found it: the sysctls the kubelet
# would change, the paths it hard-codes outside its root, and that no process, mount, cgroup or
# iptables chain of the cluster remains. check prints every difference and fails on any.
set -u
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(cd "$(dirname "$0")" && pwd)/env.sh"
SYSCTLS="vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes"
PATHS="/var/lib/kubelet /var/log/containers /run/containerd/runc/k8s.io"
state() {
  for s in $SYSCTLS; do echo "sysctl $s=$(cat "/proc/sys/$s")"; done
  for p in $PATHS; do [ -e "$p" ] && echo "path $p exists" || echo "path $p absent"; done
  echo "iptables KUBE chains: $(iptables-save 2>/dev/null | grep -c '^:KUBE-')"
  local n=0 c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    if [ -e "$c" ] || [ -L "$c" ]; then n=$((n + 1)); fi
  done
  echo "kubepods cgroups: $n"
}
case "${1:-}" in
snapshot) state > "$2" ;;
check)
  fail=0
  if ! diff <(cat "$2") <(state); then echo "host state changed (< before, > after)"; fail=1; fi
  m=$(awk -v k="$KSTATE/" 'index($2, k) == 1 || $2 ~ /kubepods/' /proc/self/mounts)
  [ -n "$m" ] && { echo "mounts left:"; echo "$m"; fail=1; }
  p=$(pgrep -a -f -- "$KCACHE/bin/|$KSTATE/" || true)
  [ -n "$p" ] && { echo "processes left:"; echo "$p"; fail=1; }
  for f in "$KSTATE/run" "$KSTATE/kubelet" "$KSTATE/etcd-data" "$KSTATE/containerd.sock" "$KSTATE/gvisor/root"; do
    [ -e "$f" ] && { echo "runtime state left: $f"; fail=1; }
  done
  [ "$fail" = 0 ] && echo "host as it was: no process, mount, cgroup, sysctl, iptables chain or runtime file of the cluster left"
  exit "$fail" ;;
*) echo "usage: $0 snapshot FILE | check FILE" >&2; exit 2 ;;
esac
