/**
 * Legacy organization webhooks (/v1/webhooks, docs/legacy.md): validation, the per-organization limit, same-URL
 * updates, scopes, isolation, and task.* events of real Tasks received by a real local receiver with the
 * X-Webhook-Secret header, one attempt each (a failing receiver is not retried).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTaskNotifier } from '../src/deps.ts';
import type { TaskNotifier } from '../src/domain/tasks/task-notifier.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.ts';

type Json = Record<string, any>;

describe.each(dialects())('legacy webhooks (%s)', (dialect) => {
  let h: Harness;
  let strict: Harness;
  let notifier: TaskNotifier;
  let receiver: Receiver;

  beforeAll(async () => {
    [h, strict, receiver] = await Promise.all([
      createHarness(dialect, { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' }),
      createHarness(dialect),
      startReceiver(),
    ]);
    notifier = buildTaskNotifier(h.deps);
    notifier.start();
  });
  afterAll(async () => {
    await notifier?.stop();
    await Promise.all([h?.close(), strict?.close(), receiver?.close()]);
  });

  const bodies = (path: string) =>
    receiver.received.filter((entry) => entry.path === path).map((entry) => JSON.parse(entry.body) as Json);

  it('delivers task.created, running and completed with the secret, then a follow-up cycle', async () => {
    const org = await h.createOrg(`hooks-${randomUUID().slice(0, 8)}`);
    const created = await h.request('POST', '/v1/webhooks', {
      key: org.key,
      body: {
        url: `${receiver.url}/tasks`,
        events: ['task.created', 'task.running', 'task.completed', 'task.failed', 'task.canceled'],
        description: 'all task events',
        secret: 's3cret-value',
      },
    });
    expect(created.status).toBe(201);
    const hook = json(created);
    expect(hook).toEqual({
      id: expect.any(String),
      object: 'webhook',
      url: `${receiver.url}/tasks`,
      events: ['task.created', 'task.running', 'task.completed', 'task.failed', 'task.canceled'],
      description: 'all task events',
      hasSecret: true,
      isActive: true,
      createdAt: expect.any(String),
      lastTriggeredAt: null,
      failureCount: 0,
    });
    expect(JSON.stringify(hook)).not.toContain('s3cret-value');

    const task = json(await h.request('POST', '/v1/tasks', { key: org.key, body: { prompt: 'notify me' } }));
    await receiver.waitFor((all) => all.filter((entry) => entry.path === '/tasks').length >= 3, 'three events');
    const first = bodies('/tasks');
    expect(first.map((body) => body.event)).toEqual(['task.created', 'task.running', 'task.completed']);
    for (const body of first) {
      expect(body).toMatchObject({ id: expect.stringMatching(/^evt_/), data: { taskId: task.id } });
    }
    const requests = receiver.received.filter((entry) => entry.path === '/tasks');
    for (const request of requests) {
      expect(request.headers['x-webhook-secret']).toBe('s3cret-value');
      expect(request.headers['content-type']).toBe('application/json');
    }

    await h.request('POST', `/v1/tasks/${task.id}/prompts`, { key: org.key, body: { prompt: 'fail again broken' } });
    await receiver.waitFor((all) => all.filter((entry) => entry.path === '/tasks').length >= 5, 'the cycle');
    expect(
      bodies('/tasks')
        .map((body) => body.event)
        .slice(3),
    ).toEqual(['task.running', 'task.failed']);
    const after = json(await h.request('GET', `/v1/webhooks/${hook.id}`, { key: org.key }));
    expect(after.lastTriggeredAt).not.toBeNull();
    expect(after.failureCount).toBe(0);
  });

  it('sends only subscribed events, without a secret header when none is set', async () => {
    const org = await h.createOrg(`sub-${randomUUID().slice(0, 8)}`);
    await h.request('POST', '/v1/webhooks', {
      key: org.key,
      body: { url: `${receiver.url}/canceled`, events: ['task.canceled'] },
    });
    const task = json(await h.request('POST', '/v1/tasks', { key: org.key, body: { prompt: 'sleep 30000\nslow' } }));
    await h.request('POST', `/v1/tasks/${task.id}/cancel`, { key: org.key });
    await receiver.waitFor((all) => all.some((entry) => entry.path === '/canceled'), 'task.canceled');
    // Give the notifier a few more passes: nothing else may arrive.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const received = receiver.received.filter((entry) => entry.path === '/canceled');
    expect(received).toHaveLength(1);
    expect(JSON.parse(received[0]?.body ?? '{}')).toMatchObject({
      event: 'task.canceled',
      data: { status: 'canceled' },
    });
    expect(received[0]?.headers['x-webhook-secret']).toBeUndefined();
  });

  it('makes one attempt only: a failing receiver is not retried and the failure is counted', async () => {
    const org = await h.createOrg(`fail-${randomUUID().slice(0, 8)}`);
    const hook = json(
      await h.request('POST', '/v1/webhooks', {
        key: org.key,
        body: { url: `${receiver.url}/failing`, events: ['task.created'] },
      }),
    );
    receiver.answer = (request) => (request.path === '/failing' ? 500 : 200);
    try {
      await h.request('POST', '/v1/tasks', { key: org.key, body: { prompt: 'x' } });
      await receiver.waitFor((all) => all.some((entry) => entry.path === '/failing'), 'the attempt');
      const counted = await waitUntil(
        async () => {
          const current = json(await h.request('GET', `/v1/webhooks/${hook.id}`, { key: org.key }));
          return current.failureCount === 1 ? current : null;
        },
        { what: 'the failure to be counted' },
      );
      expect(counted.failureCount).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(receiver.received.filter((entry) => entry.path === '/failing')).toHaveLength(1);
    } finally {
      receiver.answer = () => 200;
    }
  });

  it('limits an organization to three webhooks; the same URL updates instead', async () => {
    const org = await h.createOrg(`limit-${randomUUID().slice(0, 8)}`);
    const make = (path: string, events: string[] = ['task.created']) =>
      h.request('POST', '/v1/webhooks', { key: org.key, body: { url: `${receiver.url}${path}`, events } });
    const one = json(await make('/a'));
    await make('/b');
    await make('/c');
    const fourth = await make('/d');
    expect(fourth.status).toBe(400);
    expect(json(fourth).error.code).toBe('limit_exceeded');
    const again = await make('/a', ['task.failed']);
    expect(again.status).toBe(201);
    expect(json(again)).toMatchObject({ id: one.id, events: ['task.failed'] });
    const list = json(await h.request('GET', '/v1/webhooks', { key: org.key }));
    expect(list.data).toHaveLength(3);
    expect((await h.request('DELETE', `/v1/webhooks/${one.id}`, { key: org.key })).status).toBe(204);
    expect((await h.request('GET', `/v1/webhooks/${one.id}`, { key: org.key })).status).toBe(404);
    expect((await make('/d')).status).toBe(201);
  });

  it('keeps organizations apart and checks scopes', async () => {
    const mine = json(
      await h.request('POST', '/v1/webhooks', { body: { url: `${receiver.url}/mine`, events: ['task.created'] } }),
    );
    const other = await h.createOrg(`iso-${randomUUID().slice(0, 8)}`);
    expect((await h.request('GET', `/v1/webhooks/${mine.id}`, { key: other.key })).status).toBe(404);
    expect((await h.request('DELETE', `/v1/webhooks/${mine.id}`, { key: other.key })).status).toBe(404);
    expect(json(await h.request('GET', '/v1/webhooks', { key: other.key })).data).toEqual([]);
    const tasksOnly = await h.deps.orgs.createKey(other.orgId, ['tasks:read', 'tasks:write']);
    expect((await h.request('GET', '/v1/webhooks', { key: tasksOnly })).status).toBe(403);
    await h.request('DELETE', `/v1/webhooks/${mine.id}`);
  });

  it.each([
    [{ events: ['task.created'] }, 'url'],
    [{ url: 'https://example.com/x' }, 'events'],
    [{ url: 'https://example.com/x', events: [] }, 'events'],
    [{ url: 'https://example.com/x', events: ['agent.session.created'] }, 'events'],
    [{ url: 'https://example.com/x', events: ['task.created'], secret: '' }, 'secret'],
    [{ url: 'https://example.com/x', events: ['task.created'], secret: 'has space' }, 'secret'],
    [{ url: 'https://example.com/x', events: ['task.created'], extra: 1 }, 'extra'],
    [{ url: 'http://example.com/x', events: ['task.created'] }, 'url'],
    [{ url: 'https://127.0.0.1/x', events: ['task.created'] }, 'url'],
    [{ url: 'not a url', events: ['task.created'] }, 'url'],
  ])('rejects %j naming %s (strict destinations)', async (body, param) => {
    const response = await strict.request('POST', '/v1/webhooks', { body });
    expect(response.status).toBe(400);
    expect(json(response).error).toMatchObject({ code: 'validation_error' });
    expect(String(json(response).error.param)).toContain(param);
  });
});
