// The program (node, which the bootstrap exec'd) and the bootstrap: the sandbox's
// user, no capability in any set, no_new_privs, a seccomp filter.
for (const pid of ['self', '1']) {
  const st = status(pid);
  for (const key of ['Uid', 'Gid']) {
    const want = Array(4).fill(SANDBOX_UID).join(' ');
    if (st[key] !== want) fail(`/proc/${pid}/status ${key} = ${st[key]}, want all ${SANDBOX_UID}`);
  }
  if ((st.Groups || '').split(' ').includes('0')) fail(`/proc/${pid}/status Groups ${st.Groups} include 0`);
  for (const key of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
    if (st[key] !== '0000000000000000') fail(`/proc/${pid}/status ${key} = ${st[key]}, want 0`);
  }
  if (st.NoNewPrivs !== '1') fail(`/proc/${pid}/status NoNewPrivs = ${st.NoNewPrivs}, want 1`);
  if (st.Seccomp !== '2') fail(`/proc/${pid}/status Seccomp = ${st.Seccomp}, want 2 (filter)`);
}
console.log(`uid ${process.getuid()}, gid ${process.getgid()}, groups ${process.getgroups()}`);
finish();
