// The root filesystem is read-only: nothing can be created outside the private tmpfs.
const mountOpts = (point) => {
  let opts = '';
  for (const l of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = l.split(' ');
    if (f[4] === point) opts = f[5];
  }
  return opts.split(',');
};
for (const d of ['/', '/etc', '/usr', '/usr/local/bin', '/usr/lib', '/var/tmp', '/var/lib', '/run', '/home', '/root', '/opt']) {
  if (!fs.existsSync(d)) continue;
  const p = d.replace(/\/$/, '') + '/' + TOKEN;
  await denied('create ' + p, () => { fs.writeFileSync(p, 'x'); fs.unlinkSync(p); }, 'EROFS', 'EACCES');
}
await denied('append /etc/passwd', () => fs.closeSync(fs.openSync('/etc/passwd', 'a')), 'EROFS', 'EACCES');
if (!mountOpts('/').includes('ro')) fail(`/ is mounted ${mountOpts('/')}, want ro`);

// /tmp is writable and bounded: TmpfsSize, and a fill stops there with ENOSPC (tmpfs
// pages count against the memory limit: only when the limit leaves room for it).
const f = '/tmp/' + TOKEN;
fs.writeFileSync(f, 'written');
if (fs.readFileSync(f, 'utf8') !== 'written') fail('/tmp: cannot read back what was written');
fs.unlinkSync(f);
const sv = fs.statfsSync('/tmp');
if (sv.blocks * sv.bsize !== TMPFS_SIZE) fail(`/tmp is ${sv.blocks * sv.bsize} bytes, want ${TMPFS_SIZE}`);
if (TMPFS_SIZE + 48 * 2 ** 20 < MEMORY) {
  const fd = fs.openSync(f + '.fill', 'w');
  const chunk = Buffer.alloc(256 << 10);
  let written = 0;
  try {
    while (written <= TMPFS_SIZE + 8 * 2 ** 20) written += fs.writeSync(fd, chunk);
    fail(`wrote ${written} bytes to /tmp, more than its ${TMPFS_SIZE}`);
  } catch (e) {
    if (e.code !== 'ENOSPC') fail(`filling /tmp failed with ${e.code}, want ENOSPC`);
  }
  fs.closeSync(fd);
  const size = fs.statSync(f + '.fill').size;
  fs.unlinkSync(f + '.fill');
  if (size < TMPFS_SIZE - 2 ** 20 || size > TMPFS_SIZE) fail(`/tmp took ${size} bytes, want about ${TMPFS_SIZE}`);
  console.log(`/tmp filled at ${size} bytes (ENOSPC)`);
}

// Kernel tunables cannot be written: every file of /proc/sys/{kernel,vm,fs} refuses
// a writer (opened, nothing written), and /proc/sys and /sys are read-only mounts
// (gVisor's /proc/sys is its own emulation inside one /proc mount).
let n = 0;
for (const dir of ['/proc/sys/kernel', '/proc/sys/vm', '/proc/sys/fs']) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!e.isFile()) continue;
    n++;
    const p = dir + '/' + e.name;
    try {
      fs.closeSync(fs.openSync(p, fs.constants.O_WRONLY));
      fail(`write ${p}: succeeded, want EROFS/EACCES/EPERM`);
    } catch (e) {
      if (!['EROFS', 'EACCES', 'EPERM'].includes(e.code)) fail(`write ${p}: failed with ${e.code}, want EROFS/EACCES/EPERM`);
    }
  }
}
if (n < 3) fail(`only ${n} files under /proc/sys`);
if (!GVISOR && !mountOpts('/proc/sys').includes('ro')) fail('/proc/sys is not a read-only mount');
if (!mountOpts('/sys').includes('ro')) fail('/sys is not a read-only mount');
console.log(`${n} files of /proc/sys refused a writer`);
finish();
