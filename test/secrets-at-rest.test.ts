/**
 * Webhook signing secrets and legacy webhook secrets are stored encrypted. A database an older version wrote (its
 * secrets in clear, an old secret left behind by a rotation) is sealed at the first start of this version, and
 * the raw database files no longer hold any of them; the sealed secrets still sign (checked with the
 * `standardwebhooks` verifier) and still reach the legacy receiver, and rotation keeps working.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../src/domain/auth/scopes.ts';
import { attemptDelivery } from '../src/domain/webhooks/attempt.ts';
import { createSigner } from '../src/domain/webhooks/signing.ts';
import { sha256Hex } from '../src/lib/hash.ts';
import { createSecretBox } from '../src/lib/secret-box.ts';
import {
  createHarness,
  type DialectName,
  dialects,
  type Harness,
  json,
  testEnvironment,
  testKey,
} from './helpers/harness.ts';
import { olderDatabase } from './helpers/migrations.ts';
import { type Received, type Receiver, startReceiver, verified } from './helpers/webhook-receiver.ts';

const whsec = () => `whsec_${randomBytes(32).toString('base64')}`;

/** Every byte of the tables as stored on disk (Postgres: read by the server itself, after a checkpoint). */
async function rawStorage(h: Harness, env: Record<string, string>): Promise<string> {
  if (h.dialect === 'sqlite') {
    const path = join(env.AGENTRY_DATA_DIR ?? '', 'agentry.db');
    return [path, `${path}-wal`]
      .filter((file) => existsSync(file))
      .map((file) => readFileSync(file).toString('latin1'))
      .join('');
  }
  const db = h.deps.storage.db;
  await sql`checkpoint`.execute(db);
  const files = await sql<{ bytes: Buffer }>`
    select pg_read_binary_file(pg_relation_filepath(name)) as bytes
    from unnest(array['webhook_endpoints', 'legacy_webhooks']) as name`.execute(db);
  return files.rows.map((row) => row.bytes.toString('latin1')).join('');
}

/**
 * A write transaction open on the environment's Postgres database for `ms`, in a client of its own; `ended` settles
 * once it committed (SQLite: nothing to wait for).
 */
async function otherTransaction(env: Record<string, string>, ms: number): Promise<{ ended: Promise<void> }> {
  if (env.DATABASE_URL === undefined) return { ended: Promise.resolve() };
  const client = new pg.Client({ connectionString: env.DATABASE_URL });
  await client.connect();
  await client.query('begin');
  await client.query('select txid_current()');
  const ended = new Promise<void>((resolve) => setTimeout(resolve, ms)).then(async () => {
    await client.query('commit');
    await client.end();
  });
  return { ended };
}

describe.each(dialects())('secrets at rest (%s)', (dialect: DialectName) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  const rotatedAway = whsec();
  const endpointSecret = whsec();
  const legacySecret = `legacy-${randomBytes(12).toString('hex')}`;
  const legacyId = randomUUID();
  let h: Harness;
  let receiver: Receiver;

  async function sentTo(path: string): Promise<Received> {
    const all = await receiver.waitFor((received) => received.some((entry) => entry.path === path));
    const request = all.find((entry) => entry.path === path);
    if (request === undefined) throw new Error(`nothing sent to ${path}`);
    return request;
  }

  beforeAll(async () => {
    receiver = await startReceiver();
    // A database as the version before sealed secrets left it: every migration before 0017 applied.
    const old = await olderDatabase(environment.env, '0017');
    const now = Date.now();
    await sql`insert into orgs (id, name, project_id, credit_balance_micros, created_at)
      values ('o1', 'default', 1, null, ${now})`.execute(old);
    await sql`insert into api_keys (id, org_id, prefix, key_hash, scopes, name, created_at, expires_at, revoked_at)
      values ('k1', 'o1', ${key.slice(0, 12)}, ${sha256Hex(key)}, ${SCOPES.join(' ')}, null, ${now}, null, null)`.execute(
      old,
    );
    await sql`insert into webhook_endpoints (id, org_id, name, url, event_types, secret, created_at, updated_at, deleted_at)
      values ('we_old', 'o1', 'old', ${`${receiver.url}/old`}, '["agent.session.created"]', ${rotatedAway}, ${now}, ${now}, null)`.execute(
      old,
    );
    // A rotation by the older version: the first secret's bytes stay in the page's free space.
    await sql`update webhook_endpoints set secret = ${endpointSecret} where id = 'we_old'`.execute(old);
    await sql`insert into legacy_webhooks (id, org_id, url, events, description, secret, is_active, created_at, last_triggered_at, failure_count)
      values (${legacyId}, 'o1', ${`${receiver.url}/tasks`}, '["task.created"]', null, ${legacySecret}, 1, ${now}, null, 0)`.execute(
      old,
    );
    await old.destroy();
    // On Postgres, a transaction of someone else on the same database (another deployment, another migration)
    // that began before the migrations and ends 4 s later: the purge waits for it, since VACUUM FULL
    // keeps the row versions it could still see.
    const other = await otherTransaction(environment.env, 4000);
    // The first start of this version, on that database.
    h = await createHarness(dialect, {
      ...environment.env,
      AGENTRY_BOOTSTRAP_KEY: key,
      AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
    });
    await other.ended;
  });
  afterAll(async () => {
    await h?.close();
    await receiver?.close();
    await environment.cleanup();
  });

  it('seals the clear secrets an older version stored, leaving none of them in the database files', async () => {
    const raw = await rawStorage(h, environment.env);
    expect(raw).toContain('we_old');
    for (const secret of [rotatedAway, endpointSecret, legacySecret]) {
      expect(raw).not.toContain(secret);
      expect(raw).not.toContain(secret.replace(/^whsec_/, ''));
    }
    const endpoint = json(await h.request('GET', '/v1/webhook_endpoints/we_old'));
    expect(endpoint.signing_secret_hint).toBe(`whsec_…${endpointSecret.slice(-4)}`);
    expect(endpoint).not.toHaveProperty('signing_secret');
    expect(json(await h.request('GET', `/v1/webhooks/${legacyId}`)).hasSecret).toBe(true);
  });

  it('signs with a sealed secret of an older version, and the legacy secret still reaches its receiver', async () => {
    const tested = await h.request('POST', '/v1/webhook_endpoints/we_old/test', {
      body: { event_type: 'agent.session.created' },
    });
    expect(tested.status).toBe(200);
    const request = await sentTo('/old');
    expect(verified(endpointSecret, request).type).toBe('agent.session.created');
    expect(() => verified(rotatedAway, request)).toThrow();

    const [subscriber] = await h.deps.legacyWebhooks.subscribers('o1', 'task.created');
    expect(subscriber?.secret()).toBe(legacySecret);
  });

  it('stores new and rotated secrets sealed, returns them only on create and rotate, and signs with the new one', async () => {
    const created = json(
      await h.request('POST', '/v1/webhook_endpoints', {
        body: { name: 'new', url: `${receiver.url}/new`, event_types: ['agent.session.created'] },
      }),
    );
    const first: string = created.signing_secret;
    expect(first).toMatch(/^whsec_/);
    const rotated = json(await h.request('POST', `/v1/webhook_endpoints/${created.id}/rotate_secret`, { body: {} }));
    const second: string = rotated.signing_secret;
    expect(second).not.toBe(first);
    expect(rotated.signing_secret_hint).toBe(`whsec_…${second.slice(-4)}`);
    const legacy = `legacy-${randomBytes(12).toString('hex')}`;
    const hook = await h.request('POST', '/v1/webhooks', {
      body: { url: `${receiver.url}/tasks-new`, events: ['task.created'], secret: legacy },
    });
    expect(hook.status).toBe(201);
    expect(hook.text).not.toContain(legacy);

    const raw = await rawStorage(h, environment.env);
    expect(raw).toContain(created.id);
    expect(raw).not.toContain(second.replace(/^whsec_/, ''));
    expect(raw).not.toContain(legacy);
    for (const path of ['/v1/webhook_endpoints', `/v1/webhook_endpoints/${created.id}`, '/v1/webhooks']) {
      const text = (await h.request('GET', path)).text;
      for (const secret of [first, second, legacy]) expect(text).not.toContain(secret);
    }

    await h.request('POST', `/v1/webhook_endpoints/${created.id}/test`, {
      body: { event_type: 'agent.session.created' },
    });
    const request = await sentTo('/new');
    expect(verified(second, request).type).toBe('agent.session.created');
  });
});

describe('a signing secret sealed with another key', () => {
  it('is not sent, and the attempt fails with secret_unavailable instead of crashing the dispatcher', async () => {
    const key = (byte: number) => Buffer.alloc(32, byte);
    const sealed = createSecretBox({ configuredKey: key(1), keyFile: '/nonexistent/secret.key' }).seal(whsec());
    const signer = createSigner(createSecretBox({ configuredKey: key(2), keyFile: '/nonexistent/secret.key' }));
    const receiver = await startReceiver();
    try {
      const outcome = await attemptDelivery(
        { url: `${receiver.url}/x`, sealedSecret: sealed, webhookId: 'msg_1', body: '{}' },
        { signer, now: Date.now(), timeoutMs: 5000, allowInsecure: true },
      );
      expect(outcome).toMatchObject({ ok: false, statusCode: null, retriable: true });
      expect(outcome.error?.code).toBe('secret_unavailable');
      expect(outcome.error?.message).toContain('AGENTRY_SECRET_KEY');
      expect(receiver.received).toHaveLength(0);
    } finally {
      await receiver.close();
    }
  });
});
