/**
 * Preloaded into a server process (`node --import loop-delay.mjs dist/cli.js`): watches its
 * event loop and writes the worst delay to the JSON file named by AGENTD_BENCH_LOOP_FILE, on
 * SIGUSR2 (then starts over) and at exit, with when it was written (`atMs`, epoch milliseconds:
 * at exit, when process.exit was called).
 *
 * Two measures of the worst stall: perf_hooks.monitorEventLoopDelay (wall time, `maxMs`), and
 * the same delays from a 5 ms timer less the time the main thread spent waiting for a CPU
 * (Linux: /proc/thread-self/schedstat's run-queue wait, `maxNetMs`). On a loaded machine a
 * stall's wall time is mostly other processes' turn on the CPU; the net figure is what the
 * server itself held the loop for (its own work and its blocking calls), what a quiet machine sees.
 */
import fs from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const TICK_MS = 5;
const file = process.env.AGENTD_BENCH_LOOP_FILE;
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: TICK_MS });
  histogram.enable();
  const schedstat = (): [run: number, wait: number] | null => {
    try {
      const [run, wait] = fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ').map(Number);
      return [run! / 1e6, wait! / 1e6];
    } catch {
      return null;
    }
  };
  // The worst tick: its lateness, and of it the part not spent waiting for a CPU; with when it ended (µs, CLOCK_MONOTONIC like a CPU profile's timestamps).
  let worst = { netMs: 0, lateMs: 0, runMs: 0, atUs: 0 };
  let last = { at: performance.now(), sched: schedstat() };
  const tick = (): number => {
    const now = performance.now();
    const sched = schedstat();
    const lateMs = Math.max(0, now - last.at - TICK_MS);
    const waitMs = sched && last.sched ? sched[1] - last.sched[1] : 0;
    const netMs = Math.max(0, lateMs - waitMs);
    if (netMs > worst.netMs) worst = { netMs, lateMs, runMs: sched && last.sched ? sched[0] - last.sched[0] : 0, atUs: Number(process.hrtime.bigint() / 1000n) };
    last = { at: now, sched };
    return lateMs;
  };
  setInterval(tick, TICK_MS).unref();
  const write = (phase: string) => {
    // The histogram records a delay when its timer fires: the stretch up to this point (at exit:
    // the last work before process.exit, which no timer follows) is counted from the tick.
    const lastLateMs = tick();
    const figures = { phase, atMs: performance.timeOrigin + performance.now(), maxMs: Math.max(histogram.max / 1e6, lastLateMs), lastLateMs, p99Ms: histogram.percentile(99) / 1e6, meanMs: histogram.mean / 1e6, maxNetMs: worst.netMs, worstTick: worst };
    fs.appendFileSync(file, `${JSON.stringify(figures)}\n`);
    histogram.reset();
    worst = { netMs: 0, lateMs: 0, runMs: 0, atUs: 0 };
  };
  process.on('SIGUSR2', () => write('mark'));
  process.on('exit', () => write('exit'));
}

// AGENTD_BENCH_SHUTDOWN_PROFILE=<file>: a CPU profile from the first SIGUSR2 to exit (DELETEs and shutdown), for finding what stalls them.
const profileFile = process.env.AGENTD_BENCH_SHUTDOWN_PROFILE;
if (profileFile) {
  const inspector = await import('node:inspector');
  const session = new inspector.Session();
  session.connect();
  // Started at the first SIGUSR2 (before the measured phases), so starting it stalls nothing measured.
  let started = false;
  process.prependListener('SIGUSR2', () => {
    if (!started) session.post('Profiler.enable', () => session.post('Profiler.setSamplingInterval', { interval: 200 }, () => session.post('Profiler.start')));
    started = true;
  });
  process.on('exit', () => {
    session.post('Profiler.stop', (error, result) => {
      if (!error) fs.writeFileSync(profileFile, JSON.stringify(result.profile));
    });
  });
}
