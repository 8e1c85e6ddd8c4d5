/**
 * Every request schema of the API compiles. The server compiles a route's schemas when the route is first called
 * (http/validation.ts), not at start-up, so a schema Ajv refuses would otherwise show only on that first request.
 */
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { createValidatorCompiler, type RequestPart } from '../src/http/validation.ts';
import { createHarness, type Harness } from './helpers/harness.ts';

const PARTS: readonly RequestPart[] = ['body', 'querystring', 'params', 'headers'];

describe('request schemas', () => {
  let h: Harness;
  let routes: RouteOptions[];
  beforeAll(async () => {
    h = await createHarness('sqlite');
    routes = (await buildApp(h.deps)).routes;
  });
  afterAll(() => h.close());

  it('compile, every part of every route', () => {
    const compiler = createValidatorCompiler();
    let compiled = 0;
    for (const route of routes) {
      const schema = route.schema as Partial<Record<RequestPart, unknown>> | undefined;
      for (const part of PARTS) {
        if (schema?.[part] === undefined) continue;
        const method = String(route.method);
        const validate = compiler({ schema: schema[part], httpPart: part, method, url: route.url });
        // The first call compiles; what it answers for an empty value does not matter here.
        expect(() => validate({}), `${method} ${route.url} ${part}`).not.toThrow();
        compiled++;
      }
    }
    expect(compiled).toBeGreaterThan(50);
  });
});
