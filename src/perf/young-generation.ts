import v8 from 'node:v8';

/** V8's default: each growth doubles the young generation (up to its maximum, 16 MiB a semi-space). */
const DEFAULT_GROWTH_FACTOR = 2;
let holds = 0;

/**
 * Runs `work` (a start-up's loading: everything it parses is kept) with V8's young generation held
 * at its size. V8 grows the young generation when most of what it collects survives, as all of
 * the loaded records do; growing it (to 32 MiB) only takes fresh pages from the kernel (3,000-4,000
 * page faults at 10,000 conversations, ~10 µs each on a virtual machine), and what survives is
 * promoted all the same. Afterwards it grows again as V8 sees fit. Nested or concurrent holds
 * (several servers in one process, in tests) release it with the last. Node 20 and 24 honour the
 * flag; a V8 that refused a factor below 2 would grow it as before.
 */
export async function holdingYoungGeneration<T>(work: () => Promise<T>): Promise<T> {
  if (holds++ === 0) v8.setFlagsFromString('--semi-space-growth-factor=1');
  try {
    return await work();
  } finally {
    if (--holds === 0) v8.setFlagsFromString(`--semi-space-growth-factor=${DEFAULT_GROWTH_FACTOR}`);
  }
}
