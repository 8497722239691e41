# shellcheck shell=bash
# Twice the memory limit, touched: a string doubled until it is that long. In a
# container the OOM killer ends the program; on the process backend it is that, or
# RLIMIT_DATA failing the allocation (bash: "xmalloc: cannot allocate"), which ends
# it too.
echo ALLOCATING
x=x n=1
while [ $n -lt $((2 * MEMORY)) ]; do
  x+=$x
  n=$((n * 2))
done
fail "held $n bytes, twice the $MEMORY limit, and was not stopped"
finish
