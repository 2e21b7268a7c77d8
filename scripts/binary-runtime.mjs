// The Node.js runtime the single executable is built on: a current LTS, fetched from the npm
// registry as the `node-<platform>-<arch>` package (it ships the `node` binary in bin/), not the
// build machine's node. Cached under node_modules/.cache/agentd-runtime/<version>/.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** Node 24 is the Active LTS line; bump to a newer 24.x (or the next LTS) in one place, here. */
export const NODE_RUNTIME_VERSION = '24.21.0';

export function runtimePackage(version = NODE_RUNTIME_VERSION) {
  return `node-${process.platform}-${process.arch}@${version}`;
}

function run(command, args, options) {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${(result.stderr || result.stdout || result.error?.message || '').trim()}`);
  return result.stdout;
}

/**
 * The path of that runtime's `node` binary, downloaded with `npm pack` (which checks the
 * registry's integrity hash) on first use, then reused.
 */
export function ensureRuntime({ root, version = NODE_RUNTIME_VERSION }) {
  const dir = path.join(root, 'node_modules', '.cache', 'agentd-runtime', version);
  const binary = path.join(dir, 'node');
  if (fs.existsSync(binary)) return binary;
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const work = fs.mkdtempSync(`${dir}.download-`);
  try {
    const spec = runtimePackage(version);
    process.stdout.write(`fetching ${spec} from the npm registry (about 50 MB, once)\n`);
    const [packed] = JSON.parse(run('npm', ['pack', spec, '--pack-destination', work, '--json', '--silent'], { cwd: work, maxBuffer: 64 * 1024 * 1024 }));
    run('tar', ['-xzf', path.join(work, packed.filename), '-C', work, 'package/bin/node']);
    const shown = run(path.join(work, 'package', 'bin', 'node'), ['--version']).trim();
    if (shown !== `v${version}`) throw new Error(`${spec} reports ${shown}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.renameSync(path.join(work, 'package', 'bin', 'node'), binary);
    return binary;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}
