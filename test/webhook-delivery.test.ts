/**
 * Webhook delivery behaviour against a real local receiver, every request verified with the standardwebhooks
 * package: retries then success, failure after the (shortened) window, a timestamp and signature per attempt,
 * manual redelivery, rotation, URL and subscription changes, deletion, isolation of a slow receiver, history
 * retention, and a kill -9 in the middle of a delivery's retries with real server processes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDispatcher } from '../src/deps.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { httpClient, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json, testEnvironment, testKey } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import { type Answer, type Received, type Receiver, startReceiver, verified } from './helpers/webhook-receiver.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Per-path answers: `script(n)` answers the n-th request (0-based) to that path. */
function routeAnswers(receiver: Receiver): Map<string, (n: number) => Answer | number> {
  const routes = new Map<string, (n: number) => Answer | number>();
  const counts = new Map<string, number>();
  receiver.answer = (request) => {
    const n = counts.get(request.path) ?? 0;
    counts.set(request.path, n + 1);
    return routes.get(request.path)?.(n) ?? 200;
  };
  return routes;
}

interface World {
  h: Harness;
  dispatcher: WebhookDispatcher;
  agentId: string;
  close(): Promise<void>;
}

async function world(dialect: 'sqlite' | 'postgres', env: Record<string, string>): Promise<World> {
  const h = await createHarness(dialect, {
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    AGENTRY_WEBHOOK_RETRY_BASE_MS: '40',
    AGENTRY_WEBHOOK_RETRY_WINDOW_MS: '60000',
    ...env,
  });
  const dispatcher = buildDispatcher(h.deps);
  dispatcher.start();
  const agentId = json(await h.request('GET', '/v1/agents')).data[0].id;
  return {
    h,
    dispatcher,
    agentId,
    async close() {
      await dispatcher.stop(1000);
      await h.close();
    },
  };
}

async function endpoint(w: World, url: string, types: string[] = ['agent.session.created']) {
  const response = await w.h.request('POST', '/v1/webhook_endpoints', {
    body: { name: 'delivery', url, event_types: types },
  });
  expect(response.status).toBe(200);
  return json(response) as { id: string; signing_secret: string; url: string };
}

/** Creates a session: one agent.session.created event, whose data.id is the session id. */
async function sessionCreated(w: World): Promise<string> {
  return json(await w.h.request('POST', '/v1/sessions', { body: { agentId: w.agentId } })).session.id;
}

const onPath = (receiver: Receiver, path: string) => receiver.received.filter((request) => request.path === path);

async function delivery(w: World, endpointId: string, eventId: string, replayKey?: string) {
  const query = replayKey === undefined ? '' : `?replay_key=${encodeURIComponent(replayKey)}`;
  return w.h.request('GET', `/v1/webhook_endpoints/${endpointId}/events/${eventId}/delivery${query}`);
}

/** Waits (10 s at most) until the delivery of an event to an endpoint has `status`, and returns it. */
function deliveryWithStatus(
  w: World,
  endpointId: string,
  eventId: string,
  status: string,
  { what, replayKey }: { what: string; replayKey?: string },
) {
  return waitUntil(
    async () => {
      const body = json(await delivery(w, endpointId, eventId, replayKey));
      return body.status === status ? body : null;
    },
    { what },
  );
}

async function attemptsOf(w: World, deliveryId: string) {
  return w.h.deps.storage.db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('delivery_id', '=', deliveryId)
    .orderBy('attempted_at')
    .execute();
}

describe.each(dialects())('webhook delivery (%s)', (dialect) => {
  let w: World;
  let receiver: Receiver;
  let routes: Map<string, (n: number) => Answer | number>;
  beforeAll(async () => {
    [w, receiver] = await Promise.all([world(dialect, {}), startReceiver()]);
    routes = routeAnswers(receiver);
  });
  afterAll(async () => {
    await Promise.all([w?.close(), receiver?.close()]);
  });

  it('retries failures (5xx, redirects) with a new timestamp and signature per attempt, then delivers', async () => {
    const path = `/retry/${dialect}`;
    routes.set(
      path,
      (n) =>
        [
          { status: 500, headers: { 'retry-after': '1' } },
          { status: 503, headers: { 'retry-after': '1' } },
          { status: 302, headers: { location: `${receiver.url}/elsewhere` } },
        ][n] ?? 200,
    );
    const hook = await endpoint(w, `${receiver.url}${path}`);
    const sessionId = await sessionCreated(w);
    const requests = await receiver
      .waitFor(() => onPath(receiver, path).length >= 4, 'four attempts')
      .then(() => onPath(receiver, path));
    expect(requests).toHaveLength(4);
    const envelopes = requests.map((request) => verified(hook.signing_secret, request));
    expect(envelopes[0]).toMatchObject({ object: 'event', type: 'agent.session.created', data: { id: sessionId } });
    // The same body and webhook-id every time; a timestamp and signature of its own per attempt.
    expect(new Set(requests.map((r) => r.body)).size).toBe(1);
    expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const stamps = requests.map((r) => Number(r.headers['webhook-timestamp']));
    expect(stamps[1]! - stamps[0]!).toBeGreaterThanOrEqual(1);
    expect(stamps[2]! - stamps[1]!).toBeGreaterThanOrEqual(1);
    for (const [i, request] of requests.entries()) {
      expect(Math.abs(stamps[i]! - Math.floor(request.at / 1000))).toBeLessThanOrEqual(1);
    }
    const signatures = requests.map((r) => r.headers['webhook-signature']);
    expect(new Set(signatures.slice(0, 3)).size).toBe(3);
    // A redirect is a failure, never followed.
    expect(onPath(receiver, '/elsewhere')).toHaveLength(0);

    const eventId = envelopes[0]!.id;
    const status = await deliveryWithStatus(w, hook.id, eventId, 'delivered', { what: 'the delivery to be recorded' });
    expect(status).toMatchObject({
      object: 'webhook_delivery',
      webhook_endpoint_id: hook.id,
      event_id: eventId,
      webhook_id: requests[0]!.headers['webhook-id'],
      kind: 'automatic',
      replay_key: null,
      attempts: 4,
      status_code: 200,
      error: null,
      next_attempt_at: null,
    });
    const attempts = await attemptsOf(w, status.id);
    expect(attempts.map((a) => a.status_code)).toEqual([500, 503, 302, 200]);
    expect(attempts.map((a) => Number(a.webhook_timestamp))).toEqual(stamps);
    expect(JSON.parse(attempts[2]!.error ?? '{}').code).toBe('redirect');
    for (const attempt of attempts) expect(attempt.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('gives each endpoint its own webhook-id for the same event', async () => {
    const [a, b] = [`/pair-a/${dialect}`, `/pair-b/${dialect}`];
    const hookA = await endpoint(w, `${receiver.url}${a}`);
    const hookB = await endpoint(w, `${receiver.url}${b}`);
    const sessionId = await sessionCreated(w);
    const mine = (path: string) => onPath(receiver, path).filter((r) => r.body.includes(sessionId));
    await receiver.waitFor(() => mine(a).length > 0 && mine(b).length > 0, 'both endpoints');
    const [ra, rb] = [mine(a)[0]!, mine(b)[0]!];
    expect(verified(hookA.signing_secret, ra)).toEqual(verified(hookB.signing_secret, rb));
    expect(ra.headers['webhook-id']).not.toBe(rb.headers['webhook-id']);
    expect(() => verified(hookA.signing_secret, rb)).toThrow();
    await w.h.request('DELETE', `/v1/webhook_endpoints/${hookA.id}`);
    await w.h.request('DELETE', `/v1/webhook_endpoints/${hookB.id}`);
  });

  it('signs later attempts with a rotated secret, and sends them to a changed URL', async () => {
    const [before, after] = [`/rotate-old/${dialect}`, `/rotate-new/${dialect}`];
    routes.set(before, () => ({ status: 500, headers: { 'retry-after': '1' } }));
    const hook = await endpoint(w, `${receiver.url}${before}`);
    await sessionCreated(w);
    const [first] = await receiver
      .waitFor(() => onPath(receiver, before).length >= 1, 'a first attempt')
      .then(() => onPath(receiver, before));
    const rotated = json(await w.h.request('POST', `/v1/webhook_endpoints/${hook.id}/rotate_secret`, { body: {} }));
    await w.h.request('POST', `/v1/webhook_endpoints/${hook.id}`, { body: { url: `${receiver.url}${after}` } });
    await receiver.waitFor(() => onPath(receiver, after).length >= 1, 'an attempt at the new URL');
    const [second] = onPath(receiver, after);
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.body).toBe(first!.body);
    expect(verified(rotated.signing_secret, second!).data).toBeDefined();
    expect(() => verified(hook.signing_secret, second!)).toThrow();
    expect(() => verified(rotated.signing_secret, first!)).toThrow();
    await sleep(1300);
    expect(onPath(receiver, before)).toHaveLength(1);
  });

  it('applies subscription changes to future events only', async () => {
    const path = `/subscribe/${dialect}`;
    routes.set(path, (n) => (n === 0 ? { status: 500, headers: { 'retry-after': '1' } } : 200));
    const hook = await endpoint(w, `${receiver.url}${path}`);
    const pendingSession = await sessionCreated(w);
    await receiver.waitFor(() => onPath(receiver, path).length >= 1, 'the first attempt');
    await w.h.request('POST', `/v1/webhook_endpoints/${hook.id}`, { body: { event_types: ['agent.session.idle'] } });
    const laterSession = await sessionCreated(w);
    // The pending delivery of the earlier event still completes; the later event is not assigned.
    await receiver.waitFor(() => onPath(receiver, path).length >= 2, 'the retry');
    await sleep(700);
    const bodies = onPath(receiver, path).map((r) => verified(hook.signing_secret, r).data.id);
    expect(bodies).toEqual([pendingSession, pendingSession]);
    expect(bodies).not.toContain(laterSession);
    const events = json(await w.h.request('GET', `/v1/webhook_endpoints/${hook.id}/events`));
    expect(events.data.map((e: { data: { id: string } }) => e.data.id)).toEqual([pendingSession]);
  });

  it('stops attempting once the endpoint is deleted: pending deliveries become skipped', async () => {
    const path = `/deleted/${dialect}`;
    routes.set(path, () => ({ status: 500, headers: { 'retry-after': '1' } }));
    const hook = await endpoint(w, `${receiver.url}${path}`);
    await sessionCreated(w);
    await receiver.waitFor(() => onPath(receiver, path).length >= 1, 'the first attempt');
    expect((await w.h.request('DELETE', `/v1/webhook_endpoints/${hook.id}`)).status).toBe(200);
    const rows = await waitUntil(
      async () => {
        const found = await w.h.deps.storage.db
          .selectFrom('webhook_deliveries')
          .select(['status', 'attempts', 'error'])
          .where('endpoint_id', '=', hook.id)
          .execute();
        // Skipped at the delete; the attempt that was in flight then is recorded when its answer is in.
        return found.every((row) => row.status !== 'pending' && row.attempts > 0) ? found : null;
      },
      { what: 'the pending delivery to be skipped, with its attempt recorded' },
    );
    // Past the 1 s Retry-After: a retry would have come by now.
    await sleep(1600);
    expect(onPath(receiver, path)).toHaveLength(1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'skipped', attempts: 1 });
    expect(JSON.parse(rows[0]!.error ?? '{}').code).toBe('endpoint_deleted');
  });

  it('redelivers manually: same body and webhook-id, a new window, the same key reuses the delivery', async () => {
    const path = `/manual/${dialect}`;
    const hook = await endpoint(w, `${receiver.url}${path}`);
    await sessionCreated(w);
    await receiver.waitFor(() => onPath(receiver, path).length >= 1, 'the automatic delivery');
    const original = onPath(receiver, path)[0]!;
    const eventId = verified(hook.signing_secret, original).id;
    const automatic = await deliveryWithStatus(w, hook.id, eventId, 'delivered', {
      what: 'the automatic delivery to be recorded',
    });

    await sleep(1100);
    const redeliver = (key?: string) =>
      w.h.request('POST', `/v1/webhook_endpoints/${hook.id}/events/${eventId}/redeliver`, {
        body: {},
        ...(key === undefined ? {} : { headers: { 'idempotency-key': key } }),
      });
    const first = await redeliver('replay-1');
    expect(first.status).toBe(202);
    const manual = json(first);
    expect(manual).toMatchObject({
      object: 'webhook_delivery',
      kind: 'manual',
      replay_key: 'replay-1',
      event_id: eventId,
    });
    expect(manual.id).toMatch(/^dlv_/);
    expect(manual.id).not.toBe(automatic.id);
    expect(manual.expires_at).toBeGreaterThan(automatic.expires_at);
    await receiver.waitFor(() => onPath(receiver, path).length >= 2, 'the manual delivery');
    const again = onPath(receiver, path)[1]!;
    expect(again.body).toBe(original.body);
    expect(again.headers['webhook-id']).toBe(original.headers['webhook-id']);
    expect(Number(again.headers['webhook-timestamp'])).toBeGreaterThan(Number(original.headers['webhook-timestamp']));
    expect(verified(hook.signing_secret, again).id).toBe(eventId);

    const status = await deliveryWithStatus(w, hook.id, eventId, 'delivered', {
      what: 'the manual delivery to be recorded',
      replayKey: 'replay-1',
    });
    expect(status).toMatchObject({ id: manual.id, attempts: 1, status_code: 200 });
    // The same key: the same delivery, not a new request.
    const repeat = await redeliver('replay-1');
    expect(repeat.status).toBe(202);
    expect(json(repeat).id).toBe(manual.id);
    await sleep(400);
    expect(onPath(receiver, path)).toHaveLength(2);
    // Another key: another delivery.
    const other = json(await redeliver('replay-2'));
    expect(other.id).not.toBe(manual.id);
    await receiver.waitFor(() => onPath(receiver, path).length >= 3, 'the second manual delivery');

    expect((await redeliver()).status).toBe(400);
    expect(json(await redeliver('has space')).error.param).toBe('Idempotency-Key');
    const unknown = await w.h.request(
      'POST',
      `/v1/webhook_endpoints/${hook.id}/events/evt_00000000000000000000000000000000/redeliver`,
      { body: {}, headers: { 'idempotency-key': 'x' } },
    );
    expect(unknown.status).toBe(404);
    expect((await delivery(w, hook.id, eventId, 'never-used')).status).toBe(404);
  });

  it('keeps a slow receiver from delaying another, within its per-endpoint limit', async () => {
    const slowPath = `/slow/${dialect}`;
    const fastPath = `/fast/${dialect}`;
    // The slow receiver holds every request until the test lets them go.
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = receiver.answer;
    receiver.answer = (request, index) =>
      request.path === slowPath ? { status: 200, until: released } : previous(request, index);
    try {
      const slow = await endpoint(w, `${receiver.url}${slowPath}`);
      const fast = await endpoint(w, `${receiver.url}${fastPath}`);
      for (let i = 0; i < 16; i++) await sessionCreated(w);
      await receiver.waitFor(() => onPath(receiver, fastPath).length >= 16, 'every fast delivery');
      // The slow receiver holds at most its share of slots (AGENTRY_WEBHOOK_ENDPOINT_CONCURRENCY, default 8).
      await receiver.waitFor(() => onPath(receiver, slowPath).length >= 8, 'the slow batch');
      // Every fast delivery arrived while the slow receiver held its requests: none of those has an outcome yet
      // (a delivery that had waited them out, past the 10 s delivery timeout, would have recorded an attempt).
      const slowAttempts = await w.h.deps.storage.db
        .selectFrom('webhook_deliveries')
        .select('attempts')
        .where('endpoint_id', '=', slow.id)
        .execute();
      expect(slowAttempts.length).toBeGreaterThanOrEqual(8);
      expect(slowAttempts.filter((row) => Number(row.attempts) > 0)).toEqual([]);
      await sleep(300);
      expect(onPath(receiver, slowPath)).toHaveLength(8);
      release();
      await receiver.waitFor(() => onPath(receiver, slowPath).length >= 16, 'the rest of the slow deliveries');
      await w.h.request('DELETE', `/v1/webhook_endpoints/${slow.id}`);
      await w.h.request('DELETE', `/v1/webhook_endpoints/${fast.id}`);
    } finally {
      release();
      receiver.answer = previous;
    }
  });
});

describe.each(dialects())('webhook windows and retention (%s)', (dialect) => {
  let w: World;
  let receiver: Receiver;
  beforeAll(async () => {
    [w, receiver] = await Promise.all([
      world(dialect, { AGENTRY_WEBHOOK_RETRY_WINDOW_MS: '1500', AGENTRY_WEBHOOK_HISTORY_RETENTION_MS: '2500' }),
      startReceiver(),
    ]);
  });
  afterAll(async () => {
    await Promise.all([w?.close(), receiver?.close()]);
  });

  it('fails a delivery when the retry window ends, then stops; details expire after the retention', async () => {
    receiver.answer = () => 500;
    const hook = await endpoint(w, `${receiver.url}/down`);
    const sessionId = await sessionCreated(w);
    await receiver.waitFor(() => receiver.received.length >= 1, 'a first attempt');
    const eventId = verified(hook.signing_secret, receiver.received[0]!).id;
    const failed = await deliveryWithStatus(w, hook.id, eventId, 'failed', { what: 'the delivery to fail' });
    const ended = Date.now();
    expect(failed).toMatchObject({ attempts: receiver.received.length, status_code: 500, next_attempt_at: null });
    expect(failed.error.code).toBe('unexpected_status');
    // Retried, then failed when the 1.5 s window ended (not the default two hours; seconds of room for a busy machine).
    expect(failed.attempts).toBeGreaterThanOrEqual(2);
    expect(failed.completed_at - failed.created_at).toBeLessThan(30);
    for (const request of receiver.received) expect(verified(hook.signing_secret, request).data.id).toBe(sessionId);
    const count = receiver.received.length;
    await sleep(800);
    expect(receiver.received).toHaveLength(count);

    // Past the retention the details are gone (404); the event stays listed and can be redelivered.
    await sleep(Math.max(0, 2500 - (Date.now() - ended)) + 1100);
    const expired = await delivery(w, hook.id, eventId);
    expect(expired.status).toBe(404);
    expect(json(expired).error.message).toContain('retention');
    const events = json(await w.h.request('GET', `/v1/webhook_endpoints/${hook.id}/events`));
    expect(events.data.map((e: { id: string }) => e.id)).toEqual([eventId]);
    receiver.answer = () => 204;
    const manual = await w.h.request('POST', `/v1/webhook_endpoints/${hook.id}/events/${eventId}/redeliver`, {
      body: {},
      headers: { 'idempotency-key': 'after-retention' },
    });
    expect(manual.status).toBe(202);
    await receiver.waitFor(() => receiver.received.length > count, 'the redelivery');
    const last = receiver.received.at(-1)!;
    expect(last.headers['webhook-id']).toBe(receiver.received[0]!.headers['webhook-id']);
    expect(verified(hook.signing_secret, last).id).toBe(eventId);
    const done = await deliveryWithStatus(w, hook.id, eventId, 'delivered', {
      what: 'the redelivery to be recorded',
      replayKey: 'after-retention',
    });
    expect(done.status_code).toBe(204);
  });
});

describe.each(dialects())('webhook delivery across a crash (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  const env = {
    ...environment.env,
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    AGENTRY_WEBHOOK_RETRY_BASE_MS: '300',
    AGENTRY_WEBHOOK_RETRY_WINDOW_MS: '120000',
    AGENTRY_LEASE_MS: '1500',
    AGENTRY_POLL_MS: '200',
    LOG_LEVEL: 'warn',
  };
  let server: ServerProcess | null = null;
  let receiver: Receiver;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await receiver?.close();
    await environment.cleanup();
  });

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    if (server === null) throw new Error('no server');
    return httpClient(server.url, key)(method, path, body);
  }

  it(
    'keeps a pending delivery through kill -9 and delivers it after the restart with the same webhook-id',
    async () => {
      receiver = await startReceiver();
      let healthy = false;
      // Retry-After keeps the next attempt seconds away, so the kill finds the delivery pending between attempts.
      receiver.answer = () => (healthy ? 200 : { status: 500, headers: { 'retry-after': '4' } });
      server = await startServerProcess(env);
      const hook = (
        await call('POST', '/v1/webhook_endpoints', {
          name: 'crash',
          url: `${receiver.url}/crash`,
          event_types: ['agent.session.created'],
        })
      ).body;
      const agentId = (await call('GET', '/v1/agents')).body.data[0].id;
      const sessionId = (await call('POST', '/v1/sessions', { agentId })).body.session.id;
      await receiver.waitFor((all) => all.length >= 1, 'a failed attempt');
      const webhookId = receiver.received[0]!.headers['webhook-id'];
      const eventId = verified(hook.signing_secret, receiver.received[0]!).id;
      await waitUntil(
        async () => {
          const response = await call('GET', `/v1/webhook_endpoints/${hook.id}/events/${eventId}/delivery`);
          return response.body?.attempts === 1 && response.body.status === 'pending' ? true : null;
        },
        { what: 'the failed attempt to be recorded' },
      );
      await server.stop('SIGKILL');
      const beforeRestart = receiver.received.length;

      healthy = true;
      server = await startServerProcess(env);
      const isDelivered = (r: Received) => r.at > 0 && receiver.received.indexOf(r) >= beforeRestart;
      await receiver.waitFor((all) => all.some(isDelivered), 'the delivery after the restart');
      const arrived = receiver.received.filter(isDelivered);
      for (const request of receiver.received) {
        expect(request.headers['webhook-id']).toBe(webhookId);
        expect(verified(hook.signing_secret, request).data.id).toBe(sessionId);
      }
      expect(verified(hook.signing_secret, arrived[0]!).id).toBe(eventId);
      const status = await waitUntil(
        async () => {
          const response = await call('GET', `/v1/webhook_endpoints/${hook.id}/events/${eventId}/delivery`);
          return response.body?.status === 'delivered' ? response.body : null;
        },
        { what: 'the delivery to be recorded after the restart' },
      );
      expect(status).toMatchObject({ attempts: beforeRestart + 1, status_code: 200, error: null });
      expect(status.webhook_id).toBe(webhookId);
      await sleep(500);
      expect(receiver.received.length).toBe(beforeRestart + 1);
      // A graceful stop leaves nothing behind.
      expect(await server.stop('SIGTERM')).toBe(0);
      server = null;
    },
    startsTimeout(2),
  );
});
