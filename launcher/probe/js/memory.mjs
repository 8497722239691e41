// Twice the memory limit, touched. In a container the OOM killer ends the program; on
// the process backend it is that, or RLIMIT_DATA failing the allocation (RangeError,
// uncaught).
console.log('ALLOCATING');
const held = [];
let got = 0;
while (got < 2 * MEMORY) {
  held.push(Buffer.alloc(8 << 20, 1));
  got += 8 << 20;
}
fail(`held ${got} bytes, twice the ${MEMORY} limit, and was not stopped`);
finish();
