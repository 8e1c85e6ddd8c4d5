/**
 * The long-poll `GET /v1/sessions/{id}/messages/{messageId}?wait=` over real HTTP, once per dialect: it answers
 * as soon as the message settles (terminal or requires_action), reading the message only before waiting and
 * once after the event that settled it, or when the wait ends with the message as it is; bad values are a 400
 * naming `wait`; another organization's message is a 404. Without live events (a bus outage) it re-reads every
 * `recheckMs` where one is set (cluster mode). Cluster mode over HTTP is covered in cluster.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StreamHub } from '../src/bus/live-hub.ts';
import type { Message } from '../src/domain/turns/message-types.ts';
import { waitForMessage } from '../src/domain/turns/message-wait.ts';
import { ASK_USER_QUESTION_SERVER, flows, httpClient, type Json } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness } from './helpers/harness.ts';

describe.each(dialects())('message long-poll (%s)', (dialect) => {
  let h: Harness;
  const flow = flows(() => h);
  let api: ReturnType<typeof httpClient>;
  let agentId: string;
  /** Reads of a message by the route, counted while `counting`. */
  let reads = 0;

  beforeAll(async () => {
    h = await createHarness(dialect);
    api = httpClient(await h.listen(), h.key);
    agentId = await flow.createAgent({ mcpServers: [ASK_USER_QUESTION_SERVER] });
    const get = h.deps.messages.get;
    h.deps.messages.get = (...args) => {
      reads += 1;
      return get(...args);
    };
  });
  afterAll(() => h.close());

  const url = (sessionId: string, messageId: string, wait: string) =>
    `/v1/sessions/${sessionId}/messages/${messageId}?wait=${wait}`;

  /** Submits a script to a new session, then long-polls it; returns the answer, its time and the reads it made. */
  async function waited(script: string, wait: string) {
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, script);
    reads = 0;
    const started = performance.now();
    const response = await api<{ message: Json }>('GET', url(sessionId, accepted.id, wait));
    const ms = performance.now() - started;
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    return { sessionId, messageId: accepted.id, message: response.body.message, ms, reads };
  }

  it('answers as soon as the message completes, with the plain GET answer, reading it twice at most', async () => {
    // Several events before the end (running, deltas of a long reply): none of them costs a read.
    const reply = 'A reply long enough to arrive in several deltas, '.repeat(8).trim();
    const { sessionId, messageId, message, ms, reads } = await waited(`sleep 400\n${reply}`, '20');
    expect(message.status).toBe('completed');
    expect(message.response.parts[0].text).toBe(reply);
    expect(message).toEqual(await flow.getMessage(sessionId, messageId));
    expect(ms).toBeGreaterThanOrEqual(350);
    expect(ms).toBeLessThan(10_000);
    expect(reads).toBeLessThanOrEqual(2);
  });

  it('answers as soon as the message requires action, with its actions', async () => {
    const { message, ms, reads } = await waited('sleep 300\nask Which colour?', '20');
    expect(message.status).toBe('requires_action');
    expect(message.requiredActions).toEqual([
      expect.objectContaining({ type: 'ask_user_question', question: 'Which colour?' }),
    ]);
    expect(ms).toBeLessThan(10_000);
    expect(reads).toBeLessThanOrEqual(2);
  });

  it('answers a failed turn as soon as it fails', async () => {
    const { message } = await waited('sleep 200\nfail the model broke', '20');
    expect(message.status).toBe('failed');
  });

  it('answers at once when the message is already settled, and without wait as before', async () => {
    const { sessionId, messageId } = await waited('done', '20');
    reads = 0;
    const again = await api<{ message: Json }>('GET', url(sessionId, messageId, '30'));
    expect(again.body.message.status).toBe('completed');
    expect(reads).toBe(1);
    const plain = await api<{ message: Json }>('GET', `/v1/sessions/${sessionId}/messages/${messageId}`);
    expect(plain.body).toEqual(again.body);
  });

  it('ends the wait with the message as it is: still running', async () => {
    const { sessionId, message, ms } = await waited('sleep 5000\nlate', '0.5');
    expect(['queued', 'running']).toContain(message.status);
    expect(ms).toBeGreaterThanOrEqual(450);
    expect(ms).toBeLessThan(4000);
    await h.request('POST', `/v1/sessions/${sessionId}/interrupt`);
  });

  it.each(['-1', '61', 'abc', '', '1e9'])('rejects wait=%s naming wait', async (value) => {
    const { sessionId, messageId } = await waited('done', '0');
    const response = await api<{ error: Json }>('GET', url(sessionId, messageId, value));
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'validation_error', param: 'wait' });
  });

  it("is a 404 for another organization's message, without waiting", async () => {
    const sessionId = await flow.createSession(agentId);
    const accepted = await flow.submit(sessionId, 'sleep 3000\nslow');
    const other = await h.createOrg('other');
    const otherApi = httpClient(await h.listen(), other.key);
    const started = performance.now();
    const response = await otherApi<{ error: Json }>('GET', url(sessionId, accepted.id, '10'));
    expect(response.status).toBe(404);
    expect(performance.now() - started).toBeLessThan(2000);
    await h.request('POST', `/v1/sessions/${sessionId}/interrupt`);
  });
});

describe('message long-poll without live events (a bus outage in cluster mode)', () => {
  /** A hub whose bus delivers nothing: subscriptions never fire. */
  const silentHub = (): StreamHub => ({
    subscribe: () => () => undefined,
    follow: () => ({ start: () => undefined, close: () => undefined }),
    size: () => 0,
    track: () => () => undefined,
    close: () => undefined,
  });

  it('re-reads every recheckMs, so a settled message is answered within about that', async () => {
    let reads = 0;
    const settledAt = performance.now() + 300;
    const read = async () => {
      reads += 1;
      return { status: performance.now() >= settledAt ? 'completed' : 'running' } as Message;
    };
    const started = performance.now();
    const message = await waitForMessage({ hub: silentHub(), read, recheckMs: 100 }, 's', 'm', 20_000);
    expect(message.status).toBe('completed');
    expect(performance.now() - started).toBeLessThan(3000);
    // One read before waiting and one per recheck: a few, not one per millisecond.
    expect(reads).toBeGreaterThanOrEqual(2);
    expect(reads).toBeLessThan(30);
  });

  it('without rechecks (the in-process bus loses nothing) waits for an event or the end of the wait', async () => {
    let reads = 0;
    const read = async () => {
      reads += 1;
      return { status: 'running' } as Message;
    };
    const started = performance.now();
    const message = await waitForMessage({ hub: silentHub(), read, recheckMs: null }, 's', 'm', 400);
    expect(message.status).toBe('running');
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    expect(reads).toBe(2);
  });
});
