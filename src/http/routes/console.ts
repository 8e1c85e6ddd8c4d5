/**
 * The web console: the single-page app built into console/dist, served at /console with no key (the page asks for
 * one and keeps it in the tab's session storage). Every page of the app is the same index.html, so deep links work;
 * hashed assets are cached for a year. The files are read once at startup and kept in memory, each with a gzip copy
 * made when it is first asked for (compressing the whole build would delay startup by a tenth of a second): the
 * whole build is a few hundred kilobytes, and requests never touch the file system, so no path from a URL can
 * reach a file outside the build. Not part of the API: the routes are hidden from the OpenAPI document.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { App } from '../types.ts';

export const CONSOLE_PATH = '/console';
const DEFAULT_DIR = fileURLToPath(new URL('../../../console/dist/', import.meta.url));

/**
 * Scripts, styles, images and API calls from this origin only; nothing inline, no frames, no plugins. Inline
 * `style` attributes set through the DOM (bar widths of the trace waterfall) are CSSOM writes, which CSP allows.
 * `blob:` images are the chat's attached images, fetched with the key (an `<img src>` could not send it).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};

interface StaticFile {
  type: string;
  body: Buffer;
  /** The gzip copy (made on the first call), or null for a file not worth compressing. */
  gzip(): Buffer | null;
}

function load(path: string, type: string): StaticFile {
  const body = readFileSync(path);
  // Images are compressed already; text shrinks by two thirds or more.
  if (type.startsWith('image/png') || body.length < 1024) return { type, body, gzip: () => null };
  let gzip: Buffer | null = null;
  return {
    type,
    body,
    gzip: () => {
      gzip ??= gzipSync(body, { level: 9 });
      return gzip;
    },
  };
}

/** Files of the build: index.html, and every file under assets/ by name (hashed names, so cacheable forever). */
function loadBuild(
  dir: string,
): { index: StaticFile; assets: Map<string, StaticFile>; root: Map<string, StaticFile> } | null {
  const indexPath = join(dir, 'index.html');
  if (!existsSync(indexPath)) return null;
  const assets = new Map<string, StaticFile>();
  const assetsDir = join(dir, 'assets');
  if (existsSync(assetsDir)) {
    for (const name of readdirSync(assetsDir)) {
      const type = TYPES[extname(name)];
      if (type !== undefined && statSync(join(assetsDir, name)).isFile())
        assets.set(name, load(join(assetsDir, name), type));
    }
  }
  // Unhashed files at the top of the build (the icon), cached for a day.
  const root = new Map<string, StaticFile>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type !== undefined && name !== 'index.html' && statSync(join(dir, name)).isFile()) {
      root.set(name, load(join(dir, name), type));
    }
  }
  return { index: load(indexPath, 'text/html; charset=utf-8'), assets, root };
}

function send(request: FastifyRequest, reply: FastifyReply, file: StaticFile, cacheControl: string): FastifyReply {
  reply.headers(SECURITY_HEADERS).header('cache-control', cacheControl).header('vary', 'accept-encoding');
  reply.type(file.type);
  const accepts = request.headers['accept-encoding'];
  const gzip = typeof accepts === 'string' && /\bgzip\b/.test(accepts) ? file.gzip() : null;
  if (gzip !== null) return reply.header('content-encoding', 'gzip').send(gzip);
  return reply.send(file.body);
}

const NOT_BUILT =
  'The web console has not been built. Run `npm install` (it builds the console) or `npm run console:build`, then restart.\n';

export function consoleRoutes(app: App, dir: string = DEFAULT_DIR): void {
  const build = loadBuild(dir);
  const hidden = { hide: true };
  const config = { public: true };

  app.route({
    method: 'GET',
    url: '/',
    config,
    schema: hidden,
    handler: async (_request, reply) => reply.redirect(`${CONSOLE_PATH}/`, 302),
  });

  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    if (build === null) {
      return reply.code(503).headers(SECURITY_HEADERS).type('text/plain; charset=utf-8').send(NOT_BUILT);
    }
    // Always revalidated: a new build must reach every open tab's next navigation.
    return send(request, reply, build.index, 'no-cache');
  };
  app.route({ method: 'GET', url: CONSOLE_PATH, config, schema: hidden, handler: page });
  app.route({ method: 'GET', url: `${CONSOLE_PATH}/*`, config, schema: hidden, handler: page });

  app.route({
    method: 'GET',
    url: `${CONSOLE_PATH}/assets/*`,
    config,
    schema: { ...hidden, params: Type.Object({ '*': Type.String() }) },
    handler: async (request, reply) => {
      // An exact name of the build's assets folder, or nothing: no path is ever joined from the URL.
      const file = build?.assets.get(request.params['*']);
      if (file === undefined) return reply.code(404).type('text/plain; charset=utf-8').send('Not found\n');
      return send(request, reply, file, 'public, max-age=31536000, immutable');
    },
  });

  for (const [name, file] of build?.root ?? []) {
    app.route({
      method: 'GET',
      url: `${CONSOLE_PATH}/${name}`,
      config,
      schema: hidden,
      handler: async (request, reply) => send(request, reply, file, 'public, max-age=86400'),
    });
  }
}
