import path from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

/**
 * `agentd/client` bundled for the browser: it must build without Node's builtins and contain
 * nothing but the client and its SSE parser (no server code, no fastify, pino, zod or fs).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

describe('the client bundle for browsers', () => {
  it('holds only src/client and eventsource-parser, and no node: builtin', async () => {
    const result = await build({
      entryPoints: [path.join(ROOT, 'src', 'client', 'index.ts')],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    const foreign = inputs.filter((input) => !input.startsWith('src/client/') && !input.startsWith('node_modules/eventsource-parser/'));
    expect(foreign).toEqual([]);
    expect(inputs).toContain('src/client/agentd-client.ts');
    const code = result.outputFiles[0]!.text;
    expect(code).not.toMatch(/\bfrom\s*["']node:|require\(["']node:/);
    expect(code).toContain('AgentdClient');
  });
});
