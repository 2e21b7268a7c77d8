/** Small statistics over samples (milliseconds unless said otherwise). */
export interface Summary {
  n: number;
  mean: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** The value at quantile q (0..1) of sorted samples, nearest-rank. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

export function summarize(samples: readonly number[] | Float64Array): Summary {
  const sorted = Float64Array.from(samples).sort();
  let total = 0;
  for (const value of sorted) total += value;
  return {
    n: sorted.length,
    mean: sorted.length ? total / sorted.length : Number.NaN,
    min: sorted[0] ?? Number.NaN,
    p50: quantile(sorted, 0.5),
    p90: quantile(sorted, 0.9),
    p99: quantile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

export function median(samples: readonly number[]): number {
  return summarize(samples).p50;
}

/** Milliseconds since an arbitrary origin, shared by every process of the machine (CLOCK_MONOTONIC). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Times `work` once, in milliseconds. */
export async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const started = performance.now();
  const value = await work();
  return { ms: performance.now() - started, value };
}

/** A number as a table cell: 3 significant digits, thousands grouped. */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return '–';
  if (Math.abs(value) >= 10 ** digits) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(digits)).toLocaleString('en-US', { maximumFractionDigits: 6 });
}

/** `measured / baseline` as `×1.23`. */
export function ratio(measured: number, baseline: number): string {
  if (!Number.isFinite(measured) || !Number.isFinite(baseline) || baseline === 0) return '–';
  return `×${fmt(measured / baseline)}`;
}

/** The spread of a figure over rounds: `median (min–max)`, so one run's noise shows. */
export function spread(samples: readonly number[], format: (value: number) => string = fmt): string {
  if (samples.length === 0) return '–';
  const { min, p50, max } = summarize(samples);
  return samples.length === 1 ? format(p50) : `${format(p50)} (${format(min)}–${format(max)})`;
}

export function megabytes(bytes: number): string {
  return fmt(bytes / 1024 / 1024);
}
