// PERF: what the server's and the binary's bundles (build-server.mjs, build-binary.mjs) leave
// out of a start, or load at first use: together they take about a tenth off an empty server's
// start-up CPU and some of its memory (bench/RESULTS.md, "Tricks measured").
import path from 'node:path';

/**
 * Packages that bundled ones require at the top of their modules but use only on some request: a
 * module that loads the package at its first use stands in (its own require of the package
 * resolved as the importer's would be), so a start does not run them.
 *
 * - `yaml`, of @fastify/swagger and @fastify/swagger-ui: for a YAML document asked for at /docs/yaml.
 * - `http-errors`, of @fastify/send (Swagger UI's files, through @fastify/static): for a file it
 *   cannot send; its top makes a class for each HTTP status.
 * - fast-json-stringify's `./lib/validator` (with it ajv): for a response schema with a union the
 *   serializer must pick a branch of, not the first /health's.
 * - `ajv`, its dialects and `ajv-formats`, of src/core/agent/output-schema.ts: for a message's
 *   output_schema. With Fastify's own compilers never loaded (src/app.ts), ajv is not run at start-up.
 * - `json-schema-resolver` (with `debug` and a fast-uri), of @fastify/swagger: for the OpenAPI
 *   document, made at its first request.
 * - `@fastify/busboy`, of @fastify/multipart: for a multipart upload.
 * - `thread-stream`, of pino: for a transport, which the server's log does not use (src/logger.ts).
 * - `node:https` and `node:http2` (which loads TLS), of Fastify's server: for an HTTPS or HTTP/2
 *   server, which agentd never asks Fastify for.
 * - prom-client's `./lib/pushgateway` (with `https` and `zlib`): for pushing metrics, never done.
 * - `semver`, of Fastify's plugin checks: the three functions they call, from their own modules,
 *   rather than the package's index, which loads every function and range it has.
 */
const FASTIFY_SERVER = /[\\/]node_modules[\\/]fastify[\\/]lib[\\/]server\.js$/;
const OUTPUT_SCHEMA = /[\\/]src[\\/]core[\\/]agent[\\/]output-schema\.ts$/;
const ON_DEMAND = [
  { name: 'yaml', importer: /[\\/]node_modules[\\/]@fastify[\\/]swagger(-ui)?[\\/]/, exports: '{ parse: (...args) => load().parse(...args), stringify: (...args) => load().stringify(...args) }' },
  { name: 'http-errors', importer: /[\\/]node_modules[\\/]@fastify[\\/]send[\\/]/, exports: '(...args) => load()(...args)' },
  { name: './lib/validator', importer: /[\\/]node_modules[\\/]fast-json-stringify[\\/]index\.js$/, exports: 'Object.assign(function Validator(...args) { return new (load())(...args); }, { escapeRefForAjv: (...args) => load().escapeRefForAjv(...args) })' },
  { name: 'ajv', importer: OUTPUT_SCHEMA, exports: '{ get Ajv() { return load().Ajv; } }' },
  { name: 'ajv/dist/2019.js', importer: OUTPUT_SCHEMA, exports: '{ get Ajv2019() { return load().Ajv2019; } }' },
  { name: 'ajv/dist/2020.js', importer: OUTPUT_SCHEMA, exports: '{ get Ajv2020() { return load().Ajv2020; } }' },
  { name: 'ajv-formats', importer: OUTPUT_SCHEMA, exports: '{ default: (...args) => load().default(...args) }' },
  { name: 'json-schema-resolver', importer: /[\\/]node_modules[\\/]@fastify[\\/]swagger[\\/]lib[\\/]util[\\/]add-hook\.js$/, exports: '(...args) => load()(...args)' },
  { name: '@fastify/busboy', importer: /[\\/]node_modules[\\/]@fastify[\\/]multipart[\\/]index\.js$/, exports: 'function Busboy(...args) { return new (load())(...args); }' },
  { name: 'thread-stream', importer: /[\\/]node_modules[\\/]pino[\\/]lib[\\/]transport\.js$/, exports: 'function ThreadStream(...args) { return new (load())(...args); }' },
  { name: 'node:https', importer: FASTIFY_SERVER, exports: '{ createServer: (...args) => load().createServer(...args) }' },
  { name: 'node:http2', importer: FASTIFY_SERVER, exports: '{ createServer: (...args) => load().createServer(...args), createSecureServer: (...args) => load().createSecureServer(...args) }' },
  { name: './lib/pushgateway', importer: /[\\/]node_modules[\\/]prom-client[\\/]index\.js$/, exports: 'function Pushgateway(...args) { return new (load())(...args); }' },
  { name: 'semver', importer: /[\\/]node_modules[\\/]fastify[\\/]lib[\\/]plugin-utils\.js$/, exports: "{ satisfies: require('semver/functions/satisfies'), gt: require('semver/functions/gt'), coerce: require('semver/functions/coerce') }" },
];

export const onDemand = {
  name: 'on-demand',
  setup(esbuild) {
    for (const { name, importer, exports } of ON_DEMAND) {
      // One stand-in per importer and package (named by both); its require is resolved from the importer's directory.
      esbuild.onResolve({ filter: exactly(name) }, (args) => (args.namespace === 'file' && importer.test(args.importer) ? { path: `${args.importer}#${name}`, namespace: 'on-demand', pluginData: { name, exports, importerDir: path.dirname(args.importer) } } : undefined));
    }
    esbuild.onLoad({ filter: /.*/, namespace: 'on-demand' }, (args) => ({
      contents: `let loaded;\nconst load = () => (loaded ??= require(${JSON.stringify(args.pluginData.name)}));\nmodule.exports = ${args.pluginData.exports};\n`,
      loader: 'js',
      resolveDir: args.pluginData.importerDir,
    }));
  },
};

/**
 * zod with its English messages only. Its main module re-exports every locale it has (`locales`,
 * about forty languages, nearly half of what zod puts in the bundle), parsed and run at every
 * start for messages in languages the server never sets: the locales' index is replaced by one
 * that has `en` alone.
 */
export const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(esbuild) {
    esbuild.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]v4[\\/](classic|core|mini)[\\/]/.test(args.importer) ? { path: path.join(path.dirname(args.importer), '..', 'locales', 'index.js'), namespace: 'zod-english-only' } : undefined,
    );
    esbuild.onLoad({ filter: /.*/, namespace: 'zod-english-only' }, (args) => ({
      contents: "export { default as en } from './en.js';\n",
      loader: 'js',
      resolveDir: path.dirname(args.path),
    }));
  },
};

/**
 * Packages that a bundled package requires at its top for a feature the server never uses: each is
 * left out of the bundle, and what stands in throws, saying so, if that feature is ever reached
 * (any property of it is itself, any call throws).
 *
 * - `glob`, of @fastify/static (Swagger UI serves its files with it): only for `wildcard: false`.
 * - `@opentelemetry/api`, of prom-client's CPU metric: only for exemplars, which the server's
 *   metrics do not enable.
 */
const LEFT_OUT = [
  { name: 'glob', importer: /[\\/]node_modules[\\/]@fastify[\\/]static[\\/]/, needed: "@fastify/static's wildcard: false" },
  { name: '@opentelemetry/api', importer: /[\\/]node_modules[\\/]prom-client[\\/]/, needed: "prom-client's exemplars" },
];

export const leftOut = {
  name: 'left-out',
  setup(esbuild) {
    for (const { name, importer, needed } of LEFT_OUT) {
      esbuild.onResolve({ filter: exactly(name) }, (args) => (importer.test(args.importer) ? { path: name, namespace: 'left-out', pluginData: needed } : undefined));
    }
    esbuild.onLoad({ filter: /.*/, namespace: 'left-out' }, (args) => ({
      contents: [
        `const fail = () => { throw new Error(${JSON.stringify(`${args.pluginData} needs the ${args.path} package, which agentd's bundle leaves out (scripts/perf/stand-ins.mjs)`)}); };`,
        "const stand = new Proxy(fail, { get: (_, key) => (typeof key === 'symbol' || key === '__esModule' || key === 'then' ? undefined : stand), apply: fail });",
        'module.exports = stand;',
      ].join('\n'),
      loader: 'js',
    }));
  },
};

/** An esbuild filter matching the import of `name` exactly. */
export function exactly(name) {
  return new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`);
}

/** Every stand-in, in the order esbuild should try them. */
export const standIns = [onDemand, zodEnglishOnly, leftOut];
