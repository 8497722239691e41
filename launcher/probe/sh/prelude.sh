# shellcheck shell=bash
# The verdict machinery of every bash probe (probe.go's Verdict): each failed assertion
# is collected by fail, and finish prints "PROBE FAIL: ..." (exit 1) or "PROBE OK".
# The probes look at failures themselves: no -e.
set +e
FAILS=()
fail() { FAILS+=("$*"); }
note() { echo "note: $*"; }

finish() {
  if [ ${#FAILS[@]} -gt 0 ]; then
    local all
    printf -v all '%s; ' "${FAILS[@]}"
    echo "PROBE FAIL: ${all%; }"
    exit 1
  fi
  echo "PROBE OK"
  exit 0
}

# denied WHAT ERRORS CMD...: CMD must fail, with a message (strerror, as bash and
# coreutils print it) matching the extended regular expression ERRORS.
denied() {
  local what=$1 want=$2 err
  shift 2
  if err=$("$@" 2>&1 >/dev/null); then
    fail "$what: succeeded, want $want"
  elif [[ $err =~ $want ]]; then
    echo "$what: denied (${BASH_REMATCH[0]})"
  else
    fail "$what: failed with '${err//$'\n'/ }', want $want"
  fi
}

# status PID KEY: the field of /proc/PID/status, its whitespace collapsed.
status() {
  local k v
  while IFS=: read -r k v; do
    if [ "$k" = "$2" ]; then
      # shellcheck disable=SC2086 # split and joined: whitespace collapsed
      echo $v
      return
    fi
  done <"/proc/$1/status"
}

# print_sandbox_id prints "SANDBOX-ID <id>", the container's id as the engine names
# it (from the mount of /etc/hostname, else the cgroup path), as sandbox_id.py does.
print_sandbox_id() {
  local line
  for line in "$(grep ' /etc/hostname ' /proc/self/mountinfo)" "$(cat /proc/self/cgroup)"; do
    if [[ $line =~ (^|[^0-9a-f])([0-9a-f]{64})([^0-9a-f]|$) ]]; then
      echo "SANDBOX-ID ${BASH_REMATCH[2]}"
      return
    fi
  done
  echo "no container id visible"
}

# shellcheck disable=SC2034 # for the fragments after this one
EROFS='Read-only file system' EACCES='Permission denied' EPERM='Operation not permitted'
