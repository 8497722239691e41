from _composed import CPUS, finish, os, print_sandbox_id  # defined by what probe.go puts before this file; the line is dropped
import math, time
# Keeps more processes busy than the CPU quota allows while the runner measures, from
# the host, the CPU time the sandbox's cgroup gets; the runner ends the run.
workers = min(len(os.sched_getaffinity(0)), max(2, math.ceil(CPUS) + 1))
for _ in range(workers):
    if os.fork() == 0:
        while True:
            pass
print("BURNING %d" % workers, flush=True)
print_sandbox_id()
time.sleep(30)
finish()
