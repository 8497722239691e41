#!/bin/bash
# Takes down what up.sh started and leaves the host as it was: every process stopped by the PID
# up.sh recorded (and the containerd shims of our socket), every mount under $KSTATE unmounted,
# the kubelet's cgroups and the paths it hard-codes outside its root removed, the cluster's
# runtime state deleted. Kept: $KCACHE (binaries), and in $KSTATE the PKI and the containerd
# content store with the imported images, so that the next up.sh is quick. PURGE=1 removes
# $KSTATE entirely. Safe to run when nothing is up.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$here/env.sh"
[ -d "$KSTATE" ] || { kts "nothing to take down"; exit 0; }
cd "$KSTATE" || exit 1

stop() { # name: TERM, up to 10 s, then KILL
  local f=run/$1.pid p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
  fi
  rm -f "$f"
}
stop kubelet
stop kube-scheduler
# Every task and container of our containerd's k8s.io namespace (never dockerd's containerd:
# this socket is ours alone).
if [ -S containerd.sock ] && timeout 10 "${KCTR[@]}" version >/dev/null 2>&1; then
  for t in $("${KCTR[@]}" tasks ls -q 2>/dev/null); do "${KCTR[@]}" tasks kill -s KILL "$t" >/dev/null 2>&1; done
  for _ in $(seq 30); do
    [ -z "$("${KCTR[@]}" tasks ls -q 2>/dev/null | head -1)" ] && break
    for t in $("${KCTR[@]}" tasks ls -q 2>/dev/null); do "${KCTR[@]}" tasks delete -f "$t" >/dev/null 2>&1; done
    sleep 0.2
  done
  for c in $("${KCTR[@]}" containers ls -q 2>/dev/null); do "${KCTR[@]}" containers delete "$c" >/dev/null 2>&1; done
fi
stop containerd
# Shims whose containerd was ours (matched on our socket's path, killed by PID).
for p in $(pgrep -f -- "-address $KSTATE/containerd.sock" || true); do kill -KILL "$p" 2>/dev/null; done
# gVisor sandboxes (runsc-sandbox, runsc-gofer) whose runsc root is ours, should a killed shim have
# left one: matched on that root, killed by PID.
for p in $(pgrep -f -- "--root=$KSTATE/gvisor/root" || true); do kill -KILL "$p" 2>/dev/null; done
stop kube-apiserver
stop etcd

# Mounts under $KSTATE, deepest first: pod volumes, rootfs, netns, shm, the kubelet's bind mount.
for _ in 1 2 3; do
  mounts=$(awk -v k="$KSTATE/" 'index($2, k) == 1 {print $2}' /proc/self/mounts | sort -r)
  [ -z "$mounts" ] && break
  for m in $mounts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done
# The kubelet's cgroups (cgroupfs driver, cgroup v1: one /kubepods tree per hierarchy).
for d in /sys/fs/cgroup/*/kubepods; do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
done
# Paths the kubelet and the runc shim hard-code outside their configured roots.
find /var/log/containers -maxdepth 1 -type l -lname "$KSTATE/*" -delete 2>/dev/null
rmdir /var/log/containers 2>/dev/null
rm -f /var/lib/kubelet/device-plugins/kubelet.sock
rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null
rmdir /run/containerd/runc/k8s.io 2>/dev/null   # dockerd's containerd uses "moby" there

rm -rf etcd-data kubelet podlogs containerd/state run sysctl-shadow containerd.sock containerd.sock.ttrpc gvisor/root
if [ "${PURGE:-0}" = 1 ]; then
  cd / && rm -rf "$KSTATE"
fi
left=$(awk -v k="$KSTATE/" 'index($2, k) == 1' /proc/self/mounts | wc -l)
kts "down; mounts left under $KSTATE: $left"
[ "$left" = 0 ]
