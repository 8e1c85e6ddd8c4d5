/**
 * How the server serves the console's files, on a build made for the test: every console URL is index.html under
 * the CSP (deep links), assets by exact name only (gzip when accepted, cached for a year), nothing outside the
 * build, and a plain 503 that says how to build it when the build is missing.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP, consoleRoutes } from '../src/http/routes/console.ts';
import type { App } from '../src/http/types.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function appWith(build: Record<string, string> | null): Promise<App> {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-console-build-'));
  dirs.push(dir);
  if (build !== null) {
    mkdirSync(join(dir, 'assets'));
    for (const [name, content] of Object.entries(build)) writeFileSync(join(dir, name), content);
  }
  const app: App = Fastify();
  consoleRoutes(app, dir);
  await app.ready();
  return app;
}

describe('console serving', () => {
  const script = `console.log(${JSON.stringify('x'.repeat(4000))});`;

  it('answers every console path with index.html under the CSP, and / with a redirect', async () => {
    const app = await appWith({ 'index.html': '<!doctype html><title>c</title>', 'assets/app-1a2b.js': script });
    for (const path of ['/console', '/console/', '/console/agents/abc/chat', '/console/runs/x?y=1']) {
      const response = await app.inject({ method: 'GET', url: path });
      expect(response.statusCode, path).toBe(200);
      expect(response.body).toContain('<title>c</title>');
      expect(response.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(response.headers['cache-control']).toBe('no-cache');
      expect(response.headers['x-frame-options']).toBe('DENY');
    }
    const root = await app.inject({ method: 'GET', url: '/' });
    expect(root.statusCode).toBe(302);
    expect(root.headers.location).toBe('/console/');
  });

  it('serves assets by name, gzipped when accepted, cached for a year, and nothing else', async () => {
    const app = await appWith({ 'index.html': '<!doctype html>', 'assets/app-1a2b.js': script });
    const plain = await app.inject({ method: 'GET', url: '/console/assets/app-1a2b.js' });
    expect(plain.statusCode).toBe(200);
    expect(plain.body).toBe(script);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const gzipped = await app.inject({
      method: 'GET',
      url: '/console/assets/app-1a2b.js',
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzipped.rawPayload).toString()).toBe(script);
    for (const path of ['/console/assets/nope.js', '/console/assets/..%2F..%2Foutside.js', '/console/assets/a/b.js']) {
      expect((await app.inject({ method: 'GET', url: path })).statusCode, path).toBe(404);
    }
  });

  it('says how to build the console when it has not been built', async () => {
    const app = await appWith(null);
    const response = await app.inject({ method: 'GET', url: '/console/agents' });
    expect(response.statusCode).toBe(503);
    expect(response.body).toContain('npm run console:build');
  });
});
