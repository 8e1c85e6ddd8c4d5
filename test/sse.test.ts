/**
 * The streaming helper every SSE route uses (src/http/sse.ts), over real HTTP on loopback: framing, heartbeats,
 * the cut-off of a client that does not read, a disconnect that stops the producer, shutdown, the open-stream
 * gauge, and the parsing of Last-Event-ID.
 */
import { connect } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalBus } from '../src/bus/bus.ts';
import { createStreamHub, type StreamHub } from '../src/bus/live-hub.ts';
import {
  MAX_BUFFERED_BYTES,
  resumeAfter,
  type SseDeps,
  type SseEnd,
  type SseStream,
  streamSse,
} from '../src/http/sse.ts';
import { createLogger } from '../src/logger.ts';
import { createMetrics } from '../src/observability/metrics.ts';
import type { Metrics } from '../src/observability/metrics-types.ts';
import { waitUntil } from './helpers/fixtures.ts';

const HEARTBEAT_MS = 40;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the SSE helper', () => {
  let app: FastifyInstance;
  let base: string;
  let hub: StreamHub;
  let metrics: Metrics;
  let deps: SseDeps;
  /** How each stream ended, by route. */
  const ends = new Map<string, SseEnd[]>();
  /** Producers of /forever that are still running. */
  let running = 0;
  let produced = 0;
  let slowBytes = 0;

  /** A route that streams with `produce` and records how the stream ended. */
  const route = (path: string, heartbeat: string | null, produce: (stream: SseStream) => Promise<void>) =>
    app.get(path, async (_request, reply) => {
      const end = await streamSse(reply, deps, { surface: 'tasks', heartbeat }, produce);
      ends.set(path, [...(ends.get(path) ?? []), end]);
      return reply;
    });

  async function* ticks(): AsyncGenerator<number> {
    running += 1;
    try {
      for (let n = 0; ; n++) {
        produced += 1;
        yield n;
        await sleep(5);
      }
    } finally {
      running -= 1;
    }
  }

  beforeAll(async () => {
    hub = createStreamHub(createLocalBus(), {
      // No feed is opened here: the hub only tracks the open streams, and never reads stored events.
      store: { after: async () => [], newest: async () => new Map() },
      logger: createLogger({ logLevel: 'silent' }),
      catchUpMs: 60_000,
      checkAlways: false,
    });
    metrics = createMetrics();
    deps = { metrics, live: hub, config: { sseHeartbeatMs: HEARTBEAT_MS } };
    app = Fastify();
    route('/frames', 'ping', async (stream) => {
      stream.comment('connected');
      stream.send({ event: 'greeting', data: { text: 'hello' } });
      stream.send({ id: '7', data: 'two\nlines' });
      stream.send({ event: 'done', id: '8.1', data: { ok: true } });
      stream.data('[DONE]');
    });
    route('/idle', 'beat', async (stream) => {
      await stream.ended;
    });
    route('/quiet', null, async (stream) => {
      await sleep(HEARTBEAT_MS * 4);
      stream.data('end');
    });
    route('/forever', 'ping', (stream) => stream.pipe(ticks(), (n) => stream.send({ id: String(n), data: { n } })));
    route('/flood', 'ping', async (stream) => {
      const chunk = { text: 'x'.repeat(64 * 1024) };
      // Far more than any socket buffer holds: only the bound can stop this while the client does not read.
      while (slowBytes < 256 * MAX_BUFFERED_BYTES && stream.send({ data: chunk })) {
        slowBytes += chunk.text.length;
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
    route('/broken', 'ping', async (stream) => {
      stream.send({ data: { before: 'the failure' } });
      await sleep(20);
      throw new Error('the producer failed');
    });
    base = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    hub.close();
    await app.close();
  });

  /** Open streams of the test surface, as /metrics would report them. */
  const open = async () => {
    const { body } = await metrics.scrape();
    const line = body.split('\n').find((row) => row.startsWith('agentry_sse_streams_active{surface="tasks"}'));
    return Number(line?.split(' ')[1] ?? 0);
  };
  const settled = (path: string, count = 1) =>
    waitUntil(async () => ((ends.get(path)?.length ?? 0) >= count ? ends.get(path)?.at(-1) : null), {
      what: `a stream of ${path} to end`,
      everyMs: 10,
    });

  it('frames events, ids, text data and comments, with the event-stream headers', async () => {
    const response = await fetch(`${base}/frames`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(response.headers.get('cache-control')).toBe('no-cache, no-transform');
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    expect(response.headers.get('x-request-id')).toBeTruthy();
    expect(await response.text()).toBe(
      [
        ': connected\n',
        'event: greeting\ndata: {"text":"hello"}\n',
        'id: 7\ndata: two\ndata: lines\n',
        'event: done\nid: 8.1\ndata: {"ok":true}\n',
        'data: [DONE]\n',
        '',
      ].join('\n'),
    );
    expect(await settled('/frames')).toBe('done');
    expect(await open()).toBe(0);
  });

  it('sends the heartbeat comment at its interval, and none on a wire without one', async () => {
    const controller = new AbortController();
    const response = await fetch(`${base}/idle`, { signal: controller.signal });
    const reader = response.body?.getReader();
    if (reader === undefined) throw new Error('no body');
    let text = '';
    while ((text.match(/^: beat\n\n/gm) ?? []).length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toBe(': beat\n\n'.repeat(3));
    expect(await open()).toBe(1);
    controller.abort();
    expect(await settled('/idle')).toBe('client');
    expect(await open()).toBe(0);

    expect(await (await fetch(`${base}/quiet`)).text()).toBe('data: end\n\n');
  });

  it('stops the producer when the client disconnects', async () => {
    const controller = new AbortController();
    const response = await fetch(`${base}/forever`, { signal: controller.signal });
    const reader = response.body?.getReader();
    if (reader === undefined) throw new Error('no body');
    let text = '';
    while (!text.includes('id: 3\n')) text += new TextDecoder().decode((await reader.read()).value);
    expect(running).toBe(1);
    controller.abort();
    expect(await settled('/forever')).toBe('client');
    await waitUntil(async () => (running === 0 ? true : null), { what: 'the producer to stop', everyMs: 5 });
    const after = produced;
    await sleep(50);
    expect(produced).toBe(after);
    expect(await open()).toBe(0);
  });

  it('cuts off a client that does not read once the bound is buffered, instead of buffering on', async () => {
    const url = new URL(base);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.once('data', () => socket.pause()); // the headers, then never again
    socket.write('GET /flood HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(await settled('/flood')).toBe('slow');
    // What it sent before the cut-off is what the kernel's socket buffers took, plus at most the bound.
    expect(slowBytes).toBeLessThan(64 * MAX_BUFFERED_BYTES);
    expect(await open()).toBe(0);
    socket.resume();
    await closed;
  });

  it('ends open streams cleanly on shutdown', async () => {
    const response = await fetch(`${base}/idle`);
    const body = response.text();
    await waitUntil(async () => ((await open()) === 1 ? true : null), { what: 'the stream to open', everyMs: 10 });
    hub.close();
    // A clean end of the body (no error): the client reconnects elsewhere.
    expect(await body).toMatch(/^(: beat\n\n)*$/);
    expect(await settled('/idle', 2)).toBe('shutdown');
    expect(await open()).toBe(0);
  });

  it('cuts the connection of a producer that fails, so the stream does not look complete', async () => {
    const response = await fetch(`${base}/broken`);
    await expect(response.text()).rejects.toThrow();
    expect(await settled('/broken')).toBe('error');
    expect(await open()).toBe(0);
  });

  it('reads the persisted event to resume after from a Last-Event-ID', () => {
    expect(resumeAfter(undefined)).toBeNull();
    expect(resumeAfter('12')).toBe(12);
    expect(resumeAfter('12.3')).toBe(12);
  });
});
