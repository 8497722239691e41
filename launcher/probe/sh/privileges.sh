# shellcheck shell=bash
# The program (the interpreter the bootstrap exec'd) and the bootstrap: the sandbox's
# user, no capability in any set, no_new_privs, a seccomp filter.
for pid in self 1; do
  for key in Uid Gid; do
    v=$(status $pid $key)
    [ "$v" = "$SANDBOX_UID $SANDBOX_UID $SANDBOX_UID $SANDBOX_UID" ] || fail "/proc/$pid/status $key = $v, want all $SANDBOX_UID"
  done
  groups=" $(status $pid Groups) "
  [[ $groups != *" 0 "* ]] || fail "/proc/$pid/status Groups ${groups} include 0"
  for key in CapInh CapPrm CapEff CapBnd CapAmb; do
    v=$(status $pid $key)
    [ "$v" = 0000000000000000 ] || fail "/proc/$pid/status $key = $v, want 0"
  done
  v=$(status $pid NoNewPrivs)
  [ "$v" = 1 ] || fail "/proc/$pid/status NoNewPrivs = $v, want 1"
  v=$(status $pid Seccomp)
  [ "$v" = 2 ] || fail "/proc/$pid/status Seccomp = $v, want 2 (filter)"
done
echo "uid $(id -u), gid $(id -g), groups $(id -G)"
finish
