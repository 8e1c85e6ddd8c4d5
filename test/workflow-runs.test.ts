/**
 * Workflow Runs (spec 4.8 and 6; docs/legacy.md): every tool run of the older API is readable at
 * /v1/workflow-agents/runs/{id} behind the beta header, emits workflow.run.* events to the endpoints subscribed
 * to them (signed, verified here with the standardwebhooks package by a real local receiver), pauses as
 * requires_action when the agent calls a client tool, and continues from the function results submitted.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDispatcher } from '../src/deps.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type Receiver, startReceiver, verified } from './helpers/webhook-receiver.ts';

type Json = Record<string, any>;
const BETA = { 'agentry-beta': 'agents=v1' };
const WORKFLOW_EVENTS = [
  'workflow.run.created',
  'workflow.run.in_progress',
  'workflow.run.action_required',
  'workflow.run.completed',
  'workflow.run.failed',
  'workflow.run.cancelled',
];

describe.each(dialects())('workflow runs (%s)', (dialect) => {
  let h: Harness;
  let dispatcher: WebhookDispatcher;
  let receiver: Receiver;
  let secret: string;
  let projectId: number;
  let agentId: string;

  beforeAll(async () => {
    [h, receiver] = await Promise.all([
      createHarness(dialect, {
        AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
        AGENTRY_WEBHOOK_RETRY_BASE_MS: '50',
        AGENTRY_WEBHOOK_RETRY_WINDOW_MS: '60000',
      }),
      startReceiver(),
    ]);
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
    const endpoint = json(
      await h.request('POST', '/v1/webhook_endpoints', {
        body: { name: 'workflows', url: `${receiver.url}/workflows`, event_types: WORKFLOW_EVENTS },
      }),
    );
    secret = endpoint.signing_secret;
    projectId = json(await h.request('GET', '/v1/organization')).project_id;
    agentId = json(await h.request('POST', '/v1/agents', { body: { name: 'weather', clientTools: [weatherTool()] } }))
      .agent.id;
  });
  afterAll(async () => {
    await dispatcher?.stop(1000);
    await Promise.all([h?.close(), receiver?.close()]);
  });

  const toolRun = (body: Json) => h.request('POST', `/api/sdk/p/${projectId}/a/${agentId}/r`, { body });
  const getRun = (id: string, headers: Record<string, string> = BETA) =>
    h.request('GET', `/v1/workflow-agents/runs/${id}`, { headers });
  /** The verified envelopes received for a run, in arrival order. */
  const eventsOf = (runId: string) =>
    receiver.received.map((request) => verified(secret, request)).filter((envelope) => envelope.data.id === runId);
  const waitForEvents = (runId: string, types: string[]) =>
    receiver.waitFor(
      () => types.every((type) => eventsOf(runId).some((envelope) => envelope.type === type)),
      `${types.join(', ')} for ${runId}`,
    );

  it('lists the workflow events among the webhook event types', async () => {
    const types = json(await h.request('GET', '/v1/webhook_event_types')).data.map((entry: Json) => entry.type);
    for (const type of WORKFLOW_EVENTS) expect(types).toContain(type);
  });

  it('reads a completed run and delivers created, in_progress and completed, signed', async () => {
    const run = json(await toolRun({ inputs: ['plain answer'] })).run;
    expect(run.status.run).toBe('succeeded');
    const read = await getRun(run.run_id);
    expect(read.status).toBe(200);
    expect(json(read)).toEqual({
      id: run.run_id,
      object: 'workflow_agent.run',
      status: 'completed',
      agent_id: agentId,
      agent_version: 1,
      thread_id: null,
      output: 'plain answer',
      error: null,
      required_actions: [],
      usage: { input_tokens: expect.any(Number), output_tokens: expect.any(Number), total_tokens: expect.any(Number) },
      created_at: expect.any(Number),
      started_at: expect.any(Number),
      completed_at: expect.any(Number),
    });
    await waitForEvents(run.run_id, ['workflow.run.created', 'workflow.run.in_progress', 'workflow.run.completed']);
    // Deliveries may arrive in any order (spec 6); event ids are time-ordered, so sorting them restores it.
    const envelopes = eventsOf(run.run_id).sort((a, b) => String(a.id).localeCompare(String(b.id)));
    expect(envelopes.map((envelope) => envelope.type)).toEqual([
      'workflow.run.created',
      'workflow.run.in_progress',
      'workflow.run.completed',
    ]);
    for (const envelope of envelopes) {
      expect(envelope).toMatchObject({
        id: expect.stringMatching(/^evt_/),
        object: 'event',
        created_at: expect.any(Number),
      });
    }
    // The run's hidden session sends no agent.session.* notifications.
    const runs = json(await h.request('GET', `/v1/runs/${run.run_id}`));
    const sessionEvents = await h.deps.storage.db
      .selectFrom('webhook_events')
      .select('type')
      .where('data', 'like', `%${runs.session_id}%`)
      .execute();
    expect(sessionEvents).toEqual([]);
    // A tampered body fails verification.
    const request = receiver.received.find((entry) => entry.body.includes(run.run_id));
    if (request === undefined) throw new Error('no request for the run');
    expect(() => verified(secret, { ...request, body: `${request.body} ` })).toThrow();
  });

  it('requires the beta header and keeps runs of other organizations apart', async () => {
    const run = json(await toolRun({ inputs: ['x'] })).run;
    const missing = await getRun(run.run_id, {});
    expect(missing.status).toBe(400);
    expect(json(missing).error.param).toBe('Agentry-Beta');
    const other = await h.createOrg(`wf-${randomUUID().slice(0, 8)}`);
    const foreign = await h.request('GET', `/v1/workflow-agents/runs/${run.run_id}`, { key: other.key, headers: BETA });
    expect(foreign.status).toBe(404);
    expect((await getRun(randomUUID())).status).toBe(404);
    expect((await getRun('not-a-uuid')).status).toBe(400);
  });

  it('becomes requires_action on a client tool call and continues from the submitted results', async () => {
    const blocked = json(await toolRun({ inputs: ['call get_weather {"city":"Paris"}'] })).run;
    expect(blocked.status).toEqual({ run: 'requires_action', workflow: 'requires_action' });
    expect(blocked.required_actions).toEqual([
      { type: 'function_call', call_id: expect.any(String), name: 'get_weather', arguments: '{"city":"Paris"}' },
    ]);
    const read = json(await getRun(blocked.run_id));
    expect(read.status).toBe('requires_action');
    const callId = read.required_actions[0].call_id;
    await waitForEvents(blocked.run_id, ['workflow.run.action_required']);
    const required = eventsOf(blocked.run_id).find((envelope) => envelope.type === 'workflow.run.action_required');
    expect(required?.data.required_action).toEqual({ type: 'function_call', call_id: callId, name: 'get_weather' });

    const submit = (outputs: Json[], headers: Record<string, string> = BETA) =>
      h.request('POST', `/v1/workflow-agents/runs/${blocked.run_id}/function_call_outputs`, {
        headers,
        body: { outputs },
      });
    expect((await submit([{ call_id: callId, output: 'sunny' }], {})).status).toBe(400);
    const unknown = await submit([{ call_id: 'call_unknown', output: 'x' }]);
    expect(unknown.status).toBeGreaterThanOrEqual(400);
    expect(unknown.status).toBeLessThan(500);
    expect((await submit([{ call_id: callId, output: 'sunny' }])).status).toBe(200);
    const done = await waitUntil(
      async () => {
        const current = json(await getRun(blocked.run_id));
        return current.status === 'completed' ? current : null;
      },
      { what: 'the run to complete' },
    );
    expect(done.output).toContain('sunny');
    const conflict = await submit([{ call_id: callId, output: 'rainy' }]);
    expect(conflict.status).toBe(409);
    await waitForEvents(blocked.run_id, ['workflow.run.completed']);
    const types = eventsOf(blocked.run_id).map((envelope) => envelope.type);
    expect(types.filter((type) => type === 'workflow.run.in_progress').length).toBe(2);
  });

  it('reports failed and cancelled runs', async () => {
    const failed = json(await toolRun({ inputs: ['fail no luck'] })).run;
    expect(json(await getRun(failed.run_id))).toMatchObject({
      status: 'failed',
      error: { message: expect.stringContaining('no luck') },
    });
    await waitForEvents(failed.run_id, ['workflow.run.failed']);

    const slow = json(await toolRun({ inputs: ['sleep 30000\nnever'], blocking: false })).run;
    const cancel = await h.request('POST', `/v1/workflow-agents/runs/${slow.run_id}/cancel`, { headers: BETA });
    expect(cancel.status).toBe(200);
    const cancelled = await waitUntil(
      async () => {
        const current = json(await getRun(slow.run_id));
        return current.status === 'cancelled' ? current : null;
      },
      { what: 'the run to be cancelled' },
    );
    expect(cancelled.completed_at).not.toBeNull();
    await waitForEvents(slow.run_id, ['workflow.run.cancelled']);
  });
});
