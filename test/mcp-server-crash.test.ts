/**
 * kill -9 of the server during a long MCP tool call: after a restart the turn completes once, and the client reads
 * its result through the session and message ids the call's first progress notification gave it.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { crashTestEnv } from './helpers/crash-server.ts';
import { httpClient, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { dialects } from './helpers/harness.ts';
import { type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('an MCP call across kill -9 (%s)', (dialect) => {
  let server: ServerProcess | null = null;
  const { key, env } = crashTestEnv(dialect, () => server);

  it(
    'completes the turn once after the restart, readable by the ids of the first progress notification',
    async () => {
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      expect((await api('POST', '/v1/agents', { name: 'durable' })).status).toBe(201);
      const client = new Client({ name: 'crash-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
      const withKey: typeof fetch = (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set('authorization', `Bearer ${key}`);
        return fetch(input, { ...init, headers });
      };
      await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/v1/mcp`), { fetch: withKey }));
      let where: { sessionId: string; messageId: string } | null = null;
      const call = client
        .callTool(
          { name: 'message_agent', arguments: { agent: 'durable', message: 'sleep 2500\nfinished once' } },
          {
            onprogress: (progress) => {
              const match = /^session_id (\S+) message_id (\S+)$/.exec(progress.message ?? '');
              if (match !== null && where === null) where = { sessionId: match[1] ?? '', messageId: match[2] ?? '' };
            },
          },
        )
        .catch((error: unknown) => error);
      const target = await waitUntil(async () => where, { what: 'the first progress notification', everyMs: 20 });
      const path = `/v1/sessions/${target.sessionId}/messages/${target.messageId}`;
      await waitUntil(async () => ((await api('GET', path)).body?.message.status === 'running' ? true : null), {
        what: 'the turn running',
        everyMs: 50,
      });
      await server.stop('SIGKILL');
      // The SDK's client keeps waiting on a dropped stream until its request timeout (60 s); closing it, as a client
      // that saw the server go would, ends the call.
      await client.close().catch(() => {});
      expect(await call).toBeInstanceOf(Error);

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const final = await waitUntil(
        async () => {
          const message = (await api('GET', `${path}?wait=30`)).body?.message;
          return TERMINAL_STATUSES.includes(message?.status) ? message : null;
        },
        { what: 'the turn ending', everyMs: 50 },
      );
      expect(final).toMatchObject({
        status: 'completed',
        response: { parts: [{ type: 'text', text: 'finished once' }] },
      });
      // Once: one message in the session, one Run (source mcp) for it.
      const listed = await api('GET', `/v1/sessions/${target.sessionId}/messages`);
      expect(listed.body?.data.map((message: { id: string }) => message.id)).toEqual([target.messageId]);
      const run = await api('GET', `/v1/runs/${final.runId}`);
      expect(run.body).toMatchObject({ source: 'mcp', status: 'completed', message_id: target.messageId });
      const runs = await api('GET', '/v1/runs?limit=50');
      expect(
        runs.body?.data.filter((each: { message_id: string }) => each.message_id === target.messageId),
      ).toHaveLength(1);
    },
    startsTimeout(2),
  );
});
