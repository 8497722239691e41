# shellcheck shell=bash
# The root filesystem is read-only: nothing can be created outside the private tmpfs.
create() { : >"$1" && rm -f "$1"; }
for d in / /etc /usr /usr/local/bin /usr/lib /var/tmp /var/lib /run /home /root /opt; do
  [ -d "$d" ] && denied "create ${d%/}/$TOKEN" "$EROFS|$EACCES" create "${d%/}/$TOKEN"
done
denied "append /etc/passwd" "$EROFS|$EACCES" eval ': >>/etc/passwd'
opts=$(awk '$5 == "/" {o = $6} END {print o}' /proc/self/mountinfo)
[[ ,$opts, == *,ro,* ]] || fail "/ is mounted $opts, want ro"

# /tmp is writable and bounded: TmpfsSize, and a fill stops there with ENOSPC (tmpfs
# pages count against the memory limit: only when the limit leaves room for it).
f=/tmp/$TOKEN
if ! echo written >"$f" || [ "$(cat "$f")" != written ]; then
  fail "/tmp: cannot write and read back a file"
fi
rm -f "$f"
read -r blocks bsize < <(stat -f -c '%b %S' /tmp)
[ $((blocks * bsize)) = "$TMPFS_SIZE" ] || fail "/tmp is $((blocks * bsize)) bytes, want $TMPFS_SIZE"
if [ $((TMPFS_SIZE + 48 * 1048576)) -lt "$MEMORY" ]; then
  err=$(head -c $((TMPFS_SIZE + 8 * 1048576)) /dev/zero 2>&1 >"$f.fill")
  size=$(stat -c %s "$f.fill")
  rm -f "$f.fill"
  [[ $err == *"No space left on device"* ]] || fail "filling /tmp: '$err' at $size bytes, want ENOSPC"
  if [ "$size" -lt $((TMPFS_SIZE - 1048576)) ] || [ "$size" -gt "$TMPFS_SIZE" ]; then
    fail "/tmp took $size bytes, want about $TMPFS_SIZE"
  fi
  echo "/tmp filled at $size bytes (ENOSPC)"
fi

# Kernel tunables cannot be written: every file of /proc/sys/{kernel,vm,fs} refuses
# a writer (opened for appending, nothing written), and /proc/sys and /sys are
# read-only mounts (gVisor's /proc/sys is its own emulation inside one /proc mount).
n=0
for p in /proc/sys/kernel/* /proc/sys/vm/* /proc/sys/fs/* /proc/sysrq-trigger; do
  [ -f "$p" ] || continue
  n=$((n + 1))
  # shellcheck disable=SC2016 # eval's, in the subshell denied runs it in
  denied "write $p" "$EROFS|$EACCES|$EPERM" eval 'exec 3>>"$p"' >/dev/null
done
[ "$n" -ge 3 ] || fail "only $n files under /proc/sys"
echo "$n files of /proc/sys refused a writer"
mount_opts() { awk -v m="$1" '$5 == m {o = $6} END {print o}' /proc/self/mountinfo; }
if [ "$GVISOR" != 1 ]; then
  [[ ,$(mount_opts /proc/sys), == *,ro,* ]] || fail "/proc/sys is not a read-only mount"
fi
[[ ,$(mount_opts /sys), == *,ro,* ]] || fail "/sys is not a read-only mount"
finish
