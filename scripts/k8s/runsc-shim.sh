#!/bin/sh
# containerd-shim-runsc-v1 on the test cluster's containerd PATH (up.sh installs it there, with
# gVisor's shim beside it as containerd-shim-runsc-v1.bin).
#
# gVisor's shim is built against containerd 2's shim library, whose `start` answers with JSON
# bootstrap parameters ({"version":2,"address":"unix:///...","protocol":"ttrpc"}); the cluster's
# containerd 1.6 reads that answer as the address itself ("dial unix {...}: invalid argument").
# So for `start` this prints only the address; every other call passes straight through. The
# task API the shim serves (containerd.task.v2) is the one containerd 1.6 speaks.
shim=${0%/*}/containerd-shim-runsc-v1.bin
last=
for a in "$@"; do last=$a; done
if [ "$last" = start ]; then
  out=$("$shim" "$@") || { rc=$?; printf '%s' "$out"; exit "$rc"; }
  addr=$(printf '%s' "$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p')
  printf '%s' "${addr:-$out}"
  exit 0
fi
exec "$shim" "$@"
