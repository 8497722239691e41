#!/usr/bin/env python3
"""Reads `go test -json` on stdin and prints what `go test` would without -v, plus the
cost of each test: for every package its result line, the output of each test that
failed (or was still running when the package failed: a panic, a timeout), the tests
it skipped, and its slowest tests with their seconds. scripts/test.sh pipes its suites
through this (with pipefail, so go test's exit status is the step's); the figures let
CI's output say where its time goes.

Usage: go test -json ... | python3 scripts/lib/gotest.py [-top N]
"""
import json
import sys

top = 8
if len(sys.argv) == 3 and sys.argv[1] == "-top":
    top = int(sys.argv[2])

out = {}  # (package, test) -> [lines]
elapsed = {}  # package -> {top-level test: seconds}
skipped = {}  # package -> [tests]
running = {}  # package -> set of tests started and not ended


def emit(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def report(pkg):
    tests = elapsed.pop(pkg, {})
    slow = sorted(tests.items(), key=lambda kv: -kv[1])[:top]
    if slow:
        emit("   slowest: " + ", ".join("%s %.1fs" % kv for kv in slow) + "\n")
    names = skipped.pop(pkg, [])
    if names:
        emit("   skipped (%d): %s\n" % (len(names), " ".join(sorted(names))))


for raw in sys.stdin:
    try:
        ev = json.loads(raw)
    except ValueError:
        emit(raw)  # not an event: go's own message, printed as it came
        continue
    action = ev.get("Action")
    pkg = ev.get("Package") or ev.get("ImportPath", "")
    test = ev.get("Test")
    text = ev.get("Output", "")
    if action == "build-output":
        emit(text)
    elif action == "output":
        if test:
            out.setdefault((pkg, test), []).append(text)
        elif not text.startswith(("=== RUN", "PASS\n", "=== PAUSE", "=== CONT")):
            emit(text)  # the package's own lines: ok/FAIL, a panic outside a test
    elif action == "run" and test:
        running.setdefault(pkg, set()).add(test)
    elif action in ("pass", "fail", "skip") and test:
        running.get(pkg, set()).discard(test)
        lines = out.pop((pkg, test), [])
        if action == "fail":
            emit("".join(lines))
        if "/" not in test:
            if action == "skip":
                skipped.setdefault(pkg, []).append(test)
            else:
                elapsed.setdefault(pkg, {})[test] = ev.get("Elapsed", 0.0)
    elif action in ("pass", "fail", "skip"):
        if action == "fail":
            for t in sorted(running.pop(pkg, set())):
                emit("".join(out.pop((pkg, t), [])))
        running.pop(pkg, None)
        report(pkg)
