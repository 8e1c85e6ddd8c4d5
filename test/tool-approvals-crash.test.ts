/**
 * Approvals across restarts, with real processes: Agentry is stopped (SIGTERM) or killed (SIGKILL) while a call
 * waits for approval and right after the approval, while the MCP server that counts every execution lives on in
 * its own process. The approval survives the restart, and the approved call runs at most once (exactly once
 * unless the kill came after its start, which the message then reports); a call killed while running is not run a
 * second time.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { httpClient, type Json, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { type McpServerProcess, startMcpServerProcess } from './helpers/mcp-server-process.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

describe.each(dialects())('tool approvals across restarts (%s)', (dialect) => {
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

  const messageOf = async (api: ReturnType<typeof httpClient>, sessionId: string, messageId: string) =>
    (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body?.message as Json;

  async function waitFor(api: ReturnType<typeof httpClient>, sessionId: string, messageId: string, statuses: string[]) {
    return waitUntil(
      async () => {
        const message = await messageOf(api, sessionId, messageId);
        return statuses.includes(message?.status) ? message : null;
      },
      { what: `message ${messageId} to reach ${statuses.join('|')}`, everyMs: 100 },
    );
  }

  async function submit(api: ReturnType<typeof httpClient>, sessionId: string, text: string, key: string) {
    const accepted = await api(
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      { parts: [{ type: 'text', text }] },
      { 'Idempotency-Key': key },
    );
    expect(accepted.status).toBe(202);
    return accepted.body?.id as string;
  }

  it(
    'keeps a waiting approval across restarts and runs the approved call exactly once',
    async () => {
      mcp = await startMcpServerProcess(['--kind', 'modern', '--name', 'counter']);
      server = await startServerProcess(env);
      let api = httpClient(server.url, key);
      const created = await api('POST', '/v1/agents', {
        name: 'careful',
        mcpServers: [{ type: 'url', name: 'counter', url: mcp.url }],
        toolApprovals: { default: 'always_ask', overrides: {} },
      });
      expect(created.status).toBe(201);
      const agentId = created.body?.agent.id;
      const sessionId = (await api('POST', '/v1/sessions', { agentId })).body?.session.id as string;

      // 1. A restart (graceful, then a kill -9) while the call waits: the approval is still there, still single use.
      const first = await submit(api, sessionId, 'call count {"key":"waited"}\n---\nfirst done', 'approve-restart-1');
      const waiting = await waitFor(api, sessionId, first, ['requires_action', ...TERMINAL_STATUSES]);
      expect(waiting.status).toBe('requires_action');
      const action = waiting.requiredActions[0];
      expect(action).toMatchObject({ type: 'tool_approval', tool: 'count', server: 'counter' });
      await server.stop('SIGTERM');
      server = await startServerProcess(env);
      await server.stop('SIGKILL');
      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const after = await messageOf(api, sessionId, first);
      expect(after.status).toBe('requires_action');
      expect(after.requiredActions).toEqual([action]);
      expect((await mcp.state()).counts.waited).toBeUndefined();
      const approved = await api('POST', `/v1/sessions/${sessionId}/messages/${first}/answer`, {
        actionId: action.actionId,
        answer: { approved: true },
      });
      expect(approved.status).toBe(200);
      const done = await waitFor(api, sessionId, first, TERMINAL_STATUSES as string[]);
      expect(done.status).toBe('completed');
      expect(done.response.parts[0].text).toBe('first done');
      expect((await mcp.state()).counts.waited).toBe(1);

      // 2. kill -9 right after the approval: after the restart the call has run exactly once.
      const second = await submit(api, sessionId, 'call count {"key":"killed"}\n---\nsecond done', 'approve-kill-2');
      const asked = await waitFor(api, sessionId, second, ['requires_action', ...TERMINAL_STATUSES]);
      const answered = await api('POST', `/v1/sessions/${sessionId}/messages/${second}/answer`, {
        actionId: asked.requiredActions[0].actionId,
        answer: { approved: true },
      });
      expect(answered.status).toBe(200);
      await server.stop('SIGKILL');
      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const recovered = await waitFor(api, sessionId, second, TERMINAL_STATUSES as string[]);
      expect(recovered.status).toBe('completed');
      const state = await mcp.state();
      const runs = state.calls.filter((call) => call.tool === 'count' && call.arguments.key === 'killed').length;
      expect(state.counts.killed ?? 0).toBe(runs);
      // The kill lands before the worker starts the approved call (it runs once after the restart), or after the
      // worker marked it started and before its output was stored: then it is not run again (an approval allows
      // one execution) and the message says so. Never twice.
      const abandoned = (recovered.warnings as { code: string }[]).some((w) => w.code === 'tool_call_abandoned');
      expect(runs).toBeLessThanOrEqual(1);
      if (!abandoned) expect(runs).toBe(1);
      const again = await api('POST', `/v1/sessions/${sessionId}/messages/${second}/answer`, {
        actionId: asked.requiredActions[0].actionId,
        answer: { approved: true },
      });
      expect(again.status).toBe(409);

      // 3. kill -9 while the approved call runs: it is not started a second time after the restart.
      const third = await submit(api, sessionId, 'call slow {"ms":3000,"steps":3}\n---\nthird done', 'approve-kill-3');
      const slow = await waitFor(api, sessionId, third, ['requires_action', ...TERMINAL_STATUSES]);
      await api('POST', `/v1/sessions/${sessionId}/messages/${third}/answer`, {
        actionId: slow.requiredActions[0].actionId,
        answer: { approved: true },
      });
      const running = mcp;
      await waitUntil(async () => ((await running.state()).calls.some((call) => call.tool === 'slow') ? true : null), {
        what: 'the approved slow call to start',
        everyMs: 50,
      });
      await server.stop('SIGKILL');
      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      const finished = await waitFor(api, sessionId, third, TERMINAL_STATUSES as string[]);
      expect(finished.status).toBe('completed');
      expect(finished.response.parts[0].text).toBe('third done');
      // Given up, and the message says which call.
      expect(finished.warnings).toEqual([
        {
          code: 'tool_call_abandoned',
          message: expect.stringContaining('after its approval'),
          callId: expect.stringMatching(/^call_/),
          tool: 'slow',
        },
      ]);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await mcp.state()).calls.filter((call) => call.tool === 'slow')).toHaveLength(1);
      const trace = (await api('GET', `/v1/runs/${finished.runId}/trace?limit=50`)).body?.data ?? [];
      const span = trace.find((s: Json) => s.kind === 'tool_call' && s.name === 'slow');
      expect(span?.status).toBe('failed');
      expect(span?.output_preview).toContain('was not run again');
    },
    startsTimeout(6),
  );
});
