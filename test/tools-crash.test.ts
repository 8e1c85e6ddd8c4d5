/**
 * Crash safety of MCP calls with real processes: Agentry is killed with SIGKILL while a call runs on an MCP server
 * that lives on in its own process. After the restart, the call that had finished (its output stored) is not run
 * again, the call in flight is run once more, and the turn completes. The server counts every execution.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { httpClient, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { type McpServerProcess, startMcpServerProcess } from './helpers/mcp-server-process.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('MCP calls across kill -9 (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  const env = {
    ...environment.env,
    ...CRASH_TEST_ENV,
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
  };
  let server: ServerProcess | null = null;
  let mcp: McpServerProcess | null = null;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await mcp?.stop();
    await environment.cleanup();
  });

  it(
    'never re-runs a finished call and re-runs the call in flight once',
    async () => {
      mcp = await startMcpServerProcess(['--kind', 'modern', '--name', 'counter']);
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const created = await api('POST', '/v1/agents', {
        name: 'durable tools',
        mcpServers: [{ type: 'url', name: 'counter', url: mcp.url }],
      });
      expect(created.status).toBe(201);
      const sessionId = (await api('POST', '/v1/sessions', { agentId: created.body?.agent.id })).body?.session.id;
      const script = 'call count {"key":"before"}\n---\ncall slow {"ms":4000,"steps":4}\n---\nall done';
      const accepted = await api(
        'POST',
        `/v1/sessions/${sessionId}/messages`,
        { parts: [{ type: 'text', text: script }] },
        { 'Idempotency-Key': 'crash-1' },
      );
      expect(accepted.status).toBe(202);
      const messageId = accepted.body?.id;
      const running = mcp;
      await waitUntil(async () => ((await running.state()).calls.some((call) => call.tool === 'slow') ? true : null), {
        what: 'the slow call to start',
        everyMs: 50,
      });
      await server.stop('SIGKILL');

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const final = await waitUntil(
        async () => {
          const message = (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body?.message;
          return TERMINAL_STATUSES.includes(message?.status) ? message : null;
        },
        { what: 'the turn to finish after the restart', everyMs: 100 },
      );
      expect(final.status).toBe('completed');
      expect(final.response.parts[0].text).toBe('all done');

      const state = await mcp.state();
      expect(state.counts.before).toBe(1);
      expect(state.calls.filter((call) => call.tool === 'count')).toHaveLength(1);
      expect(state.calls.filter((call) => call.tool === 'slow')).toHaveLength(2);
      // Both executions of the interrupted call carried the same call id, so a server could deduplicate them.
      const ids = state.calls.filter((call) => call.tool === 'slow').map((call) => call.meta['agentry/call_id']);
      expect(ids[0]).toEqual(expect.stringMatching(/^call_/));
      expect(ids[1]).toBe(ids[0]);

      const trace = (await api('GET', `/v1/runs/${final.runId}/trace?limit=50`)).body?.data ?? [];
      const slow = trace.find((span: Record<string, any>) => span.kind === 'tool_call' && span.name === 'slow');
      expect(slow).toMatchObject({ status: 'completed', attributes: { attempts: 2 } });
    },
    startsTimeout(3),
  );
});
