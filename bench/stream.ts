/**
 * Session streams (GET /v1/sessions/{id}/stream) held by one server process:
 *
 * - idle streams: resident size of the server child before and after opening BENCH_STREAMS (5,000) idle
 *   streams, in KB per stream, against a bare node:http server holding the same number of open event-stream
 *   responses (headers, one comment, a heartbeat timer each) measured in the same run;
 * - fan-out: with those streams still open, BENCH_FANOUT (1,000) more streams on ONE session; one submitted
 *   message, and the time from sending the submit until each subscriber has read its `message.created` frame
 *   (p50 and the last one), against the same measurement with a single subscriber.
 *
 * Both servers run as children (started with --expose-gc and bench/gc-on-signal.ts, so a full GC runs before
 * each resident-size sample); this process is the client. On a shared 2-core machine the client's own reading
 * of 1,000 sockets is part of the fan-out time: the figure is an upper bound of the server's share.
 */
import { readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type ServerProcess, startServer, stopProcess } from './children.ts';
import {
  type BenchResult,
  type Defer,
  generateApiKey,
  percentile,
  positiveInt,
  REPO_ROOT,
  runStandalone,
  serverEnv,
  tempDir,
  withCleanup,
} from './support.ts';

export type { BenchResult } from './support.ts';

const START_TIMEOUT_MS = 20_000;
const OPEN_TIMEOUT_MS = 20_000;
const ROUND_TIMEOUT_MS = 30_000;
/** Streams being opened at once: well under the listen backlog, so no connection is refused or reset. */
const OPEN_CONCURRENCY = 64;
const CREATE_CONCURRENCY = 8;
/** Streams opened and closed before the first sample, so lazily compiled code is in both samples. */
const WARMUP_STREAMS = 200;
const SETTLE_MS = 500;

const GC_PRELOAD = pathToFileURL(join(REPO_ROOT, 'bench', 'gc-on-signal.ts')).href;

// Holds each request open as an event stream the way a minimal SSE server must: headers, a first comment and a
// heartbeat timer per connection. Prints the same "listening on" line as Agentry so one helper starts both.
const BASELINE_SCRIPT = `
import http from 'node:http';
const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  res.write(': connected\\n\\n');
  const beat = setInterval(() => res.write(': heartbeat\\n\\n'), 15000);
  res.on('close', () => clearInterval(beat));
});
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

function log(message: string): void {
  process.stderr.write(`[bench:stream] ${message}\n`);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
}

type FrameHandler = (event: Record<string, unknown>, at: number) => void;

interface OpenStream {
  /** Called with each `data:` frame's JSON and the time it was read; null to ignore frames. */
  onFrame: FrameHandler | null;
  close(): void;
}

/** Streams that ended without being closed by the bench; any at all makes the run's figures suspect. */
let unexpectedEnds = 0;

function openStream(agent: http.Agent, url: string, headers: Record<string, string>): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    let opened = false;
    let closing = false;
    const request = http.request(url, { agent, headers: { ...headers, accept: 'text/event-stream' } });
    const stream: OpenStream = {
      onFrame: null,
      close() {
        closing = true;
        request.destroy();
      },
    };
    const timer = setTimeout(() => {
      request.destroy();
      reject(new Error(`GET ${url}: no ": connected" within ${OPEN_TIMEOUT_MS} ms`));
    }, OPEN_TIMEOUT_MS);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      if (!opened) reject(error);
      else if (!closing) unexpectedEnds += 1;
    };
    request.on('error', fail);
    request.on('response', (response) => {
      response.setEncoding('utf8');
      if (response.statusCode !== 200) {
        let body = '';
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        response.on('end', () => fail(new Error(`GET ${url} answered ${response.statusCode}: ${body}`)));
        return;
      }
      let buffer = '';
      response.on('data', (chunk: string) => {
        const at = performance.now();
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!opened && frame.startsWith(': connected')) {
            opened = true;
            clearTimeout(timer);
            resolve(stream);
            continue;
          }
          const data = frame.split('\n').find((line) => line.startsWith('data: '));
          if (data === undefined || stream.onFrame === null) continue;
          const parsed: unknown = JSON.parse(data.slice('data: '.length));
          if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
            stream.onFrame(Object.fromEntries(Object.entries(parsed)), at);
          }
        }
      });
      response.on('close', () => {
        if (opened && !closing) unexpectedEnds += 1;
      });
    });
    request.end();
  });
}

/** Runs `task(0..count-1)` with at most `concurrency` in flight; results in index order. */
async function pool<T>(count: number, concurrency: number, task: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array<T>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const index = next;
      next += 1;
      results[index] = await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return results;
}

interface MemorySample {
  /** VmRSS of the child, from /proc. */
  rssKb: number;
  /** V8 heap in use plus memory held by Buffers and other objects outside the heap, after a full GC. */
  heapKb: number;
}

async function rssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(status);
  if (match?.[1] === undefined) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(match[1]);
}

/**
 * Memory of the child after a full GC: SIGUSR2 makes it collect and write process.memoryUsage() to its report
 * file (see bench/gc-on-signal.ts); VmRSS is read once it has, and after a moment to settle.
 */
async function settledMemory(server: ServerProcess, reportPath: string): Promise<MemorySample> {
  const pid = server.child.pid;
  if (pid === undefined) throw new Error(`${server.name} has no pid`);
  await rm(reportPath, { force: true });
  server.child.kill('SIGUSR2');
  const deadline = performance.now() + 10_000;
  let text: string | null = null;
  while (text === null) {
    await sleep(50);
    text = await readFile(reportPath, 'utf8').catch(() => null);
    if (text === null && performance.now() > deadline) throw new Error(`${server.name} wrote no memory report`);
  }
  const usage: unknown = JSON.parse(text);
  const heapUsed: unknown = typeof usage === 'object' && usage !== null ? Reflect.get(usage, 'heapUsed') : undefined;
  const external: unknown = typeof usage === 'object' && usage !== null ? Reflect.get(usage, 'external') : undefined;
  if (typeof heapUsed !== 'number' || typeof external !== 'number') throw new Error(`bad memory report: ${text}`);
  await sleep(SETTLE_MS);
  return { rssKb: await rssKb(pid), heapKb: (heapUsed + external) / 1024 };
}

async function api(
  server: ServerProcess,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: unknown,
  expected: number,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  const parsed: unknown = JSON.parse(text);
  if (typeof parsed !== 'object' || parsed === null) throw new Error(`${method} ${path}: not a JSON object: ${text}`);
  return Object.fromEntries(Object.entries(parsed));
}

function idOf(envelope: Record<string, unknown>, field: string): string {
  const inner: unknown = envelope[field];
  const id: unknown = typeof inner === 'object' && inner !== null ? Reflect.get(inner, 'id') : undefined;
  if (typeof id !== 'string' || id === '') throw new Error(`response has no ${field}.id: ${JSON.stringify(envelope)}`);
  return id;
}

/** A server child with the file its memory reports go to. */
interface Child {
  server: ServerProcess;
  reportPath: string;
}

async function startAgentry(apiKey: string, workDir: string, defer: Defer): Promise<Child> {
  const reportPath = join(workDir, 'agentry-memory.json');
  // Streams are per process; the database makes no difference to holding them, so SQLite only.
  // At the default log level, as users run it; the log goes to a file (see children.ts).
  const env = serverEnv({
    dataDir: join(workDir, 'agentry-data'),
    apiKey,
    redis: false,
    logLevel: 'default',
    extra: { BENCH_MEMORY_REPORT: reportPath },
  });
  const server = await startServer({
    name: 'agentry',
    args: ['--expose-gc', '--import', GC_PRELOAD, 'src/main.ts'],
    cwd: REPO_ROOT,
    env,
    timeoutMs: START_TIMEOUT_MS,
    logFile: join(workDir, 'agentry.log'),
  });
  defer(() => stopProcess(server.child));
  return { server, reportPath };
}

interface Holding {
  streams: OpenStream[];
  /** Growth of VmRSS per stream. */
  rssKbPerStream: number;
  /** Growth of heap and external memory per stream. */
  heapKbPerStream: number;
  after: MemorySample;
}

/** Opens `count` idle streams (stream i at `urlOf(i)`) and measures the server's memory around them. */
async function holdStreams(
  { server, reportPath }: Child,
  agent: http.Agent,
  headers: Record<string, string>,
  count: number,
  urlOf: (index: number) => string,
  defer: Defer,
): Promise<Holding> {
  const warm = await pool(WARMUP_STREAMS, OPEN_CONCURRENCY, (i) => openStream(agent, urlOf(i), headers));
  for (const stream of warm) stream.close();
  await sleep(SETTLE_MS);
  const before = await settledMemory(server, reportPath);
  const started = performance.now();
  const streams = await pool(count, OPEN_CONCURRENCY, (i) => openStream(agent, urlOf(i), headers));
  defer(async () => {
    for (const stream of streams) stream.close();
  });
  const openedIn = performance.now() - started;
  const after = await settledMemory(server, reportPath);
  const rssKbPerStream = (after.rssKb - before.rssKb) / count;
  const heapKbPerStream = (after.heapKb - before.heapKb) / count;
  const mb = (kb: number): string => (kb / 1024).toFixed(1);
  log(
    `${server.name}: ${count} streams opened in ${(openedIn / 1000).toFixed(1)} s; rss ${mb(before.rssKb)} → ` +
      `${mb(after.rssKb)} MB = ${rssKbPerStream.toFixed(1)} KB per stream; heap+external ${mb(before.heapKb)} → ` +
      `${mb(after.heapKb)} MB = ${heapKbPerStream.toFixed(1)} KB per stream`,
  );
  return { streams, rssKbPerStream, heapKbPerStream, after };
}

/**
 * Submits one message to `sessionId` and resolves with each subscriber's `message.created` arrival (ms after the
 * submit was sent, ascending) once every subscriber has also seen `message.completed`, so rounds never overlap.
 */
async function fanOutRound(
  server: ServerProcess,
  headers: Record<string, string>,
  sessionId: string,
  streams: readonly OpenStream[],
  key: string,
): Promise<{ arrivals: number[]; submitMs: number }> {
  const arrivals: number[] = [];
  let completed = 0;
  let sentAt = 0;
  let timer: NodeJS.Timeout | undefined;
  const finished = new Promise<void>((resolve, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `fan-out round ${key}: ${arrivals.length} created and ${completed} completed of ${streams.length} ` +
              `within ${ROUND_TIMEOUT_MS} ms`,
          ),
        ),
      ROUND_TIMEOUT_MS,
    );
    const onFrame: FrameHandler = (event, at) => {
      if (event.kind === 'message.created') arrivals.push(at - sentAt);
      else if (event.kind === 'message.completed') completed += 1;
      else return;
      if (arrivals.length === streams.length && completed === streams.length) resolve();
    };
    for (const stream of streams) stream.onFrame = onFrame;
  });
  try {
    sentAt = performance.now();
    await api(
      server,
      'POST',
      `/v1/sessions/${sessionId}/messages`,
      { ...headers, 'idempotency-key': key },
      { parts: [{ type: 'text', text: 'ping' }] },
      202,
    );
    const submitMs = performance.now() - sentAt;
    await finished;
    return { arrivals: arrivals.sort((a, b) => a - b), submitMs };
  } finally {
    clearTimeout(timer);
    for (const stream of streams) stream.onFrame = null;
  }
}

export async function runStreamBench(): Promise<BenchResult[]> {
  const streamCount = positiveInt('BENCH_STREAMS', 5000);
  const sessionCount = Math.min(streamCount, positiveInt('BENCH_STREAM_SESSIONS', 5000));
  const fanOut = positiveInt('BENCH_FANOUT', 1000);
  const rounds = positiveInt('BENCH_FANOUT_ROUNDS', 5);
  unexpectedEnds = 0;
  return withCleanup(async (defer) => {
    const workDir = await tempDir('stream', defer);
    // keepAlive off and no socket cap: every stream is its own connection, as separate clients would be.
    const agent = new http.Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
    defer(async () => agent.destroy());

    const baselineReport = join(workDir, 'baseline-memory.json');
    const baseline = await startServer({
      name: 'baseline node:http',
      args: ['--expose-gc', '--import', GC_PRELOAD, '--input-type=module', '-e', BASELINE_SCRIPT],
      cwd: REPO_ROOT,
      env: { ...process.env, BENCH_MEMORY_REPORT: baselineReport },
      timeoutMs: START_TIMEOUT_MS,
    });
    defer(() => stopProcess(baseline.child));
    const bare = await withCleanup((deferBare) =>
      holdStreams(
        { server: baseline, reportPath: baselineReport },
        agent,
        {},
        streamCount,
        (i) => `${baseline.url}/s/${i}`,
        deferBare,
      ),
    );
    await stopProcess(baseline.child);

    const apiKey = generateApiKey();
    const agentry = await startAgentry(apiKey, workDir, defer);
    const server = agentry.server;
    const headers = { authorization: `Bearer ${apiKey}` };
    const agentId = idOf(
      await api(server, 'POST', '/v1/agents', headers, { name: 'bench agent', instructions: 'Stream bench.' }, 201),
      'agent',
    );
    const createSession = async (): Promise<string> =>
      idOf(await api(server, 'POST', '/v1/sessions', headers, { agentId }, 201), 'session');
    let started = performance.now();
    const sessions = await pool(sessionCount, CREATE_CONCURRENCY, createSession);
    log(`agentry: ${sessionCount} sessions created in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const streamUrl = (sessionId: string): string => `${server.url}/v1/sessions/${sessionId}/stream`;

    const perSession = streamCount / sessionCount;
    log(`agentry: ${streamCount} idle streams over ${sessionCount} sessions (${perSession.toFixed(1)} per session)`);
    const idle = await holdStreams(
      agentry,
      agent,
      headers,
      streamCount,
      (i) => streamUrl(sessions[i % sessionCount] ?? ''),
      defer,
    );

    const fanSession = await createSession();
    const singleSession = await createSession();
    started = performance.now();
    const fans = await pool(fanOut, OPEN_CONCURRENCY, () => openStream(agent, streamUrl(fanSession), headers));
    defer(async () => {
      for (const stream of fans) stream.close();
    });
    log(`agentry: ${fanOut} streams on one session opened in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const single = await openStream(agent, streamUrl(singleSession), headers);
    defer(async () => single.close());

    const singleTimes: number[] = [];
    const lastTimes: number[] = [];
    const medianTimes: number[] = [];
    // Round 0 warms the submit path and the client's fetch connection; it is not counted.
    for (let round = 0; round <= rounds; round++) {
      const one = await fanOutRound(server, headers, singleSession, [single], `single-${round}`);
      const many = await fanOutRound(server, headers, fanSession, fans, `fan-${round}`);
      const oneMs = one.arrivals[0] ?? Number.NaN;
      const lastMs = many.arrivals.at(-1) ?? Number.NaN;
      const p50Ms = percentile(many.arrivals, 50);
      log(
        `round ${round}${round === 0 ? ' (warm-up)' : ''}: 1 subscriber ${oneMs.toFixed(2)} ms; ${fanOut} subscribers ` +
          `first ${(many.arrivals[0] ?? Number.NaN).toFixed(2)} / p50 ${p50Ms.toFixed(2)} / last ${lastMs.toFixed(2)} ms ` +
          `(submit answered after ${many.submitMs.toFixed(2)} ms)`,
      );
      if (round === 0) continue;
      singleTimes.push(oneMs);
      lastTimes.push(lastMs);
      medianTimes.push(p50Ms);
    }
    if (unexpectedEnds > 0) throw new Error(`${unexpectedEnds} streams ended while the bench was holding them`);
    const oneSubscriber = median(singleTimes);
    const last = median(lastTimes);
    const p50 = median(medianTimes);
    const layout = perSession === 1 ? `${streamCount}` : `${streamCount}_over_${sessionCount}_sessions`;
    return [
      {
        name: `stream.idle_${layout}.rss_per_stream`,
        value: idle.rssKbPerStream,
        unit: 'KB',
        baseline: bare.rssKbPerStream,
        ratio: idle.rssKbPerStream / bare.rssKbPerStream,
      },
      {
        name: `stream.idle_${layout}.heap_per_stream`,
        value: idle.heapKbPerStream,
        unit: 'KB',
        baseline: bare.heapKbPerStream,
        ratio: idle.heapKbPerStream / bare.heapKbPerStream,
      },
      {
        name: `stream.idle_${layout}.server_rss`,
        value: idle.after.rssKb / 1024,
        unit: 'MB',
        baseline: bare.after.rssKb / 1024,
        ratio: idle.after.rssKb / bare.after.rssKb,
      },
      {
        name: `stream.fanout_${fanOut}.last_subscriber`,
        value: last,
        unit: 'ms',
        baseline: oneSubscriber,
        ratio: last / oneSubscriber,
      },
      {
        name: `stream.fanout_${fanOut}.p50_subscriber`,
        value: p50,
        unit: 'ms',
        baseline: oneSubscriber,
        ratio: p50 / oneSubscriber,
      },
    ];
  });
}

if (import.meta.main) await runStandalone(runStreamBench);
