// The browser dashboard (src/ui): esbuild bundles its TypeScript (Preact, markdown-it) into one
// minified app.js beside index.html, app.css and favicon.svg, in dist/ui (served at /ui by
// src/http/routes/dashboard.ts). build-binary.mjs calls buildUi() to ship the files as SEA assets.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const source = path.join(root, 'src', 'ui');
export const UI_STATIC_FILES = ['index.html', 'app.css', 'favicon.svg'];

/** Builds the dashboard into `outDir`; returns the paths of the files written. */
export async function buildUi(outDir = path.join(root, 'dist', 'ui')) {
  fs.mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [path.join(source, 'main.tsx')],
    outfile: path.join(outDir, 'app.js'),
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome110', 'firefox110', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    logLevel: 'warning',
  });
  for (const name of UI_STATIC_FILES) fs.copyFileSync(path.join(source, name), path.join(outDir, name));
  return ['app.js', ...UI_STATIC_FILES].map((name) => path.join(outDir, name));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildUi();
