/**
 * Webhook delivery throughput: events already in the outbox are fanned out to several endpoints and delivered,
 * signed, to a local receiver (a child process, so it never shares the dispatcher's event loop), end to end:
 * fan-out, claims, signing, the HTTP exchange through the egress guard, and the recorded outcomes. Reported:
 *
 * - deliveries per second, SQLite (goal: at least 1,000) and, with BENCH_POSTGRES=1 or DATABASE_URL, Postgres;
 * - the share of that time spent computing signatures;
 * - baseline: the same number of unsigned POSTs through the same egress guard at the same concurrency, with no
 *   database at all; the ratio says how much of the raw HTTP rate the durable pipeline keeps.
 */
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../src/config.ts';
import { buildDispatcher } from '../src/deps.ts';
import { WEBHOOK_EVENT_TYPES } from '../src/domain/outbox.ts';
import { postPinned } from '../src/lib/egress.ts';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import {
  type BenchResult,
  type Defer,
  positiveInt,
  REPO_ROOT,
  runStandalone,
  type Variant,
  variants,
  withCleanup,
} from './support.ts';
import { openCore } from './world.ts';

export type { BenchResult } from './support.ts';

const GOAL_PER_SECOND = 1000;
const ENDPOINTS = 4;
const DELIVERY_TIMEOUT_MS = 120_000;

function log(message: string): void {
  process.stderr.write(`[bench:webhooks] ${message}\n`);
}

// The receiver: answers every POST with 204 once its body is read, like a well-behaved webhook consumer.
const RECEIVER = `
import { createServer } from 'node:http';
const server = createServer((request, response) => {
  request.resume();
  request.on('end', () => { response.writeHead(204); response.end(); });
});
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

async function startReceiver(defer: Defer): Promise<ServerProcess> {
  const receiver = await startServer({
    name: 'receiver',
    args: ['--input-type=module', '-e', RECEIVER],
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '' },
    timeoutMs: 10_000,
  });
  defer(() => stopProcess(receiver.child));
  return receiver;
}

/** A typical event body: the size of a real agent.session.* envelope. */
function eventData(i: number): string {
  return JSON.stringify({ id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, session_id: 'bench' });
}

async function pipeline(variant: Variant, receiverUrl: string, events: number): Promise<BenchResult[]> {
  return withCleanup(async (defer) => {
    const { deps, orgId } = await openCore(variant, 'webhooks', { AGENTRY_ALLOW_INSECURE_DESTINATIONS: 'true' }, defer);
    for (let i = 0; i < ENDPOINTS; i++) {
      await deps.webhooks.endpoints.create(orgId, {
        name: `bench-${i}`,
        url: `${receiverUrl}/hook/${i}`,
        event_types: [...WEBHOOK_EVENT_TYPES],
      });
    }
    // The outbox as the engine leaves it: undispatched events.
    const now = Date.now();
    const db = deps.storage.db;
    for (let i = 0; i < events; i += 500) {
      const rows = [];
      for (let j = i; j < Math.min(events, i + 500); j++) {
        rows.push({
          id: `evt_${randomBytes(16).toString('hex')}`,
          org_id: orgId,
          type: 'agent.session.turn.completed',
          data: eventData(j),
          created_at: now + j,
          dispatched_at: null,
        });
      }
      await db.insertInto('webhook_events').values(rows).execute();
    }
    const expected = events * ENDPOINTS;
    const name = `webhooks.${variant.kind}`;
    log(`${name}: ${events} events x ${ENDPOINTS} endpoints = ${expected} deliveries`);

    const dispatcher = buildDispatcher(deps);
    const started = performance.now();
    dispatcher.start();
    defer(() => dispatcher.stop(5000));
    const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
    while (dispatcher.stats().delivered < expected) {
      if (Date.now() > deadline) {
        throw new Error(`${name}: only ${dispatcher.stats().delivered} of ${expected} delivered in time`);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const elapsedMs = performance.now() - started;
    const stats = dispatcher.stats();
    const recorded = await db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'delivered')
      .executeTakeFirstOrThrow();
    if (Number(recorded.n) !== expected || stats.attempts !== expected) {
      throw new Error(`${name}: ${recorded.n} recorded and ${stats.attempts} attempts for ${expected} deliveries`);
    }
    const perSecond = (expected / elapsedMs) * 1000;
    log(
      `${name}: ${perSecond.toFixed(0)} deliveries/s, signing ${stats.signingMs.toFixed(1)} ms of ${elapsedMs.toFixed(0)} ms`,
    );
    return [
      {
        name: `${name}.throughput`,
        value: perSecond,
        unit: 'deliveries/s',
        ...(variant.kind === 'sqlite' ? { goal: `value >= ${GOAL_PER_SECOND}` } : {}),
      },
      { name: `${name}.signing_share`, value: (stats.signingMs / elapsedMs) * 100, unit: '% of time' },
    ];
  });
}

/** Unsigned POSTs of a same-sized body through the egress guard, `concurrency` at a time, no database. */
async function rawHttp(receiverUrl: string, requests: number, concurrency: number): Promise<number> {
  const body = `{"id":"evt_${'0'.repeat(32)}","object":"event","created_at":1,"type":"agent.session.turn.completed","data":${eventData(0)}}`;
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < requests) {
      const i = next++;
      const response = await postPinned(`${receiverUrl}/hook/${i % ENDPOINTS}`, body, {
        headers: { 'content-type': 'application/json' },
        timeoutMs: 10_000,
        allowInsecure: true,
        maxResponseBytes: 1024,
      });
      if (response.status !== 204) throw new Error(`receiver answered ${response.status}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return (requests / (performance.now() - started)) * 1000;
}

export async function runWebhooksBench(): Promise<BenchResult[]> {
  const events = positiveInt('BENCH_WEBHOOK_EVENTS', 2500);
  return withCleanup(async (defer) => {
    const receiver = await startReceiver(defer);
    const config = loadConfig({});
    // The dispatcher's concurrency in this setup: every endpoint at its per-endpoint limit, within the global one.
    const concurrency = Math.min(config.webhookConcurrency, config.webhookEndpointConcurrency * ENDPOINTS);
    await rawHttp(receiver.url, 500, concurrency); // warm-up
    const baseline = await rawHttp(receiver.url, events * ENDPOINTS, concurrency);
    log(`baseline: ${baseline.toFixed(0)} unsigned POSTs/s at concurrency ${concurrency}`);
    const results: BenchResult[] = [];
    for (const variant of variants()) {
      const [throughput, ...rest] = await pipeline(variant, receiver.url, events);
      if (throughput !== undefined) results.push({ ...throughput, baseline, ratio: throughput.value / baseline });
      results.push(...rest);
    }
    return results;
  });
}

if (import.meta.main) await runStandalone(runWebhooksBench);
