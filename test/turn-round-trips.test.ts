/**
 * The round trips of a turn on SQLite, counted at the driver: a one-step turn is two transactions (accept, which
 * takes the session's lease; then start + step + completion + release) and at most 30 statements, and a turn whose model is slow is still seen
 * `running` in storage soon after it starts. Counted by wrapping node:sqlite's statement methods in this test's
 * process only. On Postgres every statement is a round trip (node-postgres sends one and waits for its answer):
 * the same turn is counted by wrapping pg's `Client.prototype.query`.
 */
import { StatementSync } from 'node:sqlite';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MESSAGE_COLUMNS } from '../src/storage/columns.ts';
import { flows, waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

/** The start of a read of whole messages (storage/columns.ts): the client's reads of its message are one. */
const SELECT_MESSAGE = `select ${MESSAGE_COLUMNS.map((column) => `"${column}"`).join(', ')} from "messages"`;

const executed: string[] = [];
let counting = false;
for (const method of ['all', 'run', 'iterate'] as const) {
  const original = StatementSync.prototype[method] as (this: StatementSync, ...args: unknown[]) => unknown;
  Object.defineProperty(StatementSync.prototype, method, {
    configurable: true,
    writable: true,
    value(this: StatementSync, ...args: unknown[]) {
      if (counting) executed.push(this.sourceSQL.trim().toLowerCase());
      return original.apply(this, args);
    },
  });
}

let h: Harness;
const flow = flows(() => h);
beforeAll(async () => {
  // Wake-ups run these turns; a poll (a scan for claimable sessions, the approval deadline sweep) landing inside a
  // counted window would add its statements, so it is put out of reach.
  h = await createHarness('sqlite', { AGENTRY_POLL_MS: '600000' });
});
afterAll(async () => {
  await h?.close();
});

async function counted<T>(work: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  executed.length = 0;
  counting = true;
  try {
    const result = await work();
    return { result, statements: [...executed] };
  } finally {
    counting = false;
  }
}

it('runs a one-step turn in two transactions, the session released in the second', async () => {
  const agentId = await flow.createAgent({});
  const sessionId = await flow.createSession(agentId);
  // Warm: the first turn of a session also reads what later ones have cached, and the agent's first turn writes
  // its row (the workspace provisioned), which moves the change version and so empties the agent cache once.
  for (const text of ['hello', 'hello there']) {
    const warm = await flow.submit(sessionId, text);
    await flow.waitForMessage(sessionId, warm.id);
  }

  const { result: accepted, statements } = await counted(async () => {
    const message = await flow.submit(sessionId, 'hello again');
    await flow.waitForMessage(sessionId, message.id);
    await waitUntil(async () => (h.engine.active() === 0 ? true : null), { what: 'the worker to let go' });
    return message;
  });
  const transactions = statements.filter((text) => text.startsWith('begin'));
  expect(transactions, statements.join('\n')).toHaveLength(2);
  // The accept took the session's lease (domain/turns/local-claims.ts): the engine ran the turn without a claim.
  expect(statements.filter((text) => text.startsWith('update "sessions" set "lease_owner" = ?'))).toEqual([]);
  // The turn's own statements (the client's polling reads aside): accept (with the lease), context, step, release.
  // The engine's idle sweeps (a poll's scan for work, expired approvals) and the process registry's heartbeat may
  // land in between too.
  const turn = statements.filter(
    (text) =>
      !text.startsWith(`${SELECT_MESSAGE} where "id" = ? and "session_id"`) &&
      !text.startsWith('select "id" from "sessions" where "work_pending" = ? and') &&
      !text.startsWith('update "engine_processes" set "heartbeat_at" = ?') &&
      !text.startsWith('select "id", "org_id", "session_id", "message_id" from "tool_approvals" where "status" = ?'),
  );
  // 30 with BEGIN and COMMIT: the accept's 10 (idempotency key, session and its lease, message, run, item, event; the last
  // message's seq read with whether one waits for input and whether items wait for it: accept.ts sessionMessages;
  // the agent from the cache: agent-cache.ts getIn; whether the session is hidden from its update), the turn's
  // reads (3), the step's 18 (the item and event seqs numbered by their inserts: prepared.ts
  // prepareNumberedInsert; no read of the message after the step that ends the turn: transition-rows.ts statusWritten;
  // the release is one statement: leases.ts releaseWhenIdle). More means a statement crept back onto the hot path.
  process.stdout.write(`[round trips] one-step turn on SQLite: ${turn.length} statements\n`);
  expect(turn.length, turn.join('\n')).toBeLessThanOrEqual(30);
  // No separate release: the lease is given up by the step's transaction.
  expect(statements.filter((text) => text.includes('set "work_pending" = ?, "lease_owner" = ?'))).toHaveLength(1);
  const message = await flow.getMessage(sessionId, accepted.id);
  expect(message.status).toBe('completed');
  expect(message.startedAt).not.toBeNull();
});

it('writes the start of a slow turn on its own, so it is seen running before it ends', async () => {
  const agentId = await flow.createAgent({});
  const sessionId = await flow.createSession(agentId);
  const accepted = await flow.submit(sessionId, 'sleep 1500\nslow answer');
  const running = await flow.waitForMessage(sessionId, accepted.id, ['running']);
  expect(running.startedAt).not.toBeNull();
  const done = await flow.waitForMessage(sessionId, accepted.id);
  expect(done.status).toBe('completed');
  expect(Date.parse(done.startedAt)).toBe(Date.parse(running.startedAt));
});

it('records the start of a turn that fails at its first model call, in the same write as the failure', async () => {
  const agentId = await flow.createAgent({});
  const sessionId = await flow.createSession(agentId);
  const accepted = await flow.submit(sessionId, 'fail at once');
  const failed = await flow.waitForMessage(sessionId, accepted.id);
  expect(failed.status).toBe('failed');
  expect(failed.startedAt).not.toBeNull();
  const events = await h.deps.sessionEvents.after(sessionId, 0, 100);
  const statuses = events.events
    .filter((event) => event.kind === 'message.status' && event.message_id === accepted.id)
    .map((event) => (event.data as { status: string }).status);
  expect(statuses).toEqual(['running', 'failed']);
});

/** Statements sent by node-postgres while `pgCounting`, lower-cased. */
const sent: string[] = [];
let pgCounting = false;
const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
Object.defineProperty(pg.Client.prototype, 'query', {
  configurable: true,
  writable: true,
  value(this: pg.Client, ...args: unknown[]) {
    const [first] = args;
    const text = typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text;
    if (pgCounting && typeof text === 'string') sent.push(text.trim().toLowerCase());
    return query.apply(this, args);
  },
});

/**
 * What other work of the process sends meanwhile: the client's reads, its key lookup, the engine's idle sweeps, the
 * process registry's heartbeat.
 */
const NOT_THE_TURN = [
  'update "engine_processes" set "heartbeat_at" = $1',
  `${SELECT_MESSAGE} where "id" = $1 and "session_id" = $2 and "org_id" = $3`,
  'select "id", "org_id", "scopes", "expires_at", "revoked_at", "compat" from "api_keys"',
  'select "id", "prefix", "org_id", "scopes", "expires_at", "revoked_at", "compat" from "api_keys"',
  'select "id" from "sessions" where "work_pending" =',
  'select "id", "org_id", "session_id", "message_id" from "tool_approvals" where "status" = $1',
];

const CLAIM = 'update "sessions" set "lease_owner" = $1, "lease_expires_at" = $2, "lease_token" = "lease_token" +';

describe.skipIf(!dialects().includes('postgres'))('round trips on Postgres', () => {
  let pgh: Harness;
  const pgFlow = flows(() => pgh);
  beforeAll(async () => {
    pgh = await createHarness('postgres');
  });
  afterAll(async () => {
    await pgh?.close();
  });

  it('runs a one-step turn in two transactions and at most 15 round trips', async () => {
    const agentId = await pgFlow.createAgent({});
    const sessionId = await pgFlow.createSession(agentId);
    for (const text of ['hello', 'hello there']) {
      const warm = await pgFlow.submit(sessionId, text);
      await pgFlow.waitForMessage(sessionId, warm.id);
    }
    // Every connection of the pools a turn takes from parses each statement by name the first time it sends it,
    // alone (storage/postgres-begin.ts); the turns of a dozen sessions at once warm them all.
    const others = await Promise.all(Array.from({ length: 12 }, () => pgFlow.createSession(agentId)));
    for (const text of ['warm', 'warm again']) {
      await Promise.all(
        others.map(async (other) => pgFlow.waitForMessage(other, (await pgFlow.submit(other, text)).id)),
      );
    }
    sent.length = 0;
    pgCounting = true;
    try {
      const message = await pgFlow.submit(sessionId, 'hello again');
      await pgFlow.waitForMessage(sessionId, message.id);
      await waitUntil(async () => (pgh.engine.active() === 0 ? true : null), { what: 'the worker to let go' });
    } finally {
      pgCounting = false;
    }
    // The accept took the session's lease (domain/turns/local-claims.ts): the engine ran the turn without a claim.
    expect(sent.filter((text) => text.startsWith(CLAIM))).toEqual([]);
    const turn = sent.filter((text) => !NOT_THE_TURN.some((other) => text.startsWith(other)));
    expect(
      turn.filter((text) => text === 'begin' || text.startsWith('begin;')),
      turn.join('\n'),
    ).toHaveLength(2);
    // 15 round trips, BEGIN and COMMIT included: each transaction's BEGIN goes with its first statement, and the
    // writes whose answer nobody reads (the message and run the accept inserts, its idempotency answer, the step's
    // spans, events whose seq the transaction knows) with the statement or COMMIT after them
    // (storage/postgres-begin.ts); the accept's (its session update takes the lease), the turn's reads, the step's. A message, its run and
    // its session's status (read and moved) change in one statement, with the usage of the step that ends the turn
    // (transition-rows.ts updateTurnRows); the lease's proof reads the message (leases.ts fencedWithMessage); the
    // release checks in its own statement that nothing in the session can run (leases.ts releaseWhenIdle). The
    // agent's version at a turn's start is read once per change of the agents (agent-cache.ts atTurnStart).
    process.stdout.write(`[round trips] one-step turn on Postgres: ${turn.length} statements\n`);
    expect(turn.length, turn.join('\n')).toBeLessThanOrEqual(15);
  });
});
