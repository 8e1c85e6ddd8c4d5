/**
 * The process logger: JSON lines (for log collectors) unless it writes to a terminal, where people read it, in
 * pino-pretty's human form. AGENTRY_LOG_FORMAT overrides the choice. Requests are logged once, when answered.
 * While the database is unreachable, each failure that names it is logged once, then at most every 10 s.
 */

import { createRequire } from 'node:module';
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import pino, { type Logger } from 'pino';
import type { Config } from './config.ts';
import { turnLogFields } from './lib/trace-context.ts';
import { isDatabaseUnavailable } from './storage/errors.ts';

/**
 * Field paths that may carry secrets; pino replaces their values before a line is written. A logged request (`req`)
 * is reduced to the fields of requestFields below, never its headers, so it needs no path here (each path under
 * `req` would cost every request line a copy of that object).
 */
export const REDACTED_PATHS = ['headers.authorization', 'apiKey', 'key', 'secret', 'signing_secret'];

/** Fields of the request line that the pretty form already says in its message (the request id at its end). */
const PRETTY_IGNORED = 'pid,hostname,req,res,responseTime,reqId';
const PRETTY_MESSAGE = '{msg}{if reqId} (request {reqId}){end}{if runId} (run {runId}){end}';

/** What a request line says of its request: no headers, no body. */
interface RequestFields {
  method: string;
  url: string;
  host: string;
  remoteAddress: string;
  remotePort: number | undefined;
}

/** The `req` serializer of every logger, so that a request logged anywhere shows these fields and nothing else. */
function requestFields(request: FastifyRequest): RequestFields {
  return {
    method: request.method,
    url: request.url,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

const isTerminal = (stream: NodeJS.WritableStream): boolean => 'isTTY' in stream && stream.isTTY === true;

/** Bytes of log lines held before they are written without waiting for the end of the event loop's turn. */
const BATCH_BYTES = 64 * 1024;
let stdoutBatch: { write(line: string): void } | null = null;

/**
 * Standard output for JSON lines, written once per turn of the event loop instead of once per line: under load
 * (a request line each) that saves a system call per request. What is held is written when the process exits,
 * so only a kill -9 can lose lines, those of the last few microseconds. The writes are synchronous (pino's
 * destination on descriptor 1 in sync mode, which waits out a full pipe): process.stdout may queue a write to a
 * pipe in memory, and a process that exits then loses it.
 */
function batchedStdout(): { write(line: string): void } {
  if (stdoutBatch !== null) return stdoutBatch;
  const stdout = pino.destination({ dest: 1, sync: true });
  let held: string[] = [];
  let bytes = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (held.length === 0) return;
    const text = held.length === 1 ? (held[0] as string) : held.join('');
    held = [];
    bytes = 0;
    stdout.write(text);
  };
  process.on('exit', flush);
  stdoutBatch = {
    write(line) {
      held.push(line);
      bytes += line.length;
      if (bytes >= BATCH_BYTES) flush();
      else if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
  };
  JSON_STREAMS.add(stdoutBatch);
  return stdoutBatch;
}

/**
 * The destinations that get pino's JSON lines as they are (createLogger's JSON form): request lines are written to
 * these directly (writeRequestLine below). Others (pino-pretty, a test's logger) get them through pino.
 */
const JSON_STREAMS = new WeakSet<object>();

/** How often one kind of failure caused by an unreachable database is logged (the lines between are counted). */
const OUTAGE_LOG_INTERVAL_MS = 10_000;
/** Kinds of failure remembered at most (messages are fixed strings; this only bounds a surprise). */
const OUTAGE_LOG_KINDS = 1000;

/**
 * Every poll of every background loop (claims, webhooks, schedules, heartbeats) and every request fails while the
 * database is unreachable: the first failure of each kind (its message) is logged with its error, the same kind
 * again at most every OUTAGE_LOG_INTERVAL_MS with `suppressed`, the number of lines left out since. Other lines pass.
 */
function outageThrottle(): (this: Logger, args: Parameters<pino.LogFn>, method: pino.LogFn) => void {
  const last = new Map<string, { at: number; suppressed: number }>();
  return function logMethod(args, method) {
    const [fields, message] = args;
    if (
      typeof fields !== 'object' ||
      fields === null ||
      typeof message !== 'string' ||
      !isDatabaseUnavailable(Reflect.get(fields, 'err'))
    ) {
      method.apply(this, args);
      return;
    }
    const now = Date.now();
    const seen = last.get(message);
    if (seen !== undefined && now - seen.at < OUTAGE_LOG_INTERVAL_MS) {
      seen.suppressed += 1;
      return;
    }
    if (last.size >= OUTAGE_LOG_KINDS) last.clear();
    last.set(message, { at: now, suppressed: 0 });
    if (seen === undefined || seen.suppressed === 0) method.apply(this, args);
    else method.call(this, { ...fields, suppressed: seen.suppressed }, message);
  };
}

export function createLogger(
  config: Pick<Config, 'logLevel'> & Partial<Pick<Config, 'logFormat'>>,
  destination: NodeJS.WritableStream = process.stdout,
): Logger {
  const options = {
    level: config.logLevel,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    serializers: { req: requestFields },
    // Lines written while a turn runs carry its runId and traceId.
    mixin: turnLogFields,
    hooks: { logMethod: outageThrottle() },
  };
  const format = config.logFormat ?? 'auto';
  const terminal = isTerminal(destination);
  if (format === 'json' || (format === 'auto' && !terminal)) {
    if (destination === process.stdout) return pino(options, batchedStdout());
    JSON_STREAMS.add(destination);
    return pino(options, destination);
  }
  // Loaded only here: a process that logs JSON (the default when not on a terminal) never needs it.
  const PinoPretty = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const pretty = PinoPretty({
    // Standard output by its descriptor, written synchronously, so nothing is lost when the process exits.
    destination: destination === process.stdout ? 1 : destination,
    sync: true,
    colorize: terminal,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: PRETTY_IGNORED,
    messageFormat: PRETTY_MESSAGE,
    // A person reads the message (which says what matters); the fields stay in the JSON form. Errors keep theirs.
    hideObject: true,
  });
  return pino(options, pretty);
}

/**
 * One info line per request, when it is answered: `GET /v1/agents 200 3.1 ms` with the request id, method, URL,
 * status and duration as fields. (Fastify's default logs two lines, one on arrival; that one is debug here.)
 * With a threshold (AGENTRY_REQUEST_LOG_MIN_MS), successful requests answered faster than it are logged at debug:
 * errors and slow requests stay at info.
 */
export class RequestLogController extends LogController {
  readonly #minMs: number;

  constructor(minMs = 0) {
    super();
    this.#minMs = minMs;
  }

  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const quiet = !error && reply.statusCode < 400 && reply.elapsedTime < this.#minMs;
    if (quiet && reply.log.level !== 'debug' && reply.log.level !== 'trace') return;
    const responseTime = Math.round(reply.elapsedTime * 10) / 10;
    const line = `${request.method} ${request.url} ${reply.statusCode} ${responseTime} ms`;
    if (!error && !quiet && writeRequestLine(request, reply, responseTime, line)) return;
    const fields = {
      req: request,
      res: { statusCode: reply.statusCode },
      responseTime,
    };
    if (error) reply.log.error({ ...fields, err: error }, `${line} (response failed)`);
    else if (quiet) reply.log.debug(fields, line);
    else reply.log.info(fields, line);
  }
}

const { chindingsSym, streamSym } = pino.symbols;
/** pino's number of the info level, as its lines carry it. */
const INFO = 30;

/**
 * Writes the info line of an answered request straight to its logger's destination when that takes JSON lines
 * and nothing would change the line on its way (no turn fields: requests are not answered inside a turn). The
 * line is the one pino writes for `reply.log.info({req, res, responseTime}, line)`, byte for byte
 * (src/logger.test.ts compares them), without the generic path's serializers, mixin, hooks and object
 * walk: those cost a tenth of a small request's time. Returns false when pino must write it.
 */
function writeRequestLine(
  request: FastifyRequest,
  reply: FastifyReply,
  responseTime: number,
  message: string,
): boolean {
  const log = reply.log;
  const stream: unknown = Reflect.get(log, streamSym);
  if (typeof stream !== 'object' || stream === null || !JSON_STREAMS.has(stream)) return false;
  const level: unknown = Reflect.get(log, 'levelVal');
  if (typeof level !== 'number' || level > INFO) return false;
  const turn = turnLogFields();
  if (turn.runId !== undefined || turn.traceId !== undefined) return false;
  const chindings: unknown = Reflect.get(log, chindingsSym);
  if (typeof chindings !== 'string') return false;
  const req = requestFields(request);
  (stream as { write(line: string): void }).write(
    `{"level":${INFO},"time":${Date.now()}${chindings},"req":${JSON.stringify(req)},` +
      `"res":{"statusCode":${reply.statusCode}},"responseTime":${responseTime},"msg":${JSON.stringify(message)}}\n`,
  );
  return true;
}
