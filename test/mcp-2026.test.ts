/**
 * Elicitation against a server of the 2026-07-28 revision (v2 `@modelcontextprotocol/server`, stateless, legacy
 * requests refused): its tool answers with an `input_required` result embedding a form elicitation, and is called
 * again by the client with the answer in `inputResponses`. Agentry suspends the turn on it like on a 2025 server's
 * `elicitation/create`, the answer route takes the answer, and the call runs again with it. Once per dialect.
 */
import { createMcpHandler, inputRequired, inputResponse, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, TERMINAL_STATUSES } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';
import { type Shell, serveWeb, startShell } from './helpers/mcp-http-shell.ts';
import { emptyState } from './helpers/mcp-test-tools.ts';

interface Seen {
  runs: number;
  answers: unknown[];
}

async function startAskingServer(seen: Seen): Promise<{ url: string; shell: Shell; close(): Promise<void> }> {
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: 'asking-2026', version: '1.0.0' });
      server.registerTool('book_table', { description: 'Books a table, asking who for.' }, async (ctx) => {
        seen.runs += 1;
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'who');
        if (answer.kind !== 'elicit') {
          return inputRequired({
            inputRequests: {
              who: inputRequired.elicit({
                message: 'Who is the table for?',
                requestedSchema: {
                  type: 'object',
                  properties: { name: { type: 'string' } },
                  required: ['name'],
                },
              }),
            },
          });
        }
        seen.answers.push({ action: answer.action, content: answer.content });
        return { content: [{ type: 'text', text: `booked for ${String(answer.content?.name)}` }] };
      });
      return server;
    },
    { legacy: 'reject', keepAliveMs: 0 },
  );
  const shell = await startShell({
    state: emptyState(),
    route: async (request) => {
      await serveWeb(request, (webRequest) => handler.fetch(webRequest));
    },
  });
  return {
    url: `${shell.origin}/mcp`,
    shell,
    async close() {
      await handler.close();
      await shell.close();
    },
  };
}

describe.each(dialects())('a 2026-07-28 MCP server that elicits (%s)', (dialect) => {
  let h: Harness;
  let mcp: Awaited<ReturnType<typeof startAskingServer>>;
  const seen: Seen = { runs: 0, answers: [] };
  let agentId: string;
  const flow = flows(() => h, { agentName: 'asker-2026' });

  beforeAll(async () => {
    mcp = await startAskingServer(seen);
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true', AGENTRY_POLL_MS: '100' });
    agentId = await flow.createAgent({ mcpServers: [{ type: 'url', name: 'asking', url: mcp.url }] });
  }, 120_000);
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });

  it('suspends on an input_required result and runs the call again with the answer', async () => {
    const started = await flow.turn(agentId, 'call book_table {}', ['requires_action', ...TERMINAL_STATUSES]);
    expect(started.message.status, JSON.stringify(started.message)).toBe('requires_action');
    const [action] = started.message.requiredActions;
    expect(action).toMatchObject({ type: 'mcp_elicitation', server: 'asking', mode: 'form' });
    const ok = await h.request('POST', `/v1/sessions/${started.sessionId}/messages/${started.accepted.id}/answer`, {
      body: { actionId: action.actionId, answer: { action: 'accept', content: { name: 'Ada' } } },
    });
    expect(ok.status, ok.text).toBe(200);
    const done = await flow.waitForMessage(started.sessionId, started.accepted.id);
    expect(done.status).toBe('completed');
    expect(done.response.parts[0].text).toBe('book_table: booked for Ada');
    expect(seen.answers).toEqual([{ action: 'accept', content: { name: 'Ada' } }]);
    // Asked once (the turn suspended), then run again: asked again, answered at once from the stored answer, retried.
    expect(seen.runs).toBe(3);
  });
});
