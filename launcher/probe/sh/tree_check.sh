# shellcheck shell=bash
# No process of the previous run is left: none has its TOKEN in its command line.
for d in /proc/[0-9]*; do
  c=$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null) || continue
  [[ $c != *"$TOKEN"* ]] || fail "the previous run's child runs as ${d#/proc/}: $c"
done
finish
