import fs from 'node:fs';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { isSea } from 'node:sea';
import { readAssetBytes } from '../../assets.js';
import type { ErrorBody } from '../plugins/errors.js';

/**
 * The browser dashboard at /ui: three static files built by scripts/build-ui.mjs into dist/ui
 * (SEA assets `ui/<name>` in the single executable). Public: the files carry no data; the page
 * asks for the key and sends it itself. Same origin as the API, so no CORS; a strict CSP allows
 * only this origin's script, style and connections.
 */
const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-cache',
};

/** dist/ui beside the compiled routes (dist/http/routes → dist/ui), or, running from src/, the built one. */
const CANDIDATE_DIRS = ['../../ui/', '../../../dist/ui/'];

function readFromDisk(name: string): Buffer | null {
  for (const dir of CANDIDATE_DIRS) {
    const url = new URL(`${dir}${name}`, import.meta.url);
    if (fs.existsSync(new URL(`${dir}app.js`, import.meta.url)) && fs.existsSync(url)) return fs.readFileSync(url);
  }
  return null;
}

function readFromSea(name: string): Buffer | null {
  try {
    return readAssetBytes(`ui/${name}`);
  } catch {
    return null;
  }
}

const cache = new Map<string, Buffer>();

function load(name: string): Buffer | null {
  const known = cache.get(name);
  if (known) return known;
  const bytes = isSea() ? readFromSea(name) : readFromDisk(name);
  if (bytes) cache.set(name, bytes);
  return bytes;
}

function send(reply: FastifyReply, name: string): FastifyReply {
  const type = Object.hasOwn(FILES, name) ? FILES[name] : undefined;
  const bytes = type ? load(name) : null;
  if (!type || !bytes) {
    const body: ErrorBody = {
      error: 'not_found',
      message: type ? 'The dashboard is not built: run `npm run build`.' : `No dashboard file named ${name}.`,
      details: null,
    };
    return reply.code(404).send(body);
  }
  return reply.headers(SECURITY_HEADERS).type(type).send(bytes);
}

export function dashboardRoutes(): FastifyPluginAsync {
  return async (app) => {
    const options = { config: { public: true }, schema: { hide: true } };
    app.get('/ui', options, async (_request, reply) => send(reply, 'index.html'));
    app.get<{ Params: { file: string } }>('/ui/:file', options, async (request, reply) => send(reply, request.params.file));
  };
}
