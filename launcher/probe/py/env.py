from _composed import CANARY_NAME, CANARY_VALUE, SANDBOX_ENV_KEYS, check, finish, os  # defined by what probe.go puts before this file; the line is dropped
allowed = set(SANDBOX_ENV_KEYS)
extra = sorted(set(os.environ) - allowed)
check(not extra, "environment variables from outside the sandbox: %s" % extra)
with open("/proc/self/environ", "rb") as f:
    raw = [kv.split(b"=", 1)[0].decode("utf-8", "replace") for kv in f.read().split(b"\0") if kv]
extra = sorted(set(raw) - allowed)
check(not extra, "/proc/self/environ holds %s" % extra)
if CANARY_NAME:
    check(CANARY_NAME not in os.environ, "the canary %s is visible" % CANARY_NAME)
if CANARY_VALUE:
    hits = sorted(k for k, v in os.environ.items() if CANARY_VALUE in v)
    check(not hits, "the canary's value is in %s" % hits)
check(os.environ.get("HOME") == "/tmp", "HOME is %r, want /tmp" % os.environ.get("HOME"))
print("environment:", sorted(os.environ))
finish()
