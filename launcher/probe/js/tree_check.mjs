// No process of the previous run is left: none has its TOKEN in its command line.
for (const d of fs.readdirSync('/proc').filter((n) => /^[0-9]+$/.test(n))) {
  let c;
  try { c = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8'); } catch { continue; }
  if (c.includes(TOKEN)) fail(`the previous run's child runs as ${d}: ${c.split('\0').join(' ')}`);
}
finish();
