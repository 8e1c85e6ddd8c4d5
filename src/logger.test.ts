import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { runInTurn } from './lib/trace-context.ts';
import { createLogger, RequestLogController } from './logger.ts';

/**
 * The threshold of the tests that use one: far above what answering /fast takes even on a busy machine, and below
 * the time /slow takes by construction.
 */
const THRESHOLD_MS = 1000;

/** A destination that keeps the lines written to it, as written. */
function lineSink(): { sink: Writable; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  return { sink, lines };
}

/** A Fastify app with three routes, logging to memory, with the given threshold and level. */
async function requestLines(minMs: number, level: 'info' | 'debug'): Promise<{ level: number; msg: string }[]> {
  const { sink, lines } = lineSink();
  const app = Fastify({
    loggerInstance: createLogger({ logLevel: level, logFormat: 'json' }, sink),
    logController: new RequestLogController(minMs),
  });
  app.get('/fast', async () => ({ ok: true }));
  app.get('/slow', async () => {
    await new Promise((resolve) => setTimeout(resolve, THRESHOLD_MS + 100));
    return { ok: true };
  });
  app.get('/bad', async (_request, reply) => reply.code(400).send({ error: 'bad' }));
  for (const url of ['/fast', '/slow', '/bad']) await app.inject({ method: 'GET', url });
  await app.close();
  return lines
    .map((line) => {
      const entry: { level?: unknown; msg?: unknown } = JSON.parse(line);
      return { level: Number(entry.level), msg: String(entry.msg) };
    })
    .filter((line) => /^GET \//.test(line.msg));
}

describe('request log lines', () => {
  it('logs every request once at info by default', async () => {
    const lines = await requestLines(0, 'info');
    expect(lines.map((line) => [line.level, line.msg.split(' ').slice(0, 3).join(' ')])).toEqual([
      [30, 'GET /fast 200'],
      [30, 'GET /slow 200'],
      [30, 'GET /bad 400'],
    ]);
  });

  it('leaves fast successful requests out at info with a threshold; errors and slow ones stay', async () => {
    const lines = await requestLines(THRESHOLD_MS, 'info');
    expect(lines.map((line) => line.msg.split(' ').slice(0, 3).join(' '))).toEqual(['GET /slow 200', 'GET /bad 400']);
  });

  it('logs the fast ones at debug when debug is on', async () => {
    const lines = await requestLines(THRESHOLD_MS, 'debug');
    expect(lines.map((line) => [line.level, line.msg.split(' ').slice(0, 3).join(' ')])).toEqual([
      [20, 'GET /fast 200'],
      [30, 'GET /slow 200'],
      [30, 'GET /bad 400'],
    ]);
  });
});

describe('the request of a request line', () => {
  it('is its method, URL, host and peer, never its headers (so no key is ever written)', async () => {
    const { sink, lines } = lineSink();
    const app = Fastify({
      loggerInstance: createLogger({ logLevel: 'debug', logFormat: 'json' }, sink),
      logController: new RequestLogController(0),
    });
    app.get('/agents', async () => ({ ok: true }));
    const key = 'agk_secretsecretsecretsecretsecretsecret01';
    await app.inject({
      method: 'GET',
      url: '/agents?n=1',
      headers: { authorization: `Bearer ${key}`, 'x-api-key': key, host: 'agentry.test' },
    });
    await app.close();
    const requestLines = lines.map((line) => JSON.parse(line)).filter((entry) => entry.req !== undefined);
    // The arrival (debug) and the answer (info); injected requests have no remote port.
    const expected = { method: 'GET', url: '/agents?n=1', host: 'agentry.test', remoteAddress: '127.0.0.1' };
    expect(requestLines.map((entry) => entry.req)).toEqual([expected, expected]);
    expect(lines.join('\n')).not.toContain(key);
  });
});

describe('the line of an answered request', () => {
  it('is the line pino writes for it, byte for byte but the time, over real HTTP', async () => {
    const { sink, lines } = lineSink();
    const app = Fastify({
      loggerInstance: createLogger({ logLevel: 'info', logFormat: 'json' }, sink),
      logController: new RequestLogController(0),
    });
    const answered: { request: FastifyRequest; reply: FastifyReply }[] = [];
    app.addHook('onResponse', async (request, reply) => {
      answered.push({ request, reply });
    });
    app.get('/*', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    // A quote and a backslash in the URL (Node's parser takes both): each escaped as pino escapes it.
    const paths = ['/agents?n=1', '/a"b\\c?q=1'];
    for (const path of paths) {
      await new Promise<void>((resolve, reject) => {
        http
          .get({ port, host: '127.0.0.1', path, headers: { connection: 'close' } }, (response) => {
            response.resume();
            response.on('end', resolve);
          })
          .on('error', reject);
      });
    }
    await app.close();
    const written = lines.filter((line) => line.includes('"responseTime"'));
    expect(written).toHaveLength(paths.length);
    // What pino writes for the same call on the same request's logger.
    const byPino: string[] = [];
    sink.write = ((chunk: string) => byPino.push(chunk.trimEnd()) > 0) as typeof sink.write;
    answered.forEach(({ request, reply }, i) => {
      const line = JSON.parse(written[i] ?? '{}');
      reply.log.info(
        { req: request, res: { statusCode: reply.statusCode }, responseTime: line.responseTime },
        line.msg,
      );
    });
    const withoutTime = (line: string) => line.replace(/"time":\d+,/, '');
    expect(byPino.map(withoutTime)).toEqual(written.map(withoutTime));
    expect(JSON.parse(written[1] ?? '{}').req.url).toBe('/a"b\\c?q=1');
    expect(typeof JSON.parse(written[0] ?? '{}').req.remotePort).toBe('number');
  });

  it("is written by pino, with the turn's fields, when answered inside a turn's context", async () => {
    const { sink, lines } = lineSink();
    const controller = new RequestLogController(0);
    const app = Fastify({ loggerInstance: createLogger({ logLevel: 'info', logFormat: 'json' }, sink) });
    let answered: { request: FastifyRequest; reply: FastifyReply } | null = null;
    app.addHook('onResponse', async (request, reply) => {
      answered = { request, reply };
    });
    app.get('/x', async () => ({ ok: true }));
    await app.inject({ method: 'GET', url: '/x' });
    await app.close();
    const { request, reply } = answered ?? expect.unreachable('no request answered');
    runInTurn({ runId: 'run_1', traceId: 'trace_1' }, () => controller.requestCompleted(null, request, reply));
    const line = JSON.parse(lines.at(-1) ?? '{}');
    expect([line.msg, line.runId, line.traceId]).toEqual([expect.stringMatching(/^GET \/x 200 /), 'run_1', 'trace_1']);
  });
});

describe('lines held for standard output', () => {
  // A child process logs 2,000 lines in one turn of its event loop (so they are still held), then ends as named.
  const endings = {
    'an uncaught exception': "throw new Error('boom');",
    'an unhandled rejection': "Promise.reject(new Error('boom'));",
    'process.exit (a fatal startup error, the end of a SIGTERM shutdown)': 'process.exit(1);',
    'SIGTERM handled by exiting':
      "process.once('SIGTERM', () => process.exit(0)); process.kill(process.pid, 'SIGTERM'); setTimeout(() => {}, 5000);",
  };
  for (const [ending, code] of Object.entries(endings)) {
    it(`are all written when the process ends by ${ending}`, () => {
      const script = [
        `import { createLogger } from ${JSON.stringify(new URL('./logger.ts', import.meta.url).pathname)};`,
        "const logger = createLogger({ logLevel: 'info', logFormat: 'json' });",
        "for (let i = 0; i < 2000; i++) logger.info({ i }, 'line');",
        "logger.fatal('last');",
        code,
      ].join('\n');
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
      const lines = child.stdout.split('\n').filter(Boolean);
      expect(lines).toHaveLength(2001);
      expect(JSON.parse(lines.at(-1) ?? '{}').msg).toBe('last');
    });
  }
});

describe('lines written inside a turn', () => {
  it("carry the turn's runId and traceId, and only their own fields besides", () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const logger = createLogger({ logLevel: 'info', logFormat: 'json' }, sink);
    runInTurn({ runId: 'run_1', traceId: 'trace_1' }, () => {
      logger.warn({ sessionId: 's1', err: new Error('first') }, 'first');
      logger.info('second');
    });
    logger.info('outside');
    expect(lines.map((line) => [line.msg, line.runId, line.sessionId, line.err === undefined])).toEqual([
      ['first', 'run_1', 's1', false],
      ['second', 'run_1', undefined, true],
      ['outside', undefined, undefined, true],
    ]);
  });
});

describe('log lines while the database is unreachable', () => {
  it('logs each kind of failure once, then at most every 10 s with a count; other lines all pass', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const lines: Record<string, unknown>[] = [];
      const sink = new Writable({
        write(chunk, _encoding, done) {
          lines.push(
            ...String(chunk)
              .split('\n')
              .filter(Boolean)
              .map((line) => JSON.parse(line)),
          );
          done();
        },
      });
      const logger = createLogger({ logLevel: 'info', logFormat: 'json' }, sink);
      // What pg says when Postgres refuses connections, and when a statement gets no answer.
      const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      const unanswered = new Error('Query read timeout');
      for (let n = 0; n < 50; n++) {
        logger.error({ err: refused }, 'claiming work failed');
        logger.child({ component: 'webhooks' }).error({ err: unanswered }, 'webhook fan-out failed');
        logger.error({ err: new Error('a bug') }, 'claiming work failed');
      }
      vi.setSystemTime(Date.now() + 10_001);
      logger.error({ err: refused }, 'claiming work failed');
      const view = lines.map((line) => [line.msg, (line.err as { message: string }).message, line.suppressed]);
      expect(view).toEqual([
        ['claiming work failed', refused.message, undefined],
        ['webhook fan-out failed', 'Query read timeout', undefined],
        ...Array.from({ length: 50 }, () => ['claiming work failed', 'a bug', undefined]),
        ['claiming work failed', refused.message, 49],
      ]);
    } finally {
      vi.useRealTimers();
    }
  });
});
