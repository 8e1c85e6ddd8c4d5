/**
 * A connector's resources and prompts (docs/tools.md): the resource tools an agent is offered when its server has
 * resources (listing, reading text in bounded parts, binary described), the API's resource and prompt pages, and
 * tools that require the MCP tasks extension left out with a note. Real MCP servers on loopback, the `scripted`
 * model, once per dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import {
  type ResourceServer,
  SMALL_TEXT,
  startResourceServer,
  startTaskToolServer,
} from './helpers/mcp-resource-server.ts';
import { TINY_PNG_BASE64 } from './helpers/mcp-test-tools.ts';

describe.each(dialects())('MCP resources and prompts (%s)', (dialect) => {
  let h: Harness;
  let server: ResourceServer;
  let connectorId: string;
  let agentId: string;
  const flow = flows(() => h);

  /** Runs one Response whose scripted model calls `tool` with `args`; returns the MCP call item. */
  const callTool = async (tool: string, args: Json) => {
    const res = await h.request('POST', '/v1/responses', {
      body: { model: agentId, input: `call ${tool} ${JSON.stringify(args)}` },
    });
    expect(res.status, res.text).toBe(200);
    const call = json(res).output.find((item: Json) => item.type === 'mcp_call');
    expect(call, res.text).toBeDefined();
    return call as Json;
  };

  beforeAll(async () => {
    server = await startResourceServer({ hugeChars: 200_000 });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    const created = await h.request('POST', '/v1/mcp_servers', { body: { name: 'library', url: server.url } });
    expect(created.status, created.text).toBe(201);
    connectorId = json(created).id;
    agentId = await flow.createAgent({ mcpServers: [{ kind: 'custom', serverId: connectorId, name: 'docs' }] });
  });
  afterAll(async () => {
    await h.close();
    await server.close();
  });

  it('lists resources and prompts through the API, organization-isolated', async () => {
    const resources = await h.request('GET', `/v1/mcp_servers/${connectorId}/resources`);
    expect(resources.status, resources.text).toBe(200);
    expect(json(resources)).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(
      json(resources)
        .data.map((resource: Json) => resource.uri)
        .sort(),
    ).toEqual(['docs://archive', 'docs://report', 'img://logo']);
    expect(json(resources).data).toContainEqual(
      expect.objectContaining({ uri: 'docs://report', name: 'report', mimeType: 'text/plain' }),
    );
    const prompts = await h.request('GET', `/v1/mcp_servers/${connectorId}/prompts`);
    expect(prompts.status, prompts.text).toBe(200);
    expect(json(prompts).data).toEqual([
      expect.objectContaining({
        name: 'greet',
        description: 'Greets someone',
        arguments: [expect.objectContaining({ name: 'name', required: true })],
      }),
    ]);
    const other = await h.createOrg('other');
    for (const what of ['resources', 'prompts']) {
      const res = await h.request('GET', `/v1/mcp_servers/${connectorId}/${what}`, { key: other.key });
      expect(res.status).toBe(404);
    }
  });

  it('offers the resource tools and lists resources through them', async () => {
    const call = await callTool('docs__list_resources', {});
    expect(call.error ?? null).toBeNull();
    expect(call.output).toContain('docs://report — report (text/plain): The quarterly report');
    expect(call.output).toContain('img://logo');
  });

  it('reads a text resource', async () => {
    const call = await callTool('docs__read_resource', { uri: 'docs://report' });
    expect(call.output).toContain('[resource: docs://report (text/plain)');
    expect(call.output).toContain(SMALL_TEXT);
  });

  it('reads a huge resource in bounded parts', async () => {
    const first = await callTool('docs__read_resource', { uri: 'docs://archive' });
    expect(first.output.length).toBeLessThan(51_000);
    expect(first.output).toContain('200000 characters');
    expect(first.output).toContain('call again with offset 50000');
    const last = await callTool('docs__read_resource', { uri: 'docs://archive', offset: 170_000 });
    expect(last.output.split('\n')[1]).toBe('x'.repeat(30_000));
    expect(last.output).not.toContain('call again');
  });

  it('describes a binary resource instead of pasting it', async () => {
    const call = await callTool('docs__read_resource', { uri: 'img://logo' });
    const bytes = Buffer.from(TINY_PNG_BASE64, 'base64').byteLength;
    expect(call.output).toContain(`img://logo (image/png), binary, ${bytes} bytes`);
    expect(call.output).not.toContain(TINY_PNG_BASE64);
  });

  it('reports an unknown resource as a tool error, not a failed turn', async () => {
    const call = await callTool('docs__read_resource', { uri: 'docs://missing' });
    expect(JSON.stringify(call)).toMatch(/error/i);
  });

  it('leaves out tools that require the MCP tasks extension, and says why', async () => {
    const tasks = await startTaskToolServer();
    try {
      const created = await h.request('POST', '/v1/mcp_servers', { body: { name: 'exporter', url: tasks.url } });
      expect(created.status, created.text).toBe(201);
      const connector = json(created);
      expect(connector.tools.map((tool: Json) => tool.name)).toEqual(['quick']);
      expect(connector.last_error?.message).toContain('"long_export"');
      expect(connector.last_error?.message).toContain('must run as MCP tasks');
      const agent = await flow.createAgent({
        name: 'exporter-agent',
        mcpServers: [{ kind: 'custom', serverId: connector.id, name: 'exporter' }],
      });
      const res = await h.request('POST', '/v1/responses', { body: { model: agent, input: 'call quick {}' } });
      expect(res.status, res.text).toBe(200);
      const listed = json(res).output.find((item: Json) => item.type === 'mcp_list_tools');
      expect(listed.tools.map((tool: Json) => tool.name)).toEqual(['quick']);
      expect(tasks.methods).not.toContain('tasks/get');
    } finally {
      await tasks.close();
    }
  });
});
