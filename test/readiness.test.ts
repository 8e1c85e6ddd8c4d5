/**
 * A server that has started listening but not finished starting (main.ts bootstraps after it listens): the probes
 * say so with 503, and an API request that arrives then waits and is answered once the bootstrap key exists,
 * instead of a 401 for a key about to be created. The same server process, started many times and called in a
 * tight loop from the moment its port accepts, is in test/startup-readiness.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type BuiltApp, buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { buildDeps, type Deps } from '../src/deps.ts';
import { bootstrap } from '../src/domain/orgs/org-service.ts';
import { createLifecycle } from '../src/http/lifecycle.ts';
import { createLogger } from '../src/logger.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';

describe.each(dialects())('a server still starting (%s)', (dialect) => {
  let cleanup: (() => Promise<void>) | null = null;

  async function starting(startupWaitMs?: number): Promise<{ deps: Deps; built: BuiltApp; key: string }> {
    const environment = testEnvironment(dialect);
    const key = testKey();
    const config = loadConfig({ LOG_LEVEL: 'silent', AGENTRY_BOOTSTRAP_KEY: key, ...environment.env });
    const deps = await buildDeps(config, createLogger(config), undefined, { detectSandbox: false });
    const built = await buildApp(deps, {
      starting: true,
      ...(startupWaitMs === undefined ? {} : { startupWaitMs }),
    });
    cleanup = async () => {
      await built.app.close();
      await deps.close();
      await deps.storage.close();
      await environment.cleanup();
    };
    return { deps, built, key };
  }

  afterEach(async () => {
    await cleanup?.();
    cleanup = null;
  });

  it('answers the probes 503 with Retry-After, holds API requests until the bootstrap key exists, then serves them', async () => {
    const { deps, built, key } = await starting();
    const { app, lifecycle } = built;
    for (const url of ['/healthz', '/readyz']) {
      const probe = await app.inject({ method: 'GET', url });
      expect(probe.statusCode, url).toBe(503);
      expect(probe.headers['retry-after'], url).toBe('1');
      expect(probe.json().error).toMatchObject({ code: 'service_unavailable', type: 'server_error' });
      expect(probe.json().error.message).toContain('starting');
    }

    let answered = false;
    const early = app
      .inject({ method: 'GET', url: '/v1/agents', headers: { authorization: `Bearer ${key}` } })
      .finally(() => {
        answered = true;
      });
    // The organization and its key do not exist yet: answering now could only be a 401.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(answered).toBe(false);
    await bootstrap(deps.orgs, key);
    lifecycle.markReady();
    const response = await early;
    expect(response.statusCode).toBe(200);
    expect(response.json().data).toHaveLength(1);

    expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });

  it('answers 503 starting with Retry-After to a request that waited its limit', async () => {
    const { app } = (await starting(50)).built;
    const response = await app.inject({ method: 'GET', url: '/v1/agents', headers: { authorization: 'Bearer x' } });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('1');
    expect(response.json().error).toMatchObject({ code: 'service_unavailable' });
    expect(response.json().error.message).toContain('starting');
  });
});

describe('the lifecycle', () => {
  it('waits for readiness up to a limit', async () => {
    const lifecycle = createLifecycle({ ready: false });
    expect(lifecycle.ready).toBe(false);
    expect(await lifecycle.waitUntilReady(20)).toBe(false);
    const waiting = lifecycle.waitUntilReady(60_000);
    lifecycle.markReady();
    expect(await waiting).toBe(true);
    expect(lifecycle.ready).toBe(true);
    expect(await createLifecycle({ ready: true }).waitUntilReady(0)).toBe(true);
  });
});
