/**
 * The console is typed from the OpenAPI document: its committed types (console/src/api/schema.d.ts) and run-time
 * lists (enums.ts) must be what `npm run console:types` makes of the document this server serves now.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_ENUMS_FILE, API_TYPES_FILE, renderApiEnums, renderApiTypes } from '../scripts/console-api-types.ts';
import { createHarness, type Harness, json } from './helpers/harness.ts';

describe('console API types', () => {
  let h: Harness;
  let document: object;
  beforeAll(async () => {
    h = await createHarness('sqlite');
    document = json(await h.request('GET', '/v1/openapi.json', { key: null }));
  });
  afterAll(() => h.close());

  it('match the OpenAPI document (run `npm run console:types` after changing a route schema)', async () => {
    expect(readFileSync(API_TYPES_FILE, 'utf8')).toBe(await renderApiTypes(document));
    expect(readFileSync(API_ENUMS_FILE, 'utf8')).toBe(renderApiEnums(document));
  });

  it('offer every internal tool of the agent schema', () => {
    const enums = renderApiEnums(document);
    for (const tool of ['ask_user_question', 'sandbox', 'http_client']) expect(enums).toContain(`"${tool}"`);
  });
});
