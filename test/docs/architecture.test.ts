// The layering the style guide asks for, checked on every run from the code's own imports
// (read with the TypeScript parser; dependency-cruiser needs Node 22, this machine runs 20):
// no import cycles, core/ free of vendors, transports and the outside world.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findCycles, importGraph, type ImportEdge } from '../support/import-graph.js';

const root = path.resolve(import.meta.dirname, '../..');
const graph = importGraph(root);
const core = [...graph].filter(([file]) => file.startsWith(`src${path.sep}core${path.sep}`));
const offending = (files: [string, ImportEdge[]][], bad: (edge: ImportEdge) => boolean) =>
  files.flatMap(([file, edges]) => edges.filter(bad).map((edge) => `${file} imports ${edge.specifier}`));

const posix = (file: string) => file.split(path.sep).join('/');
/** A file a tool writes says `@generated` in its first lines: it is not held to the length of hand-written code. */
const GENERATED = /@generated/;
const sourceFiles = (dir: string): string[] =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.(ts|tsx|js|mjs|css)$/.test(entry.name) ? [full] : [];
  });

describe('the import graph of src/', () => {
  it('reads the whole tree', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(core.length).toBeGreaterThan(50);
  });

  it('has no import cycles at run time', () => {
    expect(findCycles(graph, { includeTypeOnly: false })).toEqual([]);
  });

  it('has no cycles through type-only imports either', () => {
    const cycles = findCycles(graph, { includeTypeOnly: true }).map((cycle) => cycle.map(posix).join(' -> '));
    expect(cycles).toEqual([]);
  });

  it('keeps vendors, transports and processes out of core/', () => {
    const vendors = /^(fastify|@fastify\/|fastify-type-provider-zod|openai|execa|undici|pino|prom-client|node:child_process|child_process)/;
    expect(offending(core, (edge) => vendors.test(edge.specifier))).toEqual([]);
  });

  it('keeps core/ from importing the layers around it (http, adapters, the command line, config, the composition root)', () => {
    const outer = /^src\/(http|adapters|cli|perf)\/|^src\/(compose|app|cli|config)[^/]*\.ts$/;
    expect(offending(core, (edge) => edge.target !== null && outer.test(edge.target.split(path.sep).join('/')))).toEqual([]);
  });

  it('keeps the file system out of core/: it reaches files only through ports (adapters/ implement them)', () => {
    expect(offending(core, (edge) => /^(node:)?fs(\/promises)?$/.test(edge.specifier))).toEqual([]);
  });

  it('speaks domain errors in core/: no HTTP status codes (the http layer maps error kinds to statuses)', () => {
    const statusLike = /\b(status|statusCode|httpStatus)\s*[:=]\s*[1-5]\d\d\b|\bHTTP:? [1-5]\d\d\b/;
    const found = core.flatMap(([file]) =>
      fs
        .readFileSync(path.join(root, file), 'utf8')
        .split('\n')
        .flatMap((line, index) => (statusLike.test(line) ? [`${file.split(path.sep).join('/')}:${index + 1}: ${line.trim()}`] : [])),
    );
    expect(found).toEqual([]);
  });

  it('keeps every source file of src/ to at most 400 lines (generated ones aside): a longer one is asking to be split', () => {
    const long = sourceFiles(path.join(root, 'src'))
      .map((file) => ({ file: posix(path.relative(root, file)), text: fs.readFileSync(file, 'utf8') }))
      .filter(({ text }) => !GENERATED.test(text.slice(0, 500)))
      .map(({ file, text }) => ({ file, lines: text.split('\n').length - (text.endsWith('\n') ? 1 : 0) }))
      .filter(({ lines }) => lines > 400)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    expect(long).toEqual([]);
  });

  it('keeps src/ itself to the entry points, the config and the composition root (at most 8 files)', () => {
    const loose = fs.readdirSync(path.join(root, 'src'), { withFileTypes: true }).filter((entry) => entry.isFile());
    expect(loose.length, loose.map((entry) => entry.name).join(', ')).toBeLessThanOrEqual(8);
  });

  it('keeps adapters/ to one folder per outside thing, with no loose file but an index', () => {
    const loose = fs.readdirSync(path.join(root, 'src', 'adapters'), { withFileTypes: true }).filter((entry) => entry.isFile() && entry.name !== 'index.ts');
    expect(loose.map((entry) => entry.name)).toEqual([]);
  });

  it('gives each subsystem of adapters/ one front door: the rest of src/ imports it through its index.ts', () => {
    const outside = [...graph].filter(([file]) => !posix(file).startsWith('src/adapters/'));
    const throughBack = offending(outside, (edge) => !edge.dynamic && edge.target !== null && /^src\/adapters\/[^/]+\/(?!index\.ts$)/.test(posix(edge.target)));
    expect(throughBack).toEqual([]);
  });

  it('keeps http/ to core/ and itself: the services it calls are a type declared in http/', () => {
    const http = [...graph].filter(([file]) => posix(file).startsWith('src/http/'));
    const outer = /^src\/(adapters|perf|cli)\/|^src\/(compose|app|cli|config|config-variables|logger)\.ts$/;
    expect(offending(http, (edge) => edge.target !== null && outer.test(posix(edge.target)))).toEqual([]);
  });
});
