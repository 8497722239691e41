# shellcheck shell=bash
# Processes stop below Pids, and the program survives to go on. The spawning is
# dash's (sh): bash retries a failed fork for 15 s, dash stops at once; each child's
# pid goes to a file, so that all can be killed after. A ceiling well above Pids
# makes a missing limit fail quickly instead of exhausting the host.
list=/tmp/$TOKEN.pids
err=$(sh -c 'n=0; while [ $n -lt "$1" ]; do sleep 600 </dev/null >/dev/null 2>&1 & echo $! >>"$2"; n=$((n + 1)); done' _ $((4 * PIDS + 64)) "$list" 2>&1)
mapfile -t kids <"$list"
kill -KILL "${kids[@]}" 2>/dev/null
rm -f "$list"
echo "processes stopped at ${#kids[@]}: ${err:-no error}"
[ "${#kids[@]}" -lt "$PIDS" ] || fail "spawned ${#kids[@]} processes, want fewer than Pids=$PIDS"
[[ $err == *"Cannot fork"* ]] || fail "spawning stopped with '$err', want a failed fork"
# bash retries its fork for as long as the killed children take to go.
/bin/true || fail "no process could start after the children were killed"
finish
