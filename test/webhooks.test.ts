/**
 * Webhook endpoints over HTTP (spec 4.8): validation, URL rules, limits, scopes, isolation, secrets, the test
 * route, the follow-up route behind the beta header, and every agent.session.* event emitted by real turns and
 * delivered, signed, to a real local receiver (verified with the standardwebhooks package).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDispatcher } from '../src/deps.ts';
import { WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type Receiver, startReceiver, verified } from './helpers/webhook-receiver.ts';

const INSECURE = {
  AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
  AGENTRY_WEBHOOK_RETRY_BASE_MS: '50',
  AGENTRY_WEBHOOK_RETRY_WINDOW_MS: '60000',
};

const WEATHER_TOOL = weatherTool({ description: 'Weather for a city' });

describe.each(dialects())('webhook endpoints (%s)', (dialect) => {
  let h: Harness;
  let strict: Harness;
  let dispatcher: WebhookDispatcher;
  let receiver: Receiver;

  beforeAll(async () => {
    [h, strict, receiver] = await Promise.all([
      createHarness(dialect, INSECURE),
      createHarness(dialect),
      startReceiver(),
    ]);
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1000);
    await Promise.all([h?.close(), strict?.close(), receiver?.close()]);
  });

  const create = (harness: Harness, body: Record<string, unknown>, key?: string) =>
    harness.request('POST', '/v1/webhook_endpoints', {
      body: { name: 'hook', event_types: ['agent.session.created'], ...body },
      ...(key === undefined ? {} : { key }),
    });

  it('lists the supported event types', async () => {
    const response = await h.request('GET', '/v1/webhook_event_types');
    expect(response.status).toBe(200);
    const body = json(response);
    expect(body.object).toBe('list');
    expect(body.data.map((entry: { type: string }) => entry.type)).toEqual([...WEBHOOK_EVENT_TYPES]);
    for (const entry of body.data) expect(entry.description.length).toBeGreaterThan(5);
  });

  it('creates an endpoint with its secret shown once, then only a hint', async () => {
    const created = await create(h, { name: 'orders', url: `${receiver.url}/orders` });
    expect(created.status).toBe(200);
    const endpoint = json(created);
    expect(endpoint).toMatchObject({
      object: 'webhook_endpoint',
      name: 'orders',
      url: `${receiver.url}/orders`,
      event_types: ['agent.session.created'],
    });
    expect(endpoint.id).toMatch(/^we_[0-9a-f]{32}$/);
    expect(endpoint.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(endpoint.signing_secret.slice(6), 'base64')).toHaveLength(32);
    expect(endpoint.signing_secret_hint).toBe(`whsec_…${endpoint.signing_secret.slice(-4)}`);
    expect(Number.isInteger(endpoint.created_at) && endpoint.created_at < 1e11).toBe(true);

    const fetched = json(await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}`));
    expect(fetched.signing_secret).toBeUndefined();
    expect(fetched.signing_secret_hint).toBe(endpoint.signing_secret_hint);
    const listed = json(await h.request('GET', '/v1/webhook_endpoints'));
    expect(listed.data.find((entry: { id: string }) => entry.id === endpoint.id)).toEqual(fetched);
    expect(JSON.stringify(listed)).not.toContain(endpoint.signing_secret);
  });

  describe('URL rules', () => {
    const refused: [string, string][] = [
      ['plain http', 'http://hooks.example.com/in'],
      ['embedded credentials', 'https://user:pass@hooks.example.com/in'],
      ['a fragment', 'https://hooks.example.com/in#frag'],
      ['a private address', 'https://10.1.2.3/in'],
      ['loopback', 'https://127.0.0.1:8443/in'],
      ['IPv6 loopback', 'https://[::1]/in'],
      ['link-local metadata', 'https://169.254.169.254/latest'],
      ['a local name', 'https://localhost/in'],
      ['not a URL', 'hooks.example.com/in'],
    ];
    it.each(refused)('refuses %s at create and update', async (_name, url) => {
      const response = await create(strict, { url });
      expect(response.status).toBe(400);
      expect(json(response).error).toMatchObject({ code: 'validation_error', param: 'url' });
      expect(json(response).error.message).toMatch(/^url /);

      const good = json(await create(strict, { url: 'https://93.184.215.14/in' }));
      const update = await strict.request('POST', `/v1/webhook_endpoints/${good.id}`, { body: { url } });
      expect(update.status).toBe(400);
      expect(json(update).error.param).toBe('url');
      await strict.request('DELETE', `/v1/webhook_endpoints/${good.id}`);
    });

    it('accepts a public HTTPS URL', async () => {
      const response = await create(strict, { url: 'https://93.184.215.14/hooks?x=1' });
      expect(response.status).toBe(200);
      await strict.request('DELETE', `/v1/webhook_endpoints/${json(response).id}`);
    });

    it('allows http and private receivers only with AGENTRY_ALLOW_INSECURE_DESTINATIONS, never credentials', async () => {
      const ok = await create(h, { url: 'http://127.0.0.1:9/x' });
      expect(ok.status).toBe(200);
      await h.request('DELETE', `/v1/webhook_endpoints/${json(ok).id}`);
      expect((await create(h, { url: 'http://u:p@127.0.0.1:9/x' })).status).toBe(400);
      expect((await create(h, { url: 'http://127.0.0.1:9/x#y' })).status).toBe(400);
      expect((await create(h, { url: 'ftp://127.0.0.1/x' })).status).toBe(400);
    });
  });

  it('validates names, event types and unknown fields', async () => {
    const url = `${receiver.url}/v`;
    const cases: [Record<string, unknown>, string][] = [
      [{ url, event_types: [] }, 'event_types'],
      [{ url, event_types: ['agent.session.exploded'] }, 'event_types[0]'],
      [{ url, event_types: ['agent.session.idle', 'agent.session.idle'] }, 'event_types'],
      [{ url, name: '   ' }, 'name'],
      [{ url, colour: 'red' }, 'colour'],
      [{ url: 'x'.repeat(2049) }, 'url'],
    ];
    for (const [body, param] of cases) {
      const response = await create(h, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(json(response).error).toMatchObject({ code: 'validation_error', param });
    }
    const missing = await h.request('POST', '/v1/webhook_endpoints', { body: { name: 'x', url } });
    expect(json(missing).error.param).toBe('event_types');
  });

  it('allows at most 20 endpoints per organization', async () => {
    const org = await h.createOrg(`limits-${dialect}`);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const response = await create(h, { url: `${receiver.url}/${i}` }, org.key);
      expect(response.status).toBe(200);
      ids.push(json(response).id);
    }
    const over = await create(h, { url: `${receiver.url}/21` }, org.key);
    expect(over.status).toBe(400);
    expect(json(over).error.code).toBe('limit_exceeded');
    // Other organizations are not affected, and a deletion makes room.
    expect((await create(h, { url: `${receiver.url}/mine` })).status).toBe(200);
    expect((await h.request('DELETE', `/v1/webhook_endpoints/${ids[0]}`, { key: org.key })).status).toBe(200);
    expect((await create(h, { url: `${receiver.url}/21` }, org.key)).status).toBe(200);
  });

  it('pages the list newest first with limit and after', async () => {
    const org = await h.createOrg(`pages-${dialect}`);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(json(await create(h, { url: `${receiver.url}/${i}` }, org.key)).id);
    const first = json(await h.request('GET', '/v1/webhook_endpoints?limit=2', { key: org.key }));
    expect(first.data.map((e: { id: string }) => e.id)).toEqual([ids[4], ids[3]]);
    expect(first).toMatchObject({ has_more: true, first_id: ids[4], last_id: ids[3] });
    const second = json(
      await h.request('GET', `/v1/webhook_endpoints?limit=2&after=${first.last_id}`, { key: org.key }),
    );
    expect(second.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1]]);
    // A deleted endpoint still anchors its page.
    await h.request('DELETE', `/v1/webhook_endpoints/${ids[1]}`, { key: org.key });
    const third = json(await h.request('GET', `/v1/webhook_endpoints?limit=2&after=${ids[1]}`, { key: org.key }));
    expect(third).toMatchObject({ has_more: false, last_id: ids[0] });
    for (const query of ['limit=0', 'limit=101', 'limit=x', 'after=', 'after=we_nope', 'colour=red']) {
      const response = await h.request('GET', `/v1/webhook_endpoints?${query}`, { key: org.key });
      expect(response.status, query).toBe(400);
      expect(json(response).error.code).toBe('validation_error');
    }
    expect(json(await h.request('GET', '/v1/webhook_endpoints?limit=100', { key: org.key })).data).toHaveLength(4);
  });

  it('updates name, url or the complete event_types list, deletes, and rotates the secret', async () => {
    const endpoint = json(await create(h, { url: `${receiver.url}/u` }));
    const renamed = json(await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}`, { body: { name: 'new' } }));
    expect(renamed).toMatchObject({ name: 'new', url: `${receiver.url}/u`, event_types: ['agent.session.created'] });
    const retyped = json(
      await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}`, {
        body: { event_types: ['agent.session.idle', 'agent.session.failed'], url: `${receiver.url}/v` },
      }),
    );
    expect(retyped).toMatchObject({
      event_types: ['agent.session.idle', 'agent.session.failed'],
      url: `${receiver.url}/v`,
    });
    expect(retyped.signing_secret).toBeUndefined();
    const empty = await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}`, { body: {} });
    expect(empty.status).toBe(400);

    const rotated = await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: {} });
    expect(rotated.status).toBe(200);
    expect(json(rotated).signing_secret).toMatch(/^whsec_/);
    expect(json(rotated).signing_secret).not.toBe(endpoint.signing_secret);
    expect(json(rotated).signing_secret_hint).toBe(`whsec_…${json(rotated).signing_secret.slice(-4)}`);

    const deleted = await h.request('DELETE', `/v1/webhook_endpoints/${endpoint.id}`);
    expect(json(deleted)).toEqual({ id: endpoint.id, object: 'webhook_endpoint.deleted', deleted: true });
    for (const [method, path, body] of [
      ['GET', '', undefined],
      ['POST', '', { name: 'x' }],
      ['DELETE', '', undefined],
      ['POST', '/rotate_secret', {}],
      ['GET', '/events', undefined],
    ] as const) {
      const response = await h.request(method, `/v1/webhook_endpoints/${endpoint.id}${path}`, body ? { body } : {});
      expect(response.status, `${method} ${path}`).toBe(404);
    }
  });

  it('requires webhooks:read to read and webhooks:write to change; task keys get 403', async () => {
    const orgId = (await h.deps.auth.authenticate(h.key, Date.now()))?.orgId ?? '';
    const tasks = await h.deps.orgs.createKey(orgId, ['tasks:read', 'tasks:write']);
    const reader = await h.deps.orgs.createKey(orgId, ['webhooks:read']);
    const writer = await h.deps.orgs.createKey(orgId, ['webhooks:write']);
    const endpoint = json(await create(h, { url: `${receiver.url}/s` }));
    const reads = ['/v1/webhook_event_types', '/v1/webhook_endpoints', `/v1/webhook_endpoints/${endpoint.id}`];
    for (const path of reads) {
      expect((await h.request('GET', path, { key: tasks })).status, path).toBe(403);
      expect((await h.request('GET', path, { key: reader })).status, path).toBe(200);
      expect((await h.request('GET', path, { key: writer })).status, path).toBe(403);
    }
    const write = { body: { name: 'x', url: `${receiver.url}/s`, event_types: ['agent.session.idle'] } };
    const denied = await h.request('POST', '/v1/webhook_endpoints', { ...write, key: reader });
    expect(denied.status).toBe(403);
    expect(json(denied).error.code).toBe('insufficient_scopes');
    expect((await h.request('POST', '/v1/webhook_endpoints', { ...write, key: tasks })).status).toBe(403);
    expect((await h.request('POST', '/v1/webhook_endpoints', { ...write, key: writer })).status).toBe(200);
    expect((await h.request('DELETE', `/v1/webhook_endpoints/${endpoint.id}`, { key: reader })).status).toBe(403);
    expect((await h.request('GET', '/v1/webhook_endpoints', { key: null })).status).toBe(401);
  });

  it("keeps organizations apart: another org's endpoint is 404 and absent from lists", async () => {
    const other = await h.createOrg(`isolation-${dialect}`);
    const theirs = json(await create(h, { url: `${receiver.url}/theirs` }, other.key));
    expect((await h.request('GET', `/v1/webhook_endpoints/${theirs.id}`)).status).toBe(404);
    expect((await h.request('POST', `/v1/webhook_endpoints/${theirs.id}`, { body: { name: 'x' } })).status).toBe(404);
    const mine = json(await h.request('GET', '/v1/webhook_endpoints?limit=100'));
    expect(mine.data.some((entry: { id: string }) => entry.id === theirs.id)).toBe(false);
    expect((await h.request('GET', `/v1/webhook_endpoints?after=${theirs.id}`)).status).toBe(400);
    expect((await h.request('GET', `/v1/webhook_endpoints/${theirs.id}`, { key: other.key })).status).toBe(200);
  });

  describe('test route', () => {
    it('makes one signed attempt, reports any status, and records it in the history', async () => {
      const endpoint = json(
        await create(h, {
          url: `${receiver.url}/test`,
          event_types: ['agent.session.created', 'agent.session.action_required'],
        }),
      );
      receiver.answer = (request) => (request.path === '/test' ? 418 : 200);
      const before = receiver.received.length;
      const response = await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}/test`, {
        body: { event_type: 'agent.session.action_required' },
      });
      receiver.answer = () => 200;
      expect(response.status).toBe(200);
      const result = json(response);
      expect(result).toMatchObject({
        object: 'webhook_endpoint.test',
        webhook_endpoint_id: endpoint.id,
        event_type: 'agent.session.action_required',
        success: true,
        status_code: 418,
      });
      const request = receiver.received.slice(before).find((r) => r.path === '/test');
      expect(request).toBeDefined();
      const envelope = verified(endpoint.signing_secret, request!);
      expect(envelope).toMatchObject({
        id: result.event_id,
        object: 'event',
        type: 'agent.session.action_required',
        data: { id: 'test_resource', required_action: { type: 'function_call' } },
      });
      const events = json(await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events`));
      expect(events.data[0]).toEqual({ ...envelope });
      const delivery = json(
        await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events/${result.event_id}/delivery`),
      );
      expect(delivery).toMatchObject({
        id: result.delivery_id,
        kind: 'test',
        status: 'failed',
        attempts: 1,
        status_code: 418,
        webhook_id: request!.headers['webhook-id'],
      });
      // A test goes to its endpoint only, and never twice.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(receiver.received.filter((r) => r.body.includes(result.event_id))).toHaveLength(1);
    });

    it('answers 502 when the receiver cannot be reached, and refuses unsubscribed types', async () => {
      const closed = await startReceiver();
      const url = closed.url;
      await closed.close();
      const endpoint = json(await create(h, { url: `${url}/gone` }));
      const response = await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}/test`, {
        body: { event_type: 'agent.session.created' },
      });
      expect(response.status).toBe(502);
      expect(json(response).error.code).toBe('webhook_test_failed');
      expect(json(response).error.message).toContain('connect_failed');
      const events = json(await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events`));
      expect(events.data).toHaveLength(1);
      const delivery = json(
        await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events/${events.data[0].id}/delivery`),
      );
      expect(delivery).toMatchObject({ status: 'failed', attempts: 1, status_code: null });
      expect(delivery.error.code).toBe('connect_failed');

      const unsubscribed = await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}/test`, {
        body: { event_type: 'agent.session.idle' },
      });
      expect(unsubscribed.status).toBe(400);
      expect(json(unsubscribed).error.param).toBe('event_type');
    });
  });

  describe('follow-up route', () => {
    it('requires the Agentry-Beta header, and lists pending client calls as required_actions', async () => {
      const agent = json(
        await h.request('POST', '/v1/agents', { body: { name: 'followup', clientTools: [WEATHER_TOOL] } }),
      ).agent;
      const session = json(await h.request('POST', '/v1/sessions', { body: { agentId: agent.id } })).session;
      const message = json(
        await h.request('POST', `/v1/sessions/${session.id}/messages`, {
          headers: { 'idempotency-key': 'followup' },
          body: { parts: [{ type: 'text', text: 'call get_weather {"city":"Paris"}' }] },
        }),
      );
      const path = `/v1/agents/sessions/${session.id}`;
      const missing = await h.request('GET', path);
      expect(missing.status).toBe(400);
      expect(json(missing).error).toMatchObject({ code: 'validation_error', param: 'Agentry-Beta' });
      expect(json(missing).error.message).toContain('Agentry-Beta: agents=v1');
      const wrong = await h.request('GET', path, { headers: { 'agentry-beta': 'agents=v0' } });
      expect(wrong.status).toBe(400);

      const waiting = await waitUntil(
        async () => {
          const response = await h.request('GET', path, { headers: { 'Agentry-Beta': 'agents=v1' } });
          expect(response.status).toBe(200);
          const found = json(response).session;
          return found.status === 'requires_action' ? found : null;
        },
        { what: 'the session to require action' },
      );
      expect(waiting).toMatchObject({ id: session.id, object: 'session', agentId: agent.id });
      expect(waiting.required_actions).toEqual([
        {
          type: 'function_call',
          turn_id: message.id,
          call_id: expect.any(String),
          name: 'get_weather',
          arguments: '{"city":"Paris"}',
        },
      ]);
      const idle = json(await h.request('POST', '/v1/sessions', { body: { agentId: agent.id } })).session;
      const none = json(
        await h.request('GET', `/v1/agents/sessions/${idle.id}`, { headers: { 'agentry-beta': 'agents=v1' } }),
      );
      expect(none.session.required_actions).toEqual([]);
      const other = await h.createOrg(`followup-${dialect}`);
      const foreign = await h.request('GET', path, { key: other.key, headers: { 'agentry-beta': 'agents=v1' } });
      expect(foreign.status).toBe(404);
    });
  });

  describe('events of real turns', () => {
    it('emits every agent.session.* event at the right moment, signed and verifiable', async () => {
      const org = await h.createOrg(`turns-${dialect}`);
      const endpoint = json(
        await create(h, { url: `${receiver.url}/all/${dialect}`, event_types: [...WEBHOOK_EVENT_TYPES] }, org.key),
      );
      const agent = json(
        await h.request('POST', '/v1/agents', { key: org.key, body: { name: 'events', clientTools: [WEATHER_TOOL] } }),
      ).agent;
      const newSession = async () =>
        json(await h.request('POST', '/v1/sessions', { key: org.key, body: { agentId: agent.id } })).session
          .id as string;
      let said = 0;
      const say = async (sessionId: string, text: string) => {
        said += 1;
        return json(
          await h.request('POST', `/v1/sessions/${sessionId}/messages`, {
            key: org.key,
            headers: { 'idempotency-key': `say-${said}` },
            body: { parts: [{ type: 'text', text }] },
          }),
        ).id as string;
      };
      const mine = () =>
        receiver.received
          .filter((request) => request.path === `/all/${dialect}`)
          .map((request) => ({ request, event: verified(endpoint.signing_secret, request) }));
      const eventsOf = (id: string) =>
        mine().filter(({ event }) => event.data.id === id || event.data.session_id === id);
      const waitForType = (type: string, id: string) =>
        receiver.waitFor(() => eventsOf(id).some(({ event }) => event.type === type), `${type} for ${id}`);

      // A completed turn: created, in_progress, turn.completed, idle.
      const s1 = await newSession();
      const m1 = await say(s1, 'hello');
      await waitForType('agent.session.idle', s1);
      // A failed turn: in_progress, turn.failed, failed.
      const m2 = await say(s1, 'fail boom');
      await waitForType('agent.session.failed', s1);
      // A client call: action_required with its type.
      const s2 = await newSession();
      const m3 = await say(s2, 'call get_weather {"city":"Oslo"}');
      await waitForType('agent.session.action_required', s2);
      // An interrupted turn: turn.cancelled, idle.
      const s3 = await newSession();
      const m4 = await say(s3, 'sleep 20000');
      await waitForType('agent.session.in_progress', s3);
      expect((await h.request('POST', `/v1/sessions/${s3}/interrupt`, { key: org.key })).status).toBe(200);
      await waitForType('agent.session.turn.cancelled', m4);
      await waitForType('agent.session.idle', s3);

      const types = (id: string) => eventsOf(id).map(({ event }) => event.type);
      expect(types(s1)).toEqual(
        expect.arrayContaining(['agent.session.created', 'agent.session.in_progress', 'agent.session.idle']),
      );
      const byType = (type: string) => mine().filter(({ event }) => event.type === type);
      expect(byType('agent.session.turn.completed').map(({ event }) => event.data)).toEqual([
        { id: m1, session_id: s1 },
      ]);
      expect(byType('agent.session.turn.failed')[0]?.event.data).toMatchObject({ id: m2, session_id: s1 });
      expect(byType('agent.session.failed')[0]?.event.data).toEqual({ id: s1 });
      expect(byType('agent.session.turn.cancelled').map(({ event }) => event.data)).toEqual([
        { id: m4, session_id: s3 },
      ]);
      const action = byType('agent.session.action_required');
      expect(action).toHaveLength(1);
      expect(action[0]?.event.data).toMatchObject({
        id: s2,
        turn_id: m3,
        required_action: { type: 'function_call', name: 'get_weather' },
      });
      expect(
        byType('agent.session.created')
          .map(({ event }) => event.data.id)
          .sort(),
      ).toEqual([s1, s2, s3].sort());
      // Session turns emit every agent.session.* event (workflow.run.* come from tool runs: test/workflow-runs.test.ts;
      // schedule.run.* from schedules: test/schedules-webhooks.test.ts).
      for (const type of WEBHOOK_EVENT_TYPES.filter((name) => name.startsWith('agent.session.')))
        expect(byType(type).length, type).toBeGreaterThan(0);
      // Envelopes and headers: evt_ ids, Unix seconds, a per-attempt timestamp, one webhook-id per event here.
      for (const { request, event } of mine()) {
        expect(Object.keys(event)).toEqual(['id', 'object', 'created_at', 'type', 'data']);
        expect(event.id).toMatch(/^evt_/);
        expect(event.object).toBe('event');
        expect(Math.abs(event.created_at - Date.now() / 1000)).toBeLessThan(120);
        expect(request.headers['webhook-id']).toMatch(/^msg_/);
        expect(request.headers['content-type']).toBe('application/json');
      }
      const ids = mine().map(({ request }) => request.headers['webhook-id']);
      expect(new Set(ids).size).toBe(ids.length);
      // The endpoint's event history lists them, newest first, and pages with after.
      const history = json(
        await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events?limit=100`, { key: org.key }),
      );
      expect(history.data).toHaveLength(mine().length);
      const page = json(
        await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events?limit=3&after=${history.data[2].id}`, {
          key: org.key,
        }),
      );
      expect(page.data.map((e: { id: string }) => e.id)).toEqual(
        history.data.slice(3, 6).map((e: { id: string }) => e.id),
      );
      expect(
        (await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events?limit=101`, { key: org.key })).status,
      ).toBe(400);

      // An event stored in a shape its type no longer has (an older version's) is left out of the list, which
      // still pages past it: its page is empty but names it as last_id.
      const stale: string = history.data[1].id;
      await h.deps.storage.db
        .updateTable('webhook_events')
        .set({ data: JSON.stringify({ resource: 'older' }) })
        .where('id', '=', stale)
        .execute();
      const listed = json(
        await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events?limit=100`, { key: org.key }),
      );
      expect(listed.data.map((e: { id: string }) => e.id)).toEqual(
        history.data.filter((e: { id: string }) => e.id !== stale).map((e: { id: string }) => e.id),
      );
      const around = async (after: string) =>
        json(
          await h.request('GET', `/v1/webhook_endpoints/${endpoint.id}/events?limit=1&after=${after}`, {
            key: org.key,
          }),
        );
      expect(await around(history.data[0].id)).toEqual({
        object: 'list',
        data: [],
        first_id: stale,
        last_id: stale,
        has_more: true,
      });
      expect((await around(stale)).data.map((e: { id: string }) => e.id)).toEqual([history.data[2].id]);
    });
  });
});
