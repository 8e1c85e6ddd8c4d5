/**
 * The Session SSE stream over real HTTP: framing, ordering, deltas, heartbeats, Last-Event-ID replay,
 * isolation, and disconnection of a client that stops reading.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterCommit, lastEventSeq, writeEvents } from '../src/domain/outbox.ts';
import { WAIT_MS } from './helpers/deadlines.ts';
import { waitUntil } from './helpers/fixtures.ts';
import { createHarness, dialects, type Harness, json } from './helpers/harness.ts';

interface Frame {
  id: string;
  event: Record<string, any>;
}

/** Reads SSE frames (and comments) from a fetch response until `until` says stop (or WAIT_MS passes). */
async function readFrames(response: Response, until: (frames: Frame[], comments: string[]) => boolean) {
  const reader = response.body?.getReader();
  if (reader === undefined) throw new Error('no body');
  const decoder = new TextDecoder();
  const frames: Frame[] = [];
  const comments: string[] = [];
  let buffer = '';
  const deadline = setTimeout(() => void reader.cancel(), WAIT_MS);
  try {
    while (!until(frames, comments)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let index = buffer.indexOf('\n\n');
      while (index !== -1) {
        const block = buffer.slice(0, index);
        buffer = buffer.slice(index + 2);
        if (block.startsWith(':')) comments.push(block.slice(1).trim());
        else {
          const id = /^id: (.*)$/m.exec(block)?.[1] ?? '';
          const data = block
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice(6));
          expect(data).toHaveLength(1);
          frames.push({ id, event: JSON.parse(data[0] ?? '{}') });
        }
        index = buffer.indexOf('\n\n');
      }
    }
  } finally {
    clearTimeout(deadline);
    await reader.cancel().catch(() => undefined);
  }
  return { frames, comments };
}

describe.each(dialects())('session stream (%s)', (dialect) => {
  let h: Harness;
  let base: string;
  let agentId: string;
  beforeAll(async () => {
    h = await createHarness(dialect, { AGENTRY_SSE_HEARTBEAT_MS: '100' });
    base = await h.listen();
    agentId = json(await h.request('POST', '/v1/agents', { body: { name: 'streamer' } })).agent.id;
  });
  afterAll(() => h.close());

  const newSession = async () =>
    json(await h.request('POST', '/v1/sessions', { body: { agentId } })).session.id as string;
  const open = (sessionId: string, headers: Record<string, string> = {}, key = h.key) =>
    fetch(`${base}/v1/sessions/${sessionId}/stream`, { headers: { authorization: `Bearer ${key}`, ...headers } });
  const submit = (sessionId: string, text: string, key = `k-${Math.random()}`) =>
    h.request('POST', `/v1/sessions/${sessionId}/messages`, {
      body: { parts: [{ type: 'text', text }] },
      headers: { 'idempotency-key': key },
    });

  it('streams a turn: events in order, text deltas as they come, one JSON object per data line', async () => {
    const sessionId = await newSession();
    const response = await open(sessionId);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reading = readFrames(response, (frames) => frames.some((f) => f.event.kind === 'message.completed'));
    await submit(sessionId, 'The quick brown fox jumps over the lazy dog');
    const { frames, comments } = await reading;
    expect(comments).toContain('connected');
    const kinds = frames.map((f) => f.event.kind);
    expect(kinds[0]).toBe('message.created');
    expect(kinds.indexOf('message.delta')).toBeGreaterThan(kinds.indexOf('message.created'));
    expect(kinds.lastIndexOf('message.delta')).toBeLessThan(kinds.indexOf('message.completed'));
    const deltas = frames.filter((f) => f.event.kind === 'message.delta');
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(deltas.map((f) => f.event.data.text).join('')).toBe('The quick brown fox jumps over the lazy dog');
    for (const frame of frames) expect(frame.event.session_id).toBe(sessionId);
    // Persisted events carry their sequence as frame id; deltas are numbered after the last one.
    const persisted = frames.filter((f) => f.event.kind !== 'message.delta').map((f) => Number(f.id));
    expect(persisted).toEqual([...persisted].sort((a, b) => a - b));
    for (const delta of deltas) expect(delta.id).toMatch(/^\d+\.\d+$/);
    expect(frames.find((f) => f.event.kind === 'message.completed')?.event.data.response.parts[0].text).toBe(
      'The quick brown fox jumps over the lazy dog',
    );
  });

  it('sends heartbeat comments', async () => {
    const sessionId = await newSession();
    const heartbeats = (comments: string[]) => comments.filter((comment) => comment === 'heartbeat').length;
    // On an idle session nothing but heartbeats (every 100 ms here) keeps the stream talking.
    const { frames, comments } = await readFrames(await open(sessionId), (_, seen) => heartbeats(seen) >= 2);
    expect(heartbeats(comments)).toBeGreaterThanOrEqual(2);
    expect(frames).toEqual([]);
  });

  it('replays missed persisted events after Last-Event-ID, then continues live', async () => {
    const sessionId = await newSession();
    const first = await submit(sessionId, 'first');
    const firstId = json(first).id;
    // Wait for completion through the API, with no stream open.
    await waitUntil(
      async () => {
        const state = json(await h.request('GET', `/v1/sessions/${sessionId}/messages/${firstId}`)).message.status;
        return state === 'completed' ? true : null;
      },
      { what: 'the first message to complete', everyMs: 25 },
    );
    const all = await readFrames(await open(sessionId, { 'last-event-id': '0' }), (frames) =>
      frames.some((f) => f.event.kind === 'message.completed'),
    );
    expect(all.frames[0]?.id).toBe('1');
    expect(all.frames.every((f) => f.event.kind !== 'message.delta')).toBe(true);
    const middle = Number(all.frames[2]?.id);
    const resumed = await open(sessionId, { 'last-event-id': `${middle}.4` });
    const reading = readFrames(
      resumed,
      (frames) => frames.filter((f) => f.event.kind === 'message.completed').length === 2,
    );
    await submit(sessionId, 'second');
    const { frames } = await reading;
    expect(Number(frames[0]?.id)).toBe(middle + 1);
    const ids = frames.filter((f) => !f.id.includes('.')).map((f) => Number(f.id));
    expect(new Set(ids).size).toBe(ids.length);
    expect(
      frames.filter((f) => f.event.kind === 'message.completed').map((f) => f.event.data.response.parts[0].text),
    ).toEqual(['first', 'second']);
  });

  it('reads persisted events that never arrived live from the database, in order, before a newer one', async () => {
    const sessionId = await newSession();
    const { promise: started, resolve: connected } = Promise.withResolvers<void>();
    const reading = readFrames(await open(sessionId), (frames, comments) => {
      if (comments.includes('connected')) connected();
      return frames.length >= 3;
    });
    await started;
    const db = h.deps.storage.db;
    const { org_id: orgId } = await db
      .selectFrom('sessions')
      .select('org_id')
      .where('id', '=', sessionId)
      .executeTakeFirstOrThrow();
    const base = await lastEventSeq(db, sessionId);
    const write = () =>
      db
        .transaction()
        .execute((trx) =>
          writeEvents(trx, { orgId, sessionId, now: Date.now() }, [
            { kind: 'session.status', data: { status: 'idle', previous: 'idle' } },
          ]),
        );
    // Committed but never published, as when their publisher lost Redis or died right after the commit.
    await write();
    await write();
    afterCommit(h.deps.bus, sessionId, await write(), false);
    const { frames } = await reading;
    expect(frames.map((frame) => frame.id)).toEqual([base + 1, base + 2, base + 3].map(String));
    expect(frames.map((frame) => frame.event.seq)).toEqual([base + 1, base + 2, base + 3]);
  });

  it('rejects a malformed Last-Event-ID, a foreign session and a missing key', async () => {
    const sessionId = await newSession();
    const bad = await open(sessionId, { 'last-event-id': 'abc' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Record<string, any>).error.param).toBe('last-event-id');
    const other = await h.createOrg(`stream-${dialect}`);
    expect((await open(sessionId, {}, other.key)).status).toBe(404);
    expect((await fetch(`${base}/v1/sessions/${sessionId}/stream`)).status).toBe(401);
  });

  it('disconnects a client that stops reading instead of buffering without bound', async () => {
    const sessionId = await newSession();
    const before = h.hub.size();
    const url = new URL(base);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`GET /v1/sessions/${sessionId}/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.key}\r\n\r\n`);
    let received = 0;
    socket.once('data', (chunk: Buffer) => {
      received += chunk.length;
      socket.pause(); // read the headers, then never again
    });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await waitUntil(async () => (h.hub.size() === before + 1 ? true : null), {
      what: 'the stream to be subscribed',
      everyMs: 20,
    });
    // Each message produces several MB of events (deltas plus the completed text); more are sent only while the
    // reader that never reads is still subscribed.
    const parts = Array.from({ length: 32 }, () => ({ type: 'text', text: 'x'.repeat(100_000) }));
    let sent = 0;
    await waitUntil(
      async () => {
        if (h.hub.size() === before) return true;
        const turns = json(await h.request('GET', `/v1/sessions/${sessionId}/messages`)).data as { status: string }[];
        if (sent < 4 && turns.every((turn) => turn.status === 'completed')) {
          await h.request('POST', `/v1/sessions/${sessionId}/messages`, {
            body: { parts },
            headers: { 'idempotency-key': `big-${sent}` },
          });
          sent += 1;
        }
        return null;
      },
      { what: 'the reader that never reads to be dropped', everyMs: 20 },
    );
    expect(h.hub.size()).toBe(before);
    socket.destroy();
    await closed;
    expect(received).toBeGreaterThan(0);
  });
});
