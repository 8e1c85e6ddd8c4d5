/**
 * Webhook events are recorded only for organizations whose endpoints subscribe to them
 * (domain/webhooks/subscriptions.ts): an organization without endpoints writes no `webhook_events` rows; an
 * endpoint created through this process gets every event of the next turn, delivered to a real local receiver, and
 * only its types; changing or deleting it stops the rows; an endpoint created through another process (its own
 * storage, connections and change listener) is seen within two seconds. Also the cache's own rules, with a version
 * the test moves by hand. Once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeps, buildDispatcher, type Deps } from '../src/deps.ts';
import { createWebhookSubscriptions } from '../src/domain/webhooks/subscriptions.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type Receiver, startReceiver, verified } from './helpers/webhook-receiver.ts';

describe.each(dialects())('webhook events only for subscribed organizations (%s)', (dialect) => {
  let h: Harness;
  let other: Deps;
  let dispatcher: WebhookDispatcher;
  let receiver: Receiver;
  const flow = flows(() => h, { agentName: 'subscribed' });

  beforeAll(async () => {
    [h, receiver] = await Promise.all([
      createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_WEBHOOK_RETRY_BASE_MS: '50' }),
      startReceiver(),
    ]);
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
    // Another process on the same database: its own pool (or SQLite connection) and its own change listener.
    other = await buildDeps(h.deps.config, h.deps.logger, h.deps.clock, { detectSandbox: false });
  });
  afterAll(async () => {
    await dispatcher?.stop(1000);
    await other?.close();
    await other?.storage.close();
    await Promise.all([h?.close(), receiver?.close()]);
  });

  /** The organization's recorded webhook events, oldest first. */
  const recorded = async (orgId: string) =>
    (
      await h.deps.storage.db
        .selectFrom('webhook_events')
        .select(['id', 'type', 'data'])
        .where('org_id', '=', orgId)
        .orderBy('created_at')
        .orderBy('id')
        .execute()
    ).map((row) => ({ id: row.id, type: row.type, data: JSON.parse(row.data) }));

  /** A completed turn in a session of the organization; returns the session and turn ids. */
  async function completedTurn(org: { key: string }, agentId: string, sessionId?: string) {
    const session = sessionId ?? (await flow.createSession(agentId, org.key));
    const accepted = await flow.submit(session, 'hello', { key: org.key });
    const message = await flow.waitForMessage(session, accepted.id, ['completed', 'failed', 'cancelled'], org.key);
    expect(message.status).toBe('completed');
    return { sessionId: session, turnId: accepted.id as string };
  }

  it('records nothing for an organization without endpoints, then exactly the subscribed types of the next turn', async () => {
    const org = await h.createOrg(`none-then-some-${dialect}`);
    const agentId = await flow.createAgent({}, org.key);
    // No endpoint: a session and a completed turn (created, in_progress, turn.completed, idle) write no row.
    const first = await completedTurn(org, agentId);
    expect(await recorded(org.orgId)).toEqual([]);

    // An endpoint for two types: the next turn of the same session records those two and nothing else.
    const created = await h.request('POST', '/v1/webhook_endpoints', {
      key: org.key,
      body: {
        name: 'turns',
        url: `${receiver.url}/subscribed/${dialect}`,
        event_types: ['agent.session.turn.completed', 'agent.session.idle'],
      },
    });
    expect(created.status, created.text).toBe(200);
    const endpoint = json(created);
    const second = await completedTurn(org, agentId, first.sessionId);
    const rows = await recorded(org.orgId);
    expect(rows.map((row) => row.type).sort()).toEqual(['agent.session.idle', 'agent.session.turn.completed']);
    expect(rows.find((row) => row.type === 'agent.session.turn.completed')?.data).toEqual({
      id: second.turnId,
      session_id: first.sessionId,
    });

    // Both are delivered, signed with the endpoint's secret.
    const mine = () => receiver.received.filter((request) => request.path === `/subscribed/${dialect}`);
    await receiver.waitFor(() => mine().length >= 2, 'the two deliveries');
    const delivered = mine().map((request) => verified(endpoint.signing_secret, request));
    expect(delivered.map((event) => event.id).sort()).toEqual(rows.map((row) => row.id).sort());
    expect(delivered.find((event) => event.type === 'agent.session.idle')?.data).toEqual({ id: first.sessionId });

    // Fewer types: only idle from now on.
    const narrowed = await h.request('POST', `/v1/webhook_endpoints/${endpoint.id}`, {
      key: org.key,
      body: { event_types: ['agent.session.idle'] },
    });
    expect(narrowed.status, narrowed.text).toBe(200);
    await completedTurn(org, agentId, first.sessionId);
    expect((await recorded(org.orgId)).slice(rows.length).map((row) => row.type)).toEqual(['agent.session.idle']);

    // Deleted: nothing any more, not even agent.session.created of a new session.
    const before = (await recorded(org.orgId)).length;
    expect((await h.request('DELETE', `/v1/webhook_endpoints/${endpoint.id}`, { key: org.key })).status).toBe(200);
    await completedTurn(org, agentId);
    expect(await recorded(org.orgId)).toHaveLength(before);
  });

  it("keeps organizations apart: one organization's endpoint records nothing for another", async () => {
    const [subscribed, bystander] = [
      await h.createOrg(`subscribed-${dialect}`),
      await h.createOrg(`bystander-${dialect}`),
    ];
    const hook = await h.request('POST', '/v1/webhook_endpoints', {
      key: subscribed.key,
      body: { name: 'all', url: `${receiver.url}/apart/${dialect}`, event_types: ['agent.session.created'] },
    });
    expect(hook.status, hook.text).toBe(200);
    await flow.createSession(await flow.createAgent({}, bystander.key), bystander.key);
    await flow.createSession(await flow.createAgent({}, subscribed.key), subscribed.key);
    expect(await recorded(bystander.orgId)).toEqual([]);
    expect((await recorded(subscribed.orgId)).map((row) => row.type)).toEqual(['agent.session.created']);
  });

  it('sees an endpoint created or deleted by another process, through its change notification', async () => {
    const org = await h.createOrg(`other-process-${dialect}`);
    const agent = await h.deps.agents.create(org.orgId, { name: 'remote' });
    const agentId = agent.body.agent.id;
    // This process caches for real (on Postgres once its listener is connected) and knows the organization has no
    // endpoint: the answer a missed notification would leave stale.
    await waitUntil(async () => (h.deps.storage.changeVersion() === null ? null : true), {
      what: 'the change version to be known',
      everyMs: 20,
    });
    await h.deps.sessions.create(org.orgId, { agentId });
    await h.deps.sessions.create(org.orgId, { agentId });
    expect(await recorded(org.orgId)).toEqual([]);

    const endpoint = await other.webhooks.endpoints.create(org.orgId, {
      name: 'remote',
      url: `${receiver.url}/remote/${dialect}`,
      event_types: ['agent.session.created', 'agent.session.turn.completed'],
    });
    const started = Date.now();
    // Sessions created here from now on record their agent.session.created once the change has reached this process.
    const seen = await waitUntil(
      async () => {
        const session = await h.deps.sessions.create(org.orgId, { agentId });
        const rows = await recorded(org.orgId);
        return rows.some((row) => row.data.id === session.id) ? session.id : null;
      },
      { what: 'a session event recorded after the remote endpoint was created', everyMs: 10 },
    );
    // Normally milliseconds; printed, not checked (the endpoint cache has no expiry: a missed notification would
    // leave it stale for good, which the wait's deadline catches).
    process.stdout.write(`[webhooks] ${dialect}: a remote endpoint seen after ${Date.now() - started} ms\n`);
    // And every state change after that: the next turn's completion, but not its unsubscribed types.
    const before = (await recorded(org.orgId)).length;
    const turn = await completedTurn(org, agentId, seen);
    expect((await recorded(org.orgId)).slice(before)).toEqual([
      expect.objectContaining({ type: 'agent.session.turn.completed', data: { id: turn.turnId, session_id: seen } }),
    ]);

    await other.webhooks.endpoints.delete(org.orgId, endpoint.id);
    await waitUntil(
      async () => {
        const count = (await recorded(org.orgId)).length;
        await h.deps.sessions.create(org.orgId, { agentId });
        return (await recorded(org.orgId)).length === count ? true : null;
      },
      { what: 'a session recorded nothing after the remote endpoint was deleted', everyMs: 10 },
    );
  });

  describe('the cache', () => {
    /** An endpoint row written behind the cache's back (not through the endpoint service). */
    async function insertEndpoint(orgId: string, id: string, types: string[]) {
      const now = Date.now();
      await h.deps.storage.db
        .insertInto('webhook_endpoints')
        .values({
          id,
          org_id: orgId,
          name: id,
          url: 'https://93.184.215.14/hooks',
          event_types: JSON.stringify(types),
          sealed_secret: h.deps.secrets.seal('whsec_dGVzdA=='),
          secret_hint: 'whsec_…dA==',
          created_at: now,
          updated_at: now,
          deleted_at: null,
        })
        .execute();
    }

    it('answers from memory while neither the version nor a local change moves, and reads through without a version', async () => {
      const org = await h.createOrg(`cache-${dialect}`);
      const db = h.deps.storage.db;
      let version: number | null = 1;
      const subscriptions = createWebhookSubscriptions({ changeVersion: () => version });
      const types = async () => [...(await subscriptions.subscribedTypes(db, org.orgId))].sort();

      expect(await types()).toEqual([]);
      await insertEndpoint(org.orgId, `we_cache_a_${dialect}`, ['agent.session.idle']);
      // Nothing told it: the remembered answer stands.
      expect(await types()).toEqual([]);
      // The endpoint service's signal after its commit.
      subscriptions.changed();
      expect(await types()).toEqual(['agent.session.idle']);

      await insertEndpoint(org.orgId, `we_cache_b_${dialect}`, ['agent.session.created', 'agent.session.idle']);
      expect(await types()).toEqual(['agent.session.idle']);
      // Another process's write (data_version, or a notification).
      version = 2;
      expect(await types()).toEqual(['agent.session.created', 'agent.session.idle']);

      // Unknown version (the listener is down): every call reads.
      version = null;
      await db
        .updateTable('webhook_endpoints')
        .set({ deleted_at: Date.now() })
        .where('org_id', '=', org.orgId)
        .execute();
      expect(await types()).toEqual([]);
      await insertEndpoint(org.orgId, `we_cache_c_${dialect}`, ['agent.session.failed']);
      expect(await types()).toEqual(['agent.session.failed']);
    });

    it('does not keep an answer read while the version moved', async () => {
      const org = await h.createOrg(`cache-race-${dialect}`);
      const db = h.deps.storage.db;
      // The version moves between the start and the end of the first read, as when a change commits meanwhile.
      const versions = [1, 2];
      let calls = 0;
      const subscriptions = createWebhookSubscriptions({
        changeVersion: () => versions[Math.min(calls++, versions.length - 1)] ?? null,
      });
      expect([...(await subscriptions.subscribedTypes(db, org.orgId))]).toEqual([]);
      await insertEndpoint(org.orgId, `we_race_${dialect}`, ['agent.session.idle']);
      // Still version 2, but nothing was kept under it: this reads, and sees the endpoint.
      expect([...(await subscriptions.subscribedTypes(db, org.orgId))]).toEqual(['agent.session.idle']);
    });
  });
});
