import { createRequire } from 'node:module';
import path from 'node:path';
import { getRawAsset } from 'node:sea';
import vm from 'node:vm';

// The single executable's main (scripts/build-binary.mjs): it either turns into the server's
// spawner or runs the bundle of src/cli.ts, which the binary holds as an asset. The spawner
// (`agentd __spawner`, started by the server) so never reads, compiles or keeps the server's
// code, and stays as small as the one `node dist/cli.js` starts with `node -e`.

/** The bundle of src/cli.ts, one byte a character, and the V8 code cache the build made of it with the binary's own node. */
const SERVER_BUNDLE_ASSET = 'agentd.cjs';
const SERVER_CODE_CACHE_ASSET = 'agentd.cjs.cache';
/** The bundle is compiled into a function of these, as Node wraps a CommonJS module; the build makes the code cache for the same. */
const BUNDLE_PARAMETERS = ['exports', 'require', 'module', '__filename', '__dirname'];

/**
 * Runs the bundle as it ran when it was the binary's main: its built-in modules through this
 * main's own require. Both assets are read where the executable is mapped, without a copy; the
 * source is decoded as Latin-1, which V8 keeps at one byte a character.
 */
function runServerBundle(): void {
  const source = rawAsset(SERVER_BUNDLE_ASSET).toString('latin1');
  const compiled = vm.compileFunction(source, BUNDLE_PARAMETERS, { filename: process.execPath, cachedData: rawAsset(SERVER_CODE_CACHE_ASSET) });
  const bundle = { exports: {} };
  compiled.call(bundle.exports, bundle.exports, require, bundle, process.execPath, path.dirname(process.execPath));
}

/** An asset's bytes where the executable is mapped (typed as a string too by @types/node, which it never is). */
function rawAsset(key: string): Buffer {
  return Buffer.from(getRawAsset(key) as ArrayBuffer);
}

async function main(): Promise<void> {
  if (process.argv[2] !== '__spawner' || !process.send) return runServerBundle();
  const { spawnerMain } = await import('../adapters/process/spawner-main.js');
  // Only built-in modules are loaded through it (the single executable has no import.meta.url to start from).
  spawnerMain(createRequire(process.execPath));
}

void main();
