import re


def print_sandbox_id():
    """Prints "SANDBOX-ID <id>", the container's id as the engine names it (from the
    mount of /etc/hostname, else the cgroup path), for the runner to find this sandbox
    from outside."""
    for path in ("/proc/self/mountinfo", "/proc/self/cgroup"):
        with open(path) as f:
            for line in f:
                if path.endswith("mountinfo") and " /etc/hostname " not in line:
                    continue
                m = re.search(r"\b([0-9a-f]{64})\b", line)
                if m:
                    print("SANDBOX-ID %s" % m.group(1), flush=True)
                    return True
    print("no container id visible", flush=True)
    return False
