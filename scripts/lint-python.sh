#!/usr/bin/env bash
# Byte-compiles and lints every Python file of the project (the sandbox bootstrap, the
# limits program, the probe programs) with pyflakes from Debian's packages, which it
# installs when missing. Fails on any syntax error or pyflakes warning.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/apt.sh
. scripts/lib/apt.sh

if ! command -v pyflakes3 >/dev/null 2>&1; then
  echo "lint-python: installing pyflakes3" >&2
  apt_get install -y -qq --no-install-recommends pyflakes3 >/dev/null 2>&1 || {
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends pyflakes3 >/dev/null
  }
fi

mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.py')
[ "${#files[@]}" -gt 0 ] || { echo "lint-python: no Python files found" >&2; exit 1; }
# Compiled in memory: no __pycache__ is left in the tree.
python3 -c '
import sys
for f in sys.argv[1:]:
    with open(f, "rb") as fh:
        compile(fh.read(), f, "exec", dont_inherit=True)
' "${files[@]}"
pyflakes3 "${files[@]}"
echo "lint-python: ${#files[@]} files compile and are pyflakes-clean"
