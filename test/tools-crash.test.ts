/**
 * Crash safety of MCP calls with real processes: Agentry is killed with SIGKILL while a call runs on an MCP server
 * that lives on in its own process. After the restart, the call that had finished (its output stored) is not run
 * again, the call in flight is run once more, and the turn completes. The server counts every execution. A call
 * interrupted twice is given up, and says so on its message, its run, its Response and the session's events.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { WAIT_MS } from './helpers/deadlines.ts';
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

  /** Kills the server once `slow` has been called `times` times. */
  const killDuringCall = async (running: ServerProcess, counter: McpServerProcess, times: number) => {
    await waitUntil(
      async () => ((await counter.state()).calls.filter((call) => call.tool === 'slow').length >= times ? true : null),
      { what: `call ${times} of slow to start`, everyMs: 50 },
    );
    await running.stop('SIGKILL');
  };

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

  it(
    'gives up a call interrupted twice and shows it as a warning everywhere the turn is seen',
    async () => {
      // A database of its own: the other test's server may still be running on the shared one.
      const own = testEnvironment(dialect);
      const ownEnv = { ...env, ...own.env };
      const counter = await startMcpServerProcess(['--kind', 'modern', '--name', 'abandoned']);
      let running = await startServerProcess(ownEnv);
      try {
        let api = httpClient(running.url, key);
        const created = await api('POST', '/v1/agents', {
          name: 'gives up',
          mcpServers: [{ type: 'url', name: 'abandoned', url: counter.url }],
        });
        const sessionId = (await api('POST', '/v1/sessions', { agentId: created.body?.agent.id })).body?.session.id;
        const accepted = await api(
          'POST',
          `/v1/sessions/${sessionId}/messages`,
          { parts: [{ type: 'text', text: 'call slow {"ms":600000,"steps":600}\n---\ncarried on without it' }] },
          { 'Idempotency-Key': 'abandon-1' },
        );
        expect(accepted.status).toBe(202);
        expect(accepted.body?.warnings).toEqual([]);
        const messageId = accepted.body?.id;
        await killDuringCall(running, counter, 1);
        running = await startServerProcess(ownEnv);
        await killDuringCall(running, counter, 2);
        running = await startServerProcess(ownEnv);
        api = httpClient(running.url, key);
        const final = await waitUntil(
          async () => {
            const message = (await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`)).body?.message;
            return TERMINAL_STATUSES.includes(message?.status) ? message : null;
          },
          { what: 'the turn to finish after the second restart', everyMs: 100 },
        );

        const calls = (await counter.state()).calls.filter((call) => call.tool === 'slow');
        expect(calls).toHaveLength(2);
        const callId = calls[0]?.meta['agentry/call_id'];
        const warning = {
          code: 'tool_call_abandoned',
          message: expect.stringContaining('was not run again'),
          callId,
          tool: 'slow',
        };
        expect(final).toMatchObject({ status: 'completed', response: { parts: [{ text: 'carried on without it' }] } });
        expect(final.warnings).toEqual([warning]);
        const listed = (await api('GET', `/v1/sessions/${sessionId}/messages`)).body?.data;
        expect(listed.find((message: Record<string, any>) => message.id === messageId).warnings).toEqual([warning]);

        const run = (await api('GET', `/v1/runs/${final.runId}`)).body;
        expect(run).toMatchObject({ status: 'completed' });
        expect(run.warnings).toEqual([{ ...warning, callId: undefined, call_id: callId }]);

        const response = (await api('GET', `/v1/responses/resp_${messageId}`)).body;
        expect(response.status).toBe('completed');
        expect(response.output.find((item: Record<string, any>) => item.type === 'mcp_call')).toMatchObject({
          name: 'slow',
          status: 'failed',
          output: null,
          error: expect.stringContaining('interrupted twice'),
        });

        const events = await sessionEvents(running.url, key, sessionId, messageId);
        const warned = events.filter((event) => event.kind === 'message.event' && event.data.type === 'warning');
        expect(warned).toEqual([
          expect.objectContaining({ message_id: messageId, data: expect.objectContaining(warning) }),
        ]);
      } finally {
        await running.stop('SIGKILL');
        await counter.stop();
        await own.cleanup();
      }
    },
    startsTimeout(4),
  );
});

/** The persisted events of a session up to the end of `messageId`'s turn, as its stream replays them. */
async function sessionEvents(url: string, key: string, sessionId: string, messageId: string) {
  const response = await fetch(`${url}/v1/sessions/${sessionId}/stream`, {
    headers: { authorization: `Bearer ${key}`, 'last-event-id': '0' },
  });
  const reader = response.body?.getReader();
  if (reader === undefined) throw new Error('the stream has no body');
  const decoder = new TextDecoder();
  const events: Record<string, any>[] = [];
  let buffer = '';
  const deadline = setTimeout(() => void reader.cancel(), WAIT_MS);
  try {
    while (!events.some((event) => event.kind === 'message.completed' && event.message_id === messageId)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before the turn's end; events: ${JSON.stringify(events)}`);
      buffer += decoder.decode(value, { stream: true });
      const frames = buffer.split('\n\n');
      buffer = frames.pop() ?? '';
      for (const frame of frames) {
        const data = frame.split('\n').find((line) => line.startsWith('data: '));
        if (data !== undefined) events.push(JSON.parse(data.slice(6)));
      }
    }
  } finally {
    clearTimeout(deadline);
    await reader.cancel().catch(() => undefined);
  }
  return events;
}
