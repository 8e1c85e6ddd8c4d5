/**
 * The schedule.run.* webhooks of real schedule runs, delivered to a real local receiver and verified with the
 * standardwebhooks package: created, running, completed, skipped, cancelled, failed (timeout), and the
 * agent.session.action_required notification of a scheduled turn naming its schedule. Each dialect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDispatcher, buildScheduler } from '../src/deps.ts';
import type { Scheduler } from '../src/engine/scheduler.ts';
import type { WebhookDispatcher } from '../src/webhooks/dispatcher.ts';
import { type Json, TERMINAL_STATUSES, waitUntil, weatherTool } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type TestClock, testClock } from './helpers/test-clock.ts';
import { type Receiver, startReceiver, verified } from './helpers/webhook-receiver.ts';

const ENV = {
  AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true',
  AGENTRY_WEBHOOK_RETRY_BASE_MS: '50',
  AGENTRY_WEBHOOK_RETRY_WINDOW_MS: '600000',
};

describe.each(dialects())('schedule webhooks (%s)', (dialect) => {
  let h: Harness;
  let clock: TestClock;
  let scheduler: Scheduler;
  let dispatcher: WebhookDispatcher;
  let receiver: Receiver;

  beforeAll(async () => {
    // Real time, advanced by seconds only: signatures must stay within the verifier's five-minute tolerance.
    clock = testClock();
    [h, receiver] = await Promise.all([createHarness(dialect, ENV, { clock }), startReceiver()]);
    scheduler = buildScheduler(h.deps);
    dispatcher = buildDispatcher(h.deps);
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher?.stop(1000);
    await scheduler?.stop();
    await Promise.all([h?.close(), receiver?.close()]);
  });

  it('sends every schedule.run.* event with schedule_id, and names the schedule in action_required', async () => {
    const endpoint = json(
      await h.request('POST', '/v1/webhook_endpoints', {
        body: {
          name: 'schedules',
          url: `${receiver.url}/schedules/${dialect}`,
          event_types: [
            'schedule.run.created',
            'schedule.run.running',
            'schedule.run.completed',
            'schedule.run.failed',
            'schedule.run.cancelled',
            'schedule.run.skipped',
            'agent.session.action_required',
          ],
        },
      }),
    );
    const agentId = json(await h.request('POST', '/v1/agents', { body: { name: 'a' } })).agent.id;
    const toolAgentId = json(
      await h.request('POST', '/v1/agents', { body: { name: 't', clientTools: [weatherTool()] } }),
    ).agent.id;
    const create = async (body: Json) =>
      json(await h.request('POST', '/v1/schedules', { body: { name: 's', agent_id: agentId, ...body } }));
    const runsOf = async (id: string): Promise<Json[]> => json(await h.request('GET', `/v1/schedules/${id}/runs`)).data;
    const waitRun = (scheduleId: string, runId: string, statuses: readonly string[]) =>
      waitUntil(
        async () => {
          const run = json(await h.request('GET', `/v1/schedules/${scheduleId}/runs/${runId}`));
          return statuses.includes(run.status) ? run : null;
        },
        { what: `run ${runId} ${statuses.join('|')}` },
      );

    // Completed: a tick of an interval schedule.
    const done = await create({ interval_seconds: 10, input: 'hello', overlap: 'skip' });
    clock.advance(10_100);
    await scheduler.poke();
    const [completedRun] = await runsOf(done.id);
    await waitRun(done.id, completedRun?.id, ['completed']);
    await h.request('POST', `/v1/schedules/${done.id}`, { body: { enabled: false } });

    // Skipped and cancelled: a slow run, a tick while it runs, then an interrupt.
    const slow = await create({ interval_seconds: 10, input: 'sleep 60000\nslow', overlap: 'skip' });
    clock.advance(10_100);
    await scheduler.poke();
    const [slowRun] = await runsOf(slow.id);
    await waitRun(slow.id, slowRun?.id, ['running']);
    clock.advance(10_000);
    await scheduler.poke();
    const [skippedRun] = await runsOf(slow.id);
    expect(skippedRun?.status).toBe('skipped');
    await h.request('POST', `/v1/sessions/${slowRun?.session_id}/interrupt`, { body: {} });
    await waitRun(slow.id, slowRun?.id, ['cancelled']);
    await h.request('POST', `/v1/schedules/${slow.id}`, { body: { enabled: false } });

    // Failed (timeout) after waiting for a client result: action_required names the schedule.
    const waiting = await create({
      agent_id: toolAgentId,
      cron: '0 0 1 1 *',
      enabled: false,
      timeout_seconds: 5,
      input: 'call get_weather {"city":"Oslo"}',
    });
    const manual = json(await h.request('POST', `/v1/schedules/${waiting.id}/run`, { body: {} }));
    await waitUntil(
      async () =>
        json(await h.request('GET', `/v1/schedules/${waiting.id}/runs/${manual.id}`)).required_actions.length > 0
          ? true
          : null,
      { what: 'a pending client call' },
    );
    clock.advance(6_000);
    await scheduler.poke();
    const timedOut = await waitRun(waiting.id, manual.id, TERMINAL_STATUSES);
    expect(timedOut.status).toBe('failed');

    const mine = () =>
      receiver.received
        .filter((request) => request.path === `/schedules/${dialect}`)
        .map((request) => verified(endpoint.signing_secret, request));
    const expected: [string, string, string][] = [
      ['schedule.run.created', done.id, completedRun?.id],
      ['schedule.run.running', done.id, completedRun?.id],
      ['schedule.run.completed', done.id, completedRun?.id],
      ['schedule.run.skipped', slow.id, skippedRun?.id],
      ['schedule.run.cancelled', slow.id, slowRun?.id],
      ['schedule.run.created', waiting.id, manual.id],
      ['schedule.run.failed', waiting.id, manual.id],
    ];
    await receiver.waitFor(
      () =>
        expected.every(([type, , id]) => mine().some((event) => event.type === type && event.data.id === id)) &&
        mine().some((event) => event.type === 'agent.session.action_required'),
      'every schedule event',
    );
    for (const [type, scheduleId, id] of expected) {
      const event = mine().find((candidate) => candidate.type === type && candidate.data.id === id);
      expect(event?.data, type).toMatchObject({ id, schedule_id: scheduleId });
    }
    const running = mine().find((event) => event.type === 'schedule.run.running' && event.data.id === completedRun?.id);
    expect(running?.data).toMatchObject({ session_id: completedRun?.session_id, turn_id: completedRun?.turn_id });
    const action = mine().find((event) => event.type === 'agent.session.action_required');
    expect(action?.data).toMatchObject({
      id: timedOut.session_id,
      schedule_id: waiting.id,
      schedule_run_id: manual.id,
      required_action: { type: 'function_call', name: 'get_weather' },
    });
    // The run named by a notification is retrievable at the route the spec gives.
    const fetched = await h.request('GET', `/v1/schedules/${done.id}/runs/${completedRun?.id}`);
    expect(json(fetched)).toMatchObject({ object: 'schedule.run', status: 'completed' });
  });
});
