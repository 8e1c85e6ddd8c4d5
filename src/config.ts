/**
 * The only reader of process.env. Parsed once at startup and passed down; a bad value stops startup with a
 * message naming the variable.
 */
import { resolve } from 'node:path';

export type ServeRole = 'api' | 'worker' | 'all';

export interface ProviderConfig {
  baseURL: string;
  apiKey?: string;
}

export interface Config {
  role: ServeRole;
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string | null;
  databaseSchema: string | null;
  redisUrl: string | null;
  /** Start of every Redis channel name; the database and schema names follow it. */
  redisPrefix: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** `auto`: pino-pretty when standard output is a terminal, JSON lines otherwise. */
  logFormat: 'auto' | 'pretty' | 'json';
  bootstrapKey: string | null;
  defaultModel: string;
  providers: Record<string, ProviderConfig>;
  openaiApiKey: string | null;
  anthropicApiKey: string | null;
  bodyLimitBytes: number;
  /** Largest accepted file upload (POST /v1/files); the JSON body limit does not apply to uploads. */
  maxUploadBytes: number;
  shutdownGraceMs: number;
  idempotencyTtlMs: number;
  webhookRetryBaseMs: number;
  webhookRetryWindowMs: number;
  /** How long delivery details (status, attempts) stay readable after a delivery ends. */
  webhookHistoryRetentionMs: number;
  /** Webhook requests in flight per process, over all endpoints. */
  webhookConcurrency: number;
  /** Webhook requests in flight per process to any one endpoint. */
  webhookEndpointConcurrency: number;
  responsesSyncTimeoutMs: number;
  sseHeartbeatMs: number;
  allowInsecureDestinations: boolean;
  /** Accept OpenAI-client requests on /v1/responses without the Agentry-Compat header. */
  responsesCompat: boolean;
  workerConcurrency: number;
  leaseMs: number;
  pollMs: number;
}

export class ConfigError extends Error {
  readonly variable: string;

  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = new.target.name;
    this.variable = variable;
  }
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const DAY_MS = 24 * 3600_000;
const API_KEY_PATTERN = /^agk_[A-Za-z0-9]{40}$/;

function str(env: Env, name: string, fallback: string): string {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

function optional(env: Env, name: string): string | null {
  const value = env[name];
  return value === undefined || value === '' ? null : value;
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be an integer, got ${JSON.stringify(raw)}`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got ${JSON.stringify(raw)}`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const found = allowed.find((candidate) => candidate === raw);
  if (found === undefined)
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
  return found;
}

function url(env: Env, name: string, protocols: readonly string[]): string | null {
  const raw = optional(env, name);
  if (raw === null) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

function providers(env: Env): Record<string, ProviderConfig> {
  const raw = optional(env, 'AGENTRY_PROVIDERS');
  if (raw === null) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError('AGENTRY_PROVIDERS', 'must be a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('AGENTRY_PROVIDERS', 'must be a JSON object of {"name":{"baseURL":"…"}}');
  }
  const result: Record<string, ProviderConfig> = {};
  for (const [name, value] of Object.entries(parsed)) {
    if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(name) || ['openai', 'anthropic', 'scripted'].includes(name)) {
      throw new ConfigError('AGENTRY_PROVIDERS', `provider name ${JSON.stringify(name)} is invalid or reserved`);
    }
    if (typeof value !== 'object' || value === null) {
      throw new ConfigError('AGENTRY_PROVIDERS', `provider ${name} must be an object`);
    }
    const baseURL: unknown = Reflect.get(value, 'baseURL');
    const apiKey: unknown = Reflect.get(value, 'apiKey');
    if (typeof baseURL !== 'string' || !URL.canParse(baseURL)) {
      throw new ConfigError('AGENTRY_PROVIDERS', `provider ${name} needs a valid baseURL`);
    }
    if (apiKey !== undefined && typeof apiKey !== 'string') {
      throw new ConfigError('AGENTRY_PROVIDERS', `provider ${name}: apiKey must be a string`);
    }
    result[name] = apiKey === undefined ? { baseURL } : { baseURL, apiKey };
  }
  return result;
}

function redisPrefix(env: Env): string {
  const value = str(env, 'AGENTRY_REDIS_PREFIX', 'agentry:');
  if (!/^[A-Za-z0-9:._-]{1,64}$/.test(value)) {
    throw new ConfigError('AGENTRY_REDIS_PREFIX', 'must be 1-64 letters, digits or : . _ -');
  }
  return value;
}

export function loadConfig(env: Env = process.env): Config {
  const bootstrapKey = optional(env, 'AGENTRY_BOOTSTRAP_KEY');
  if (bootstrapKey !== null && !API_KEY_PATTERN.test(bootstrapKey)) {
    throw new ConfigError('AGENTRY_BOOTSTRAP_KEY', 'must be agk_ followed by 40 letters or digits');
  }
  const databaseSchema = optional(env, 'AGENTRY_DATABASE_SCHEMA');
  if (databaseSchema !== null && !/^[a-z_][a-z0-9_]{0,62}$/.test(databaseSchema)) {
    throw new ConfigError('AGENTRY_DATABASE_SCHEMA', 'must be a lower-case SQL identifier');
  }
  const defaultModel = str(env, 'AGENTRY_DEFAULT_MODEL', 'scripted');
  return {
    role: oneOf(env, 'AGENTRY_ROLE', ['api', 'worker', 'all'] as const, 'all'),
    host: str(env, 'HOST', '127.0.0.1'),
    port: int(env, 'PORT', 8080, 0, 65535),
    dataDir: resolve(str(env, 'AGENTRY_DATA_DIR', './data')),
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    databaseSchema,
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: redisPrefix(env),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    logFormat: oneOf(env, 'AGENTRY_LOG_FORMAT', ['auto', 'pretty', 'json'] as const, 'auto'),
    bootstrapKey,
    defaultModel,
    providers: providers(env),
    openaiApiKey: optional(env, 'OPENAI_API_KEY'),
    anthropicApiKey: optional(env, 'ANTHROPIC_API_KEY'),
    bodyLimitBytes: int(env, 'AGENTRY_BODY_LIMIT_BYTES', 8 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxUploadBytes: int(env, 'AGENTRY_MAX_UPLOAD_BYTES', 50 * 1024 * 1024, 1, 1024 * 1024 * 1024 * 1024),
    shutdownGraceMs: int(env, 'AGENTRY_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    idempotencyTtlMs: int(env, 'AGENTRY_IDEMPOTENCY_TTL_MS', 24 * 3600_000, 1000, 30 * 24 * 3600_000),
    webhookRetryBaseMs: int(env, 'AGENTRY_WEBHOOK_RETRY_BASE_MS', 5000, 1, 3600_000),
    webhookRetryWindowMs: int(env, 'AGENTRY_WEBHOOK_RETRY_WINDOW_MS', 7_200_000, 1, 7 * 24 * 3600_000),
    webhookHistoryRetentionMs: int(env, 'AGENTRY_WEBHOOK_HISTORY_RETENTION_MS', 30 * DAY_MS, 1, 3650 * DAY_MS),
    webhookConcurrency: int(env, 'AGENTRY_WEBHOOK_CONCURRENCY', 64, 1, 10_000),
    webhookEndpointConcurrency: int(env, 'AGENTRY_WEBHOOK_ENDPOINT_CONCURRENCY', 8, 1, 10_000),
    responsesSyncTimeoutMs: int(env, 'AGENTRY_RESPONSES_SYNC_TIMEOUT_MS', 300_000, 1, 3600_000),
    sseHeartbeatMs: int(env, 'AGENTRY_SSE_HEARTBEAT_MS', 15_000, 10, 3600_000),
    allowInsecureDestinations: bool(env, 'AGENTRY_ALLOW_INSECURE_DESTINATIONS', false),
    responsesCompat: oneOf(env, 'AGENTRY_RESPONSES_COMPAT', ['strict', 'openai'] as const, 'strict') === 'openai',
    workerConcurrency: int(env, 'AGENTRY_WORKER_CONCURRENCY', 64, 1, 10_000),
    leaseMs: int(env, 'AGENTRY_LEASE_MS', 30_000, 500, 3600_000),
    pollMs: int(env, 'AGENTRY_POLL_MS', 1000, 10, 600_000),
  };
}
