/**
 * Turns that keep a worker busy with slow MCP calls, for the tests of graceful stops and rolling restarts: each turn
 * calls the `slow` tool of a test MCP server process (mcp-test-tools.ts) several times, one call per model step,
 * and the server records every execution with the Agentry call id in its `_meta`, so a test counts runs per call.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { type httpClient, TERMINAL_STATUSES, waitUntil } from './fixtures.ts';
import type { McpServerProcess } from './mcp-server-process.ts';
import type { McpServerState } from './mcp-test-tools.ts';

type Api = ReturnType<typeof httpClient>;

export interface SlowTurn {
  sessionId: string;
  messageId: string;
  runId: string;
  /** The reply the turn ends with. */
  text: string;
}

/** A scripted turn of `calls` calls of the `slow` tool (each 1 to 2 s, varied by `seed`), then the reply `text`. */
export function slowCallsScript(calls: number, text: string, seed = 0): string {
  const steps = Array.from({ length: calls }, (_, i) => `call slow {"ms":${1000 + ((seed + i) % 5) * 250},"steps":2}`);
  return [...steps, text].join('\n---\n');
}

/** Creates an agent whose tools come from the MCP server process `mcp` (labelled `counter`); returns its id. */
export async function agentWithSlowTools(api: Api, mcp: McpServerProcess): Promise<string> {
  const created = await api('POST', '/v1/agents', {
    name: 'slow tools',
    mcpServers: [{ type: 'url', name: 'counter', url: mcp.url }],
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body?.agent.id;
}

/** Starts a turn of `script` in a new session of the agent; `text` is the reply it is expected to end with. */
export async function startSlowTurn(api: Api, agentId: string, script: string, text: string): Promise<SlowTurn> {
  const session = await api('POST', '/v1/sessions', { agentId });
  expect(session.status).toBe(201);
  const sessionId: string = session.body?.session.id;
  const accepted = await api(
    'POST',
    `/v1/sessions/${sessionId}/messages`,
    { parts: [{ type: 'text', text: script }] },
    { 'Idempotency-Key': randomUUID() },
  );
  expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
  const messageId: string = accepted.body?.id;
  const view = await api('GET', `/v1/sessions/${sessionId}/messages/${messageId}`);
  return { sessionId, messageId, runId: view.body?.message.runId, text };
}

/** Executions of the `slow` tool per call id, for calls of the given runs. */
export function slowRunsPerCall(state: McpServerState, runIds: readonly string[]): Map<string, number> {
  const runs = new Set(runIds);
  const counts = new Map<string, number>();
  for (const call of state.calls) {
    if (call.tool !== 'slow' || !runs.has(String(call.meta['agentry/run_id']))) continue;
    const id = String(call.meta['agentry/call_id']);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Waits until every turn has started at least one slow call (so each has a call in flight or behind it). */
export async function waitForSlowCalls(mcp: McpServerProcess, turns: readonly SlowTurn[]): Promise<void> {
  await waitUntil(
    async () => {
      const state = await mcp.state();
      return turns.every((turn) => slowRunsPerCall(state, [turn.runId]).size > 0) ? true : null;
    },
    { what: 'every turn to start a slow call', everyMs: 50 },
  );
}

/** Waits until every turn is terminal and checks that it completed with its reply. */
export async function expectTurnsCompleted(api: Api, turns: readonly SlowTurn[]): Promise<void> {
  for (const turn of turns) {
    const final = await waitUntil(
      async () => {
        const message = (await api('GET', `/v1/sessions/${turn.sessionId}/messages/${turn.messageId}`)).body?.message;
        return TERMINAL_STATUSES.includes(message?.status) ? message : null;
      },
      { what: `message ${turn.messageId} to finish`, everyMs: 100 },
    );
    expect(final.status, JSON.stringify(final)).toBe('completed');
    expect(final.response.parts[0].text).toBe(turn.text);
  }
}

/**
 * Every slow call of the turns ran exactly once on the MCP server: `expected` call ids, none executed twice, and
 * no execution was cancelled (aborted by a stopping worker). Prints the counts.
 */
export function expectEachSlowCallOnce(
  state: McpServerState,
  turns: readonly SlowTurn[],
  expected: number,
  label: string,
  logs?: () => readonly { name: string; output: string }[],
): void {
  const counts = slowRunsPerCall(
    state,
    turns.map((turn) => turn.runId),
  );
  const repeated = [...counts].filter(([, runs]) => runs > 1);
  const cancelled = state.cancellations.filter((cancellation) => cancellation.tool === 'slow');
  process.stdout.write(
    `[${label}] ${counts.size} slow calls, ${[...counts.values()].reduce((sum, runs) => sum + runs, 0)} executions, ${repeated.length} run more than once, ${cancelled.length} cancelled\n`,
  );
  if (repeated.length > 0 || cancelled.length > 0) {
    process.stdout.write(explainRepeats(state, turns, new Set(repeated.map(([callId]) => callId)), logs?.() ?? []));
  }
  expect(repeated).toEqual([]);
  expect(cancelled).toEqual([]);
  expect(counts.size).toBe(expected);
}

/**
 * What a failure of expectEachSlowCallOnce needs to be understood: the cancellations, and for each run with a repeated
 * call its executions (when each started) and, from the given processes' output, the lines naming its session or run.
 */
function explainRepeats(
  state: McpServerState,
  turns: readonly SlowTurn[],
  callIds: ReadonlySet<string>,
  logs: readonly { name: string; output: string }[],
): string {
  const lines = state.cancellations.map(
    (cancellation) =>
      `cancelled at ${new Date(cancellation.at).toISOString()}: ${cancellation.tool} ${JSON.stringify(cancellation.arguments)} (${cancellation.reason})`,
  );
  for (const turn of turns) {
    const executions = state.calls.filter(
      (call) => call.tool === 'slow' && String(call.meta['agentry/run_id']) === turn.runId,
    );
    const ofInterest = executions.filter((call) => callIds.has(String(call.meta['agentry/call_id'])));
    if (ofInterest.length === 0) continue;
    lines.push(`session ${turn.sessionId} run ${turn.runId}:`);
    for (const call of executions) {
      lines.push(`  ${new Date(call.at).toISOString()} executed ${String(call.meta['agentry/call_id'])}`);
    }
    for (const { name, output } of logs) {
      const named = output
        .split('\n')
        .filter((line) => line.includes(turn.sessionId) || line.includes(turn.runId))
        .slice(-40);
      for (const line of named) lines.push(`  [${name}] ${line.slice(0, 600)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}
