# shellcheck shell=bash
# Two children that outlive the program's own end unless the sandbox kills them: one
# in the background, one in a session of its own; TOKEN is their argv[0], for
# tree_check. The program ignores SIGTERM and waits out its timeout.
print_sandbox_id
trap '' TERM
bash -c 'exec -a "$0" sleep 600' "$TOKEN" &
# shellcheck disable=SC2016 # the child bash's $0
setsid bash -c 'exec -a "$0" sleep 600' "$TOKEN" &
for _ in $(seq 100); do
  [ "$(grep -l "^$TOKEN" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)" = 2 ] && break
  sleep 0.05
done
echo "SPAWNED $(grep -l "^$TOKEN" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)"
while :; do sleep 1; done
