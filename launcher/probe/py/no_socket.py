from _composed import check, denied, errno, finish, mountinfo, os, walk  # defined by what probe.go puts before this file; the line is dropped
import stat
for p in ("/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/var/run/podman/podman.sock",
          "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/run/crio/crio.sock",
          "/run/user/0/podman/podman.sock", "/run/user/1000/podman/podman.sock", "/run/user/1000/docker.sock",
          "/var/lib/docker", "/var/lib/containers", "/run/docker", "/run/containerd", "/run/podman"):
    denied("lstat " + p, lambda: os.lstat(p), errno.ENOENT, errno.EACCES)
# Any unix socket anywhere (/proc and /sys aside): a socket file's kind needs an lstat,
# the rest is told by the directory entry.
socks = []
for _, entries in walk():
    for e in entries or ():
        try:
            if not e.is_dir(follow_symlinks=False) and not e.is_file(follow_symlinks=False) and not e.is_symlink():
                if stat.S_ISSOCK(os.lstat(e.path).st_mode):
                    socks.append(e.path)
        except OSError:
            pass
# A bind-mounted socket keeps the directory entry of its mount point (a regular
# file), so every mount point is looked at too.
for m in mountinfo():
    try:
        if stat.S_ISSOCK(os.lstat(m[0]).st_mode) and m[0] not in socks:
            socks.append(m[0])
    except OSError:
        pass
check(not socks, "unix sockets in the filesystem: %s" % socks[:20])
# The network namespace's unix sockets, abstract ones included: none at start.
with open("/proc/net/unix") as f:
    entries = f.read().splitlines()[1:]
check(not entries, "unix sockets in the network namespace: %s" % entries[:10])
finish()
