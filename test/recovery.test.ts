/**
 * Durability with real processes: kill -9 a server with turns in flight, restart it, and check that every
 * accepted message reaches a terminal state exactly once; and two servers sharing one Postgres database run
 * every turn once.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpClient, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

/** Waits until every message is terminal and checks that it completed with the expected text. */
async function expectCompleted(
  api: ReturnType<typeof httpClient>,
  accepted: { sessionId: string; messageId: string; text: string }[],
): Promise<void> {
  for (const message of accepted) {
    const final = await waitUntil(
      async () => {
        const state = (await api('GET', `/v1/sessions/${message.sessionId}/messages/${message.messageId}`)).body
          ?.message;
        return TERMINAL_STATUSES.includes(state?.status) ? state : null;
      },
      { what: `message ${message.messageId}`, everyMs: 50 },
    );
    expect(final.status).toBe('completed');
    expect(final.response.parts[0].text).toBe(message.text);
  }
}

describe.each(dialects())('crash recovery (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  // A local receiver subscribes to turn.completed: the outbox records only events an endpoint subscribes to.
  const env = {
    ...environment.env,
    ...CRASH_TEST_ENV,
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
  };
  let server: ServerProcess | null = null;
  let receiver: Receiver | null = null;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await receiver?.close();
    await environment.cleanup();
  });

  it(
    'brings every accepted message to a terminal state after kill -9, none lost, none run twice',
    async () => {
      [server, receiver] = await Promise.all([startServerProcess(env), startReceiver()]);
      let api = httpClient(server.url, key);
      const hook = await api('POST', '/v1/webhook_endpoints', {
        name: 'turns',
        url: `${receiver.url}/turns`,
        event_types: ['agent.session.turn.completed'],
      });
      expect(hook.status).toBe(200);
      const agent = (await api('POST', '/v1/agents', { name: 'durable' })).body?.agent;
      const sessions: string[] = [];
      for (let i = 0; i < 4; i++)
        sessions.push((await api('POST', '/v1/sessions', { agentId: agent.id })).body?.session.id);
      const accepted: { sessionId: string; messageId: string; text: string }[] = [];
      for (const [index, sessionId] of sessions.entries()) {
        // A finished server-side tool call, then a long step in flight when the process dies, then a queued message.
        const first = `call lookup {"n":${index}}\n---\nsleep 2500\nfinished ${index}`;
        const second = `after ${index}`;
        for (const [n, text] of [first, second].entries()) {
          const response = await api(
            'POST',
            `/v1/sessions/${sessionId}/messages`,
            { parts: [{ type: 'text', text }] },
            { 'Idempotency-Key': `k-${index}-${n}` },
          );
          expect(response.status).toBe(202);
          accepted.push({
            sessionId,
            messageId: response.body?.id,
            text: n === 0 ? `finished ${index}` : `after ${index}`,
          });
        }
      }
      // Wait until every first message is in its sleeping step, then kill the process without warning.
      await waitUntil(
        async () => {
          const states = await Promise.all(
            accepted
              .filter((_, i) => i % 2 === 0)
              .map((m) => api('GET', `/v1/sessions/${m.sessionId}/messages/${m.messageId}`)),
          );
          return states.every((s) => s.body?.message.status === 'running' && s.body.message.usage.outputTokens > 0)
            ? true
            : null;
        },
        { what: 'turns in flight', everyMs: 100 },
      );
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      await expectCompleted(api, accepted);

      // Nothing ran twice: one output per tool call, one run per message, one turn.completed per message.
      await server.stop('SIGTERM');
      const inspect = await import('./helpers/inspect.ts');
      const db = await inspect.openInspector(environment.env);
      try {
        const outputs = await db.count("select count(*) as n from items where type = 'function_call_output'");
        const calls = await db.count("select count(*) as n from items where type = 'function_call'");
        expect(calls).toBe(4);
        expect(outputs).toBe(4);
        expect(await db.count('select count(*) as n from runs')).toBe(accepted.length);
        expect(
          await db.count("select count(*) as n from webhook_events where type = 'agent.session.turn.completed'"),
        ).toBe(accepted.length);
        expect(await db.count("select count(*) as n from messages where status = 'completed'")).toBe(accepted.length);
      } finally {
        await db.close();
      }
    },
    startsTimeout(2),
  );
});

describe.each(dialects())('takeover after a restart, without waiting out the lease (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  // Default poll and process registry; a lease of an hour, so that only the registry (the dead process's row lapses
  // after AGENTRY_PROCESS_TTL_MS, 2.5 s) can explain a takeover within the test, however slow the machine.
  const env = { ...environment.env, LOG_LEVEL: 'warn', AGENTRY_BOOTSTRAP_KEY: key, AGENTRY_LEASE_MS: '3600000' };
  let server: ServerProcess | null = null;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await environment.cleanup();
  });

  it(
    "resumes its predecessor's turns without waiting for their lease, each once",
    async () => {
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const agent = (await api('POST', '/v1/agents', { name: 'takeover' })).body?.agent;
      const accepted: { sessionId: string; messageId: string; text: string }[] = [];
      for (let s = 0; s < 3; s++) {
        const sessionId = (await api('POST', '/v1/sessions', { agentId: agent.id })).body?.session.id;
        const response = await api(
          'POST',
          `/v1/sessions/${sessionId}/messages`,
          {
            parts: [{ type: 'text', text: `sleep 1500\nresumed ${s}` }],
          },
          { 'Idempotency-Key': `t-${s}` },
        );
        expect(response.status, JSON.stringify(response.body)).toBe(202);
        accepted.push({ sessionId, messageId: response.body?.id, text: `resumed ${s}` });
      }
      await waitUntil(
        async () => {
          const states = await Promise.all(
            accepted.map((m) => api('GET', `/v1/sessions/${m.sessionId}/messages/${m.messageId}`)),
          );
          return states.every((s) => s.body?.message.status === 'running') ? true : null;
        },
        { what: 'turns in flight', everyMs: 50 },
      );
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      const startedAt = Date.now();
      api = httpClient(server.url, key);
      // Done within the wait's deadline, far below the hour the lease would take.
      await expectCompleted(api, accepted);
      process.stdout.write(
        `[recovery] ${dialect}: turns resumed and done ${Date.now() - startedAt} ms after the restart\n`,
      );

      await server.stop('SIGTERM');
      const inspect = await import('./helpers/inspect.ts');
      const db = await inspect.openInspector(environment.env);
      try {
        expect(await db.count("select count(*) as n from items where type = 'assistant_message'")).toBe(
          accepted.length,
        );
        expect(await db.count('select count(*) as n from runs')).toBe(accepted.length);
        // A graceful stop removes the process from the registry; the killed one's row is still there (pruned later).
        expect(await db.count('select count(*) as n from engine_processes')).toBe(1);
      } finally {
        await db.close();
      }
    },
    startsTimeout(2),
  );
});

describe.runIf(dialects().includes('postgres'))('two processes on one Postgres database', () => {
  const key = testKey();
  let environment: ReturnType<typeof testEnvironment> | null = null;
  let env: Record<string, string> = {};
  // In a hook, not the describe's body: Vitest runs a skipped describe's body too, where there is no Postgres.
  beforeAll(() => {
    environment = testEnvironment('postgres');
    env = { ...environment.env, ...CRASH_TEST_ENV, AGENTRY_BOOTSTRAP_KEY: key };
  });
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
    await environment?.cleanup();
  });

  it(
    'runs every turn exactly once',
    async () => {
      servers.push(await startServerProcess(env));
      servers.push(await startServerProcess(env));
      const apis = servers.map((server) => httpClient(server.url, key));
      const [a, b] = apis;
      if (a === undefined || b === undefined) throw new Error('two servers expected');
      const agent = (await a('POST', '/v1/agents', { name: 'shared' })).body?.agent;
      const accepted: { sessionId: string; messageId: string; text: string }[] = [];
      for (let s = 0; s < 8; s++) {
        const sessionId = (await (s % 2 === 0 ? a : b)('POST', '/v1/sessions', { agentId: agent.id })).body?.session.id;
        for (let m = 0; m < 5; m++) {
          const api = (s + m) % 2 === 0 ? a : b;
          const text = `sleep 20\nreply ${s}-${m}`;
          const response = await api(
            'POST',
            `/v1/sessions/${sessionId}/messages`,
            { parts: [{ type: 'text', text }] },
            { 'Idempotency-Key': `p-${s}-${m}` },
          );
          expect(response.status).toBe(202);
          accepted.push({ sessionId, messageId: response.body?.id, text: `reply ${s}-${m}` });
        }
      }
      for (const message of accepted) {
        const final = await waitUntil(
          async () => {
            const state = (await b('GET', `/v1/sessions/${message.sessionId}/messages/${message.messageId}`)).body
              ?.message;
            return state?.status === 'completed' ? state : null;
          },
          { what: `message ${message.messageId}`, everyMs: 100 },
        );
        expect(final.response.parts[0].text).toBe(message.text);
      }
      const client2 = new pg.Client({
        connectionString: env.DATABASE_URL,
        options: `-c search_path=${env.AGENTRY_DATABASE_SCHEMA}`,
      });
      await client2.connect();
      try {
        const starts = await client2.query(
          "select message_id, count(*)::int as n from session_events where kind = 'message.status' and data like '%\"running\"%' group by message_id",
        );
        expect(starts.rows).toHaveLength(accepted.length);
        for (const row of starts.rows) expect(row.n).toBe(1);
        const assistant = await client2.query(
          "select message_id, count(*)::int as n from items where type = 'assistant_message' group by message_id",
        );
        expect(assistant.rows).toHaveLength(accepted.length);
        for (const row of assistant.rows) expect(row.n).toBe(1);
      } finally {
        await client2.end();
      }
    },
    startsTimeout(2),
  );
});
