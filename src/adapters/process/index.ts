// Processes the server starts: through a launcher (the sandbox's or the host's), from a small spawner process.
export { ExecaCommandRunner } from './execa-command-runner.js';
export type { ProcessLauncher, SandboxMode } from './process-launcher.js';
export { ProcessSpawner, type RunProcess, type SpawnProcess } from './process-spawner.js';
export { testPausePoint } from './test-pause-point.js';
