/**
 * Approvals on the Responses surface, driven by the real clients with their defaults: the `openai` package
 * (create, stream, retrieve) and `@openai/agents` (its approval flow for hosted MCP tools: an interruption,
 * `state.approve` / `state.reject`, and a second run). A call that needs approval ends the Response with an
 * `mcp_approval_request` item; the next request's `mcp_approval_response` decides it, and that Response carries
 * the `mcp_call` and the rest of the turn. The MCP server on loopback counts every execution. Once per dialect;
 * the Agents SDK keeps its client in global settings, so the tests run one after another.
 */
import {
  Agent,
  hostedMcpTool,
  OpenAIProvider,
  Runner,
  setDefaultOpenAIClient,
  setOpenAIAPI,
  setTracingDisabled,
} from '@openai/agents';
import OpenAI from 'openai';
import type { Response as OpenAIResponse, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flows, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type McpTestServer, startModernMcpServer } from './helpers/mcp-servers.ts';

type Item = OpenAIResponse['output'][number];
const ofType = <T extends Item['type']>(response: OpenAIResponse, type: T) =>
  response.output.filter((item): item is Extract<Item, { type: T }> => item.type === type);

describe.each(dialects())('tool approvals on Responses (%s)', (dialect) => {
  let h: Harness;
  let mcp: McpTestServer;
  let client: OpenAI;
  let agentId: string;
  let runner: Runner;
  const flow = flows(() => h, { agentName: 'responses-careful' });

  beforeAll(async () => {
    mcp = await startModernMcpServer({ name: 'ops' });
    h = await createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' });
    const base = await h.listen();
    client = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
    agentId = await flow.createAgent({
      mcpServers: [{ type: 'url', name: 'ops', url: mcp.url }],
      toolApprovals: { default: 'auto', overrides: { count: 'always_ask' } },
    });
    setTracingDisabled(true);
    setOpenAIAPI('responses');
    const sdkClient = new OpenAI({ apiKey: h.key, baseURL: `${base}/v1` });
    setDefaultOpenAIClient(sdkClient);
    runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: sdkClient, useResponses: true }) });
  });
  afterAll(async () => {
    await h.close();
    await mcp.close();
  });
  const counted = (key: string) => mcp.counts[key] ?? 0;

  it('ends the response with an mcp_approval_request and runs the call once it is approved', async () => {
    const first = await client.responses.create({ model: agentId, input: 'call count {"key":"r-1"}\n---\nall done' });
    expect(first.status).toBe('completed');
    const [request] = ofType(first, 'mcp_approval_request');
    expect(request).toMatchObject({
      id: expect.stringMatching(/^mcpr_/),
      server_label: 'ops',
      name: 'count',
      arguments: '{"key":"r-1"}',
    });
    expect(ofType(first, 'mcp_call')).toEqual([]);
    expect(counted('r-1')).toBe(0);

    const approval = {
      model: agentId,
      conversation: first.conversation?.id ?? '',
      input: [{ type: 'mcp_approval_response' as const, approval_request_id: request?.id ?? '', approve: true }],
    };
    const second = await client.responses.create(approval);
    expect(second.status).toBe('completed');
    expect(second.id).not.toBe(first.id);
    const [call] = ofType(second, 'mcp_call');
    expect(call).toMatchObject({
      server_label: 'ops',
      name: 'count',
      arguments: '{"key":"r-1"}',
      output: '1',
      status: 'completed',
      approval_request_id: request?.id,
    });
    expect(second.output_text).toBe('all done');
    expect(counted('r-1')).toBe(1);

    // The first Response still reads as it ended; the second lists the decision among its input items.
    const again = await client.responses.retrieve(first.id);
    expect(ofType(again, 'mcp_approval_request').map((item) => item.id)).toEqual([request?.id]);
    const inputs = await client.responses.inputItems.list(second.id);
    expect(inputs.data).toEqual([
      expect.objectContaining({ type: 'mcp_approval_response', approval_request_id: request?.id, approve: true }),
    ]);

    // Replaying the decision starts nothing; the opposite decision is refused.
    await expect(client.responses.create(approval, { maxRetries: 0 })).rejects.toMatchObject({ status: 400 });
    const reversed = {
      ...approval,
      input: [{ type: 'mcp_approval_response' as const, approval_request_id: request?.id ?? '', approve: false }],
    };
    await expect(client.responses.create(reversed, { maxRetries: 0 })).rejects.toMatchObject({ status: 409 });
    expect(counted('r-1')).toBe(1);
  });

  it('feeds a denial with its reason back to the model (previous_response_id, streamed)', async () => {
    const stream = await client.responses.create({
      model: agentId,
      input: 'call count {"key":"r-deny"}',
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const added = events.flatMap((event) =>
      event.type === 'response.output_item.added' && event.item.type === 'mcp_approval_request' ? [event.item] : [],
    );
    expect(added).toHaveLength(1);
    const completed = events.at(-1);
    expect(completed?.type).toBe('response.completed');
    const first = (completed as Extract<ResponseStreamEvent, { type: 'response.completed' }>).response;
    expect(ofType(first, 'mcp_approval_request').map((item) => item.id)).toEqual([added[0]?.id]);

    const second = await client.responses.create({
      model: agentId,
      previous_response_id: first.id,
      input: [
        {
          type: 'mcp_approval_response',
          approval_request_id: added[0]?.id ?? '',
          approve: false,
          reason: 'not today',
        },
      ],
    });
    expect(second.status).toBe('completed');
    expect(ofType(second, 'mcp_call')).toEqual([]);
    expect(second.output_text).toBe('count: Error: the user denied this call, so it did not run. Reason: not today');
    expect(counted('r-deny')).toBe(0);
    // The run of the decision alone says what was sent.
    const runs = json(await h.request('GET', `/v1/runs?conversation_id=${first.conversation?.id ?? ''}`)).data;
    expect(runs.find((run: Json) => run.response_id === second.id)?.input_preview).toBe(
      `[approval ${added[0]?.id}] denied: not today`,
    );
  });

  it('streams the approved call of the next response as an mcp_call with its approval_request_id', async () => {
    // The SDK's strict stream helper accepts the approval request item as well.
    const first = await client.responses
      .stream({ model: agentId, input: 'call count {"key":"r-stream"}\n---\nok' })
      .finalResponse();
    expect(first.status).toBe('completed');
    const [request] = ofType(first, 'mcp_approval_request');
    expect(request?.id).toMatch(/^mcpr_/);
    const stream = client.responses.stream({
      model: agentId,
      conversation: first.conversation?.id ?? '',
      input: [{ type: 'mcp_approval_response', approval_request_id: request?.id ?? '', approve: true }],
    });
    const final = await stream.finalResponse();
    expect(final.status).toBe('completed');
    expect(ofType(final, 'mcp_call')[0]).toMatchObject({ output: '1', approval_request_id: request?.id });
    expect(final.output_text).toBe('ok');
    expect(counted('r-stream')).toBe(1);
  });

  it('refuses forged, foreign and malformed decisions, and new input while one waits', async () => {
    const first = await client.responses.create({ model: agentId, input: 'call count {"key":"r-forge"}' });
    const conversation = first.conversation?.id ?? '';
    const [request] = ofType(first, 'mcp_approval_request');
    const post = (body: Json, key = h.key, compat = true) =>
      h.request('POST', '/v1/responses', {
        body,
        key,
        headers: { 'agentry-compat': compat ? 'openai' : 'strict' },
      });
    const decision = (fields: Json) => ({
      model: agentId,
      conversation,
      input: [{ type: 'mcp_approval_response', approval_request_id: request?.id, approve: true, ...fields }],
    });
    const forged = await post(decision({ approval_request_id: 'mcpr_00000000000000000000000000000000' }));
    expect(forged.status).toBe(400);
    expect(json(forged).error.param).toBe('input[0].approval_request_id');
    const other = await h.createOrg(`responses-other-${dialect}`);
    expect((await post(decision({}), other.key)).status).toBe(404);
    const badApprove = await post(decision({ approve: 'yes' }));
    expect(badApprove.status).toBe(400);
    expect(json(badApprove).error.param).toBe('input[0].approve');
    const badReason = await post(decision({ reason: 'x\u0000' }));
    expect(json(badReason).error.param).toBe('input[0].reason');
    const noConversation = await post({ ...decision({}), conversation: undefined });
    expect(json(noConversation).error.param).toBe('conversation');
    const strict = await post(decision({}), h.key, false);
    expect(strict.status).toBe(400);
    expect(json(strict).error.message).toContain('answer');
    const blocked = await post({ model: agentId, conversation, input: 'something else' });
    expect(blocked.status).toBe(409);
    expect(json(blocked).error.code).toBe('client_tool_output_required');
    expect(counted('r-forge')).toBe(0);
    // The approval request replayed with altered arguments changes nothing: the server holds what was asked.
    const altered = {
      type: 'mcp_approval_request',
      id: request?.id,
      server_label: 'ops',
      name: 'count',
      arguments: '{"key":"r-altered"}',
    };
    const real = await post({ ...decision({}), input: [altered, ...decision({}).input] });
    expect(real.status, real.text).toBe(200);
    expect(counted('r-forge')).toBe(1);
    expect(counted('r-altered')).toBe(0);
  });

  it("drives @openai/agents' hosted MCP approval flow unchanged", async () => {
    const agent = new Agent({
      name: 'careful',
      model: agentId,
      tools: [hostedMcpTool({ serverLabel: 'ops', serverUrl: mcp.url, requireApproval: 'always' })],
    });
    const first = await runner.run(agent, 'call count {"key":"sdk-1"}\n---\ncounted once');
    expect(first.interruptions).toHaveLength(1);
    const [interruption] = first.interruptions;
    expect(interruption?.name).toBe('count');
    expect(counted('sdk-1')).toBe(0);
    first.state.approve(interruption as NonNullable<typeof interruption>);
    const second = await runner.run(agent, first.state, { previousResponseId: first.lastResponseId ?? '' });
    expect(second.interruptions ?? []).toHaveLength(0);
    expect(second.finalOutput).toBe('counted once');
    expect(counted('sdk-1')).toBe(1);

    const denied = await runner.run(agent, 'call count {"key":"sdk-2"}');
    const [asked] = denied.interruptions;
    denied.state.reject(asked as NonNullable<typeof asked>);
    const after = await runner.run(agent, denied.state, { previousResponseId: denied.lastResponseId ?? '' });
    expect(after.finalOutput).toContain('the user denied this call');
    expect(counted('sdk-2')).toBe(0);
  });
});
