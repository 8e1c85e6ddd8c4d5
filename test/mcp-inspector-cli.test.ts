/**
 * The MCP Inspector's command line (@modelcontextprotocol/inspector-cli, pinned in package.json) against Agentry's
 * MCP endpoints, as a developer runs it: HTTP transport, the API key as an Authorization header. It lists the tools
 * of /v1/mcp and of one agent, calls them (a turn recorded as a Run with source `mcp`), and fails without a valid
 * key. Once per dialect.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { binOf, type CommandResult, runCommand } from './helpers/mcp-clis.ts';

describe.each(dialects())('the MCP Inspector CLI against Agentry (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h, { agentName: 'inspected' });
  let base: string;
  let agentId: string;

  beforeAll(async () => {
    h = await createHarness(dialect);
    base = await h.listen();
    agentId = await flow.createAgent({ description: 'Repeats what it is told' });
  });
  afterAll(async () => {
    await h.close();
  });

  /** Runs the inspector's CLI mode against `path` with `key`; its output is the JSON of the answer. */
  async function inspect(path: string, key: string, args: string[]): Promise<CommandResult> {
    return runCommand(
      binOf('mcp-inspector-cli'),
      ['--cli', `${base}${path}`, '--transport', 'http', '--header', `Authorization: Bearer ${key}`, ...args],
      // The CLI finds its own package.json through `../package.json` from the working directory.
      { cwd: join(import.meta.dirname), timeoutMs: 120_000 },
    );
  }

  function answerOf(result: CommandResult): Json {
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    return JSON.parse(result.stdout.slice(result.stdout.indexOf('{'))) as Json;
  }

  it('lists and calls the tools of /v1/mcp', async () => {
    const listed = answerOf(await inspect('/v1/mcp', h.key, ['--method', 'tools/list']));
    expect(listed.tools.map((tool: Json) => tool.name).sort()).toEqual(['list_agents', 'message_agent']);
    const messageAgent = listed.tools.find((tool: Json) => tool.name === 'message_agent');
    expect(messageAgent.inputSchema.required).toEqual(['agent', 'message']);

    const agents = answerOf(await inspect('/v1/mcp', h.key, ['--method', 'tools/call', '--tool-name', 'list_agents']));
    expect(agents.structuredContent.agents).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: agentId, name: 'inspected', description: 'Repeats what it is told' }),
      ]),
    );

    const reply = answerOf(
      await inspect('/v1/mcp', h.key, [
        '--method',
        'tools/call',
        '--tool-name',
        'message_agent',
        '--tool-arg',
        'agent=inspected',
        '--tool-arg',
        'message=Hello from the inspector',
      ]),
    );
    expect(reply.isError ?? false).toBe(false);
    expect(reply.content).toEqual([{ type: 'text', text: 'Hello from the inspector' }]);
    expect(reply.structuredContent).toMatchObject({ status: 'completed', text: 'Hello from the inspector' });
    const run = json(await h.request('GET', `/v1/runs/${reply.structuredContent.run_id}`));
    expect(run).toMatchObject({ source: 'mcp', status: 'completed', agent_id: agentId });
  });

  it('lists and calls the tool of one agent', async () => {
    const path = `/v1/agents/${agentId}/mcp`;
    const listed = answerOf(await inspect(path, h.key, ['--method', 'tools/list']));
    expect(listed.tools).toEqual([expect.objectContaining({ name: 'message', title: 'inspected' })]);
    const reply = answerOf(
      await inspect(path, h.key, ['--method', 'tools/call', '--tool-name', 'message', '--tool-arg', 'message=one']),
    );
    expect(reply.structuredContent).toMatchObject({ status: 'completed', text: 'one' });
    const messages = json(await h.request('GET', `/v1/sessions/${reply.structuredContent.session_id}/messages`));
    expect(messages.data).toHaveLength(1);
  });

  it("fails without a valid key, and another organization's key does not see the agent", async () => {
    const refused = await inspect('/v1/mcp', 'agk_not_a_key', ['--method', 'tools/list']);
    expect(refused.code).not.toBe(0);
    expect(`${refused.stdout}${refused.stderr}`).toMatch(/invalid_api_key/);
    const other = await h.createOrg('elsewhere');
    const none = answerOf(
      await inspect('/v1/mcp', other.key, ['--method', 'tools/call', '--tool-name', 'list_agents']),
    );
    expect(none.structuredContent.agents.map((agent: Json) => agent.id)).not.toContain(agentId);
    const hidden = await inspect(`/v1/agents/${agentId}/mcp`, other.key, ['--method', 'tools/list']);
    expect(hidden.code).not.toBe(0);
    expect(`${hidden.stdout}${hidden.stderr}`).toMatch(/"code":"not_found"/);
  });
});
