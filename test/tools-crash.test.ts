/**
 * Crash safety of MCP calls with real processes: Agentry is killed with SIGKILL while a call runs on an MCP server
 * that lives on in its own process. After the restart, the call that had finished (its output stored) is not run
 * again, the call in flight is run once more, and the turn completes. The server counts every execution.
 * Stopped with SIGTERM instead, Agentry drains: its turns pause at their next step boundary and are handed over,
 * starting no new tool call; a call running at SIGTERM finishes and its stored result is used; a model call in
 * flight finishes and its step is stored. Restarted again and again under load, every tool call runs exactly once.
 * (test/cluster.test.ts replaces the workers of a cluster the same way.) A call interrupted twice is given up, and
 * says so on its message, its run, its Response and the session's events.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { WAIT_MS } from './helpers/deadlines.ts';
import { httpClient, TERMINAL_STATUSES, waitUntil } from './helpers/fixtures.ts';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { type McpServerProcess, startMcpServerProcess } from './helpers/mcp-server-process.ts';
import { CRASH_TEST_ENV, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';
import {
  agentWithSlowTools,
  expectEachSlowCallOnce,
  expectTurnsCompleted,
  type SlowTurn,
  slowCallsScript,
  slowRunsPerCall,
  startSlowTurn,
  waitForSlowCalls,
} from './helpers/slow-calls.ts';

describe.each(dialects())('MCP calls across kill -9 and graceful restarts (%s)', (dialect) => {
  const environment = testEnvironment(dialect);
  const key = testKey();
  // The default grace period (10 s, 8 s of it for turns): longer than any one call, shorter than a whole turn.
  const env = {
    ...environment.env,
    ...CRASH_TEST_ENV,
    AGENTRY_BOOTSTRAP_KEY: key,
    AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
  };
  let server: ServerProcess | null = null;
  let mcp: McpServerProcess | null = null;
  const counters: McpServerProcess[] = [];
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await Promise.all([mcp, ...counters].map((child) => child?.stop()));
    await environment.cleanup();
  });

  /**
   * A new Agentry process (after a graceful stop of the one before) and an MCP server process of its own (the
   * kill -9 of the first test left a cancelled call in the other's records), with an agent using its tools.
   */
  async function freshStart(): Promise<{ counter: McpServerProcess; agentId: string; server: ServerProcess }> {
    const counter = await startMcpServerProcess(['--kind', 'modern', '--name', 'counter']);
    counters.push(counter);
    await server?.stop();
    server = await startServerProcess(env);
    return { counter, agentId: await agentWithSlowTools(httpClient(server.url, key), counter), server };
  }

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
    'lets the call in flight finish and keeps its result, and starts no new call while it drains',
    async () => {
      const { counter, agentId, server: started } = await freshStart();
      server = started;
      let api = httpClient(server.url, key);
      // One turn is between steps at SIGTERM: its model call is in flight (it answers within the grace period
      // unless the machine is very slow, when it is aborted and made again), its tool call not started yet ...
      const between = await startSlowTurn(
        api,
        agentId,
        'sleep 6000\ncall slow {"ms":500,"steps":1}\n---\nbetween done',
        'between done',
      );
      // ... the other has a tool call running.
      const calling = await startSlowTurn(
        api,
        agentId,
        'call slow {"ms":3000,"steps":3}\n---\ncalling done',
        'calling done',
      );
      await waitForSlowCalls(counter, [calling]);
      const before = await counter.state();
      expect(slowRunsPerCall(before, [between.runId]).size, 'the model call is still in flight at SIGTERM').toBe(0);

      const signalledAt = Date.now();
      expect(await server.stop('SIGTERM')).toBe(0);
      const exitedAt = Date.now();
      const drained = await counter.state();
      // The draining process started no call: not the one of the step its model call returned while it drained.
      const startedWhileDraining = drained.calls.filter(
        (call) => call.at >= signalledAt && call.at <= exitedAt && call.tool === 'slow',
      );
      expect(startedWhileDraining).toEqual([]);

      server = await startServerProcess(env);
      api = httpClient(server.url, key);
      await expectTurnsCompleted(api, [between, calling]);
      const state = await counter.state();
      expectEachSlowCallOnce(state, [between, calling], 2, `drain ${dialect}`);
      // The call that ran through the SIGTERM finished there; its result was stored and used, not run again.
      const trace = (await api('GET', `/v1/runs/${calling.runId}/trace?limit=50`)).body?.data ?? [];
      const slow = trace.find((span: Record<string, any>) => span.kind === 'tool_call' && span.name === 'slow');
      expect(slow).toMatchObject({ status: 'completed', attributes: { attempts: 1 } });
      // The call of the turn handed over between steps ran on the new process.
      const handedOver = state.calls.filter((call) => call.meta['agentry/run_id'] === between.runId);
      expect(handedOver.map((call) => call.at >= exitedAt)).toEqual([true]);
    },
    startsTimeout(2),
  );

  it(
    'runs every tool call exactly once across repeated restarts under load',
    async () => {
      const { counter, agentId, server: started } = await freshStart();
      server = started;
      let api = httpClient(server.url, key);
      // Turns of 8 calls of 1-2 s: longer than the 8 s a stopping server gives them, so each stop comes in the
      // middle of tool calls.
      const calls = 8;
      const turns: SlowTurn[] = [];
      for (let round = 0; round < 3; round++) {
        // New turns for the process about to stop, beside those it took over from the one before.
        const batch = await Promise.all(
          [0, 1, 2].map((n) => {
            const text = `round ${round} turn ${n} done`;
            return startSlowTurn(api, agentId, slowCallsScript(calls, text, round + n), text);
          }),
        );
        turns.push(...batch);
        await waitForSlowCalls(counter, batch);
        expect(await server.stop('SIGTERM')).toBe(0);
        server = await startServerProcess(env);
        api = httpClient(server.url, key);
      }
      await expectTurnsCompleted(api, turns);
      expectEachSlowCallOnce(await counter.state(), turns, turns.length * calls, `restarts ${dialect}`);
    },
    startsTimeout(4, 120_000),
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
