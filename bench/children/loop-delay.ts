/**
 * Preloaded into a server process (`node --import loop-delay.mjs dist/cli.js`): watches its
 * event loop with perf_hooks.monitorEventLoopDelay and writes the worst delay to the JSON file
 * named by AGENTD_BENCH_LOOP_FILE, on SIGUSR2 (then starts over) and at exit.
 */
import fs from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.AGENTD_BENCH_LOOP_FILE;
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  const write = (phase: string) => {
    const figures = { phase, maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6, meanMs: histogram.mean / 1e6 };
    fs.appendFileSync(file, `${JSON.stringify(figures)}\n`);
    histogram.reset();
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
    if (!started) session.post('Profiler.enable', () => session.post('Profiler.start'));
    started = true;
  });
  process.on('exit', () => {
    session.post('Profiler.stop', (error, result) => {
      if (!error) fs.writeFileSync(profileFile, JSON.stringify(result.profile));
    });
  });
}
