/**
 * The only reader of process.env. Parsed once at startup and passed down; a bad value stops startup with a
 * message naming the variable.
 */
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import {
  DEFAULT_STORAGE_PROBE_MS,
  DEFAULT_UID_BASE,
  DEFAULT_WORKSPACE_QUOTA_BYTES,
  MAX_SANDBOX_UID,
  MIB,
  SERVER_AUTOCHECKPOINT_PAGES,
} from './config/defaults.ts';
import {
  CatalogueEntryError,
  modelOverrideAt,
  type OperatorCatalogue,
  readOperatorCatalogue,
} from './config/model-catalog.ts';
import { LIMIT_NAMES, resolveLimits, type SandboxLimits } from './config/sandbox-limits.ts';
import { parseSecretKey } from './lib/secret-box.ts';

export type ServeRole = 'api' | 'worker' | 'all';

/** How Responses requests are validated: OpenAI compatibility (`auto`, `openai`) or the spec's strict rules. */
export const COMPAT_SETTINGS = ['auto', 'strict', 'openai'] as const;
export type CompatSetting = (typeof COMPAT_SETTINGS)[number];

/** The kinds of data an organization's retention covers (docs/retention.md). */
export const RETENTION_KINDS = ['sessions', 'runs', 'sessionEvents', 'files', 'webhooks'] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];
/** Days each kind is kept; null keeps forever. */
export type RetentionDays = Record<RetentionKind, number | null>;
/** The longest retention that can be set: 100 years. */
export const MAX_RETENTION_DAYS = 36_500;

export interface ProviderConfig {
  baseURL: string;
  apiKey?: string;
}

/** A deployment-level MCP endpoint serving a third-party toolkit kind (AGENTRY_TOOLKITS). */
export interface ToolkitEndpoint {
  /** May contain `{toolkit}`, replaced by the entry's toolkit name. */
  url: string;
  headers: Record<string, string>;
}

export interface Config {
  role: ServeRole;
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string | null;
  databaseSchema: string | null;
  /**
   * Postgres: the longest a query waits for a pooled connection, and the longest one statement may take (client
   * and server side), so that an unreachable database is an error within this bound, never a hang.
   */
  databaseTimeoutMs: number;
  /**
   * Postgres: the hot queries are sent as named statements, parsed and planned once per connection, and run with
   * EXECUTE in a multi-statement batch. `protocol`: never with EXECUTE, for a pooler that keeps named statements
   * under names of its own (PgBouncer from 1.21 in transaction mode). Off for a pooler that keeps none (PgBouncer
   * before 1.21 in transaction mode).
   */
  databasePrepared: boolean | 'protocol';
  redisUrl: string | null;
  /** Start of every Redis channel name; the database and schema names follow it. */
  redisPrefix: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** `auto`: pino-pretty when standard output is a terminal, JSON lines otherwise. */
  logFormat: 'auto' | 'pretty' | 'json';
  /** Successful requests answered faster than this are logged at debug instead of info (0: every one at info). */
  requestLogMinMs: number;
  /** SQLite: the server connection's `wal_autocheckpoint` in pages while the checkpoint thread runs. */
  sqliteWalPages: number;
  /** How often a process that ran out of disk space probes whether writes work again (storage/storage-space.ts). */
  storageProbeMs: number;
  bootstrapKey: string | null;
  defaultModel: string;
  providers: Record<string, ProviderConfig>;
  /** The operator's model catalogue entries (AGENTRY_MODEL_CATALOG's file and AGENTRY_PROVIDERS' fields). */
  modelCatalog: OperatorCatalogue;
  /** The context window every model is fitted to, in tokens (AGENTRY_CONTEXT_WINDOW); 0: each model's own. */
  contextWindow: number;
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
  /**
   * Default retention in days per kind of data (AGENTRY_RETENTION_*_DAYS), for the organizations that set none
   * (docs/retention.md); null keeps forever.
   */
  retention: RetentionDays;
  /** How often a process that runs background jobs sweeps data past its retention. */
  retentionSweepMs: number;
  /** Rows (sessions, runs, events, files, webhook attempts) deleted per transaction by the retention sweeper. */
  retentionBatch: number;
  /** Webhook requests in flight per process, over all endpoints. */
  webhookConcurrency: number;
  /** Webhook requests in flight per process to any one endpoint. */
  webhookEndpointConcurrency: number;
  responsesSyncTimeoutMs: number;
  /**
   * Host names (besides localhost-class ones) whose pages may call the MCP endpoints from a browser (an `Origin`
   * header naming another host is refused: DNS-rebinding protection). AGENTRY_MCP_ALLOWED_ORIGINS, comma-separated.
   */
  mcpAllowedOrigins: string[];
  sseHeartbeatMs: number;
  allowInsecureDestinations: boolean;
  /**
   * AGENTRY_PUBLIC_URL: where people and other servers reach this deployment (no trailing slash). MCP sign-in
   * redirects to `<it>/v1/oauth/callback`; null: MCP servers cannot be connected with OAuth.
   */
  publicUrl: string | null;
  /**
   * Which validation the Responses and Conversations routes apply when neither the request (Agentry-Compat) nor its
   * API key fixes it: `auto` (the default) and `openai` give every client compatibility mode, `strict` the spec body.
   */
  responsesCompat: CompatSetting;
  /** `standard` leaves the vendor `response.agentry_tool_call.*` events out of every Responses stream. */
  responsesStreamEvents: 'all' | 'standard';
  workerConcurrency: number;
  leaseMs: number;
  pollMs: number;
  /** How long an engine process counts as alive after its last heartbeat; its sessions are then claimable. */
  processTtlMs: number;
  /** Estimated bytes of session logs the engine keeps between turns (AGENTRY_CONTEXT_CACHE_MB). */
  contextCacheBytes: number;
  /** A schedule tick claimed later than this was missed (no worker ran); its catch_up policy applies. */
  scheduleMisfireGraceMs: number;
  /** AGENTRY_SECRET_KEY: encrypts connector headers at rest; null = a key generated into the data directory. */
  secretKey: Buffer | null;
  /** How long one server tool call may run. */
  toolTimeoutMs: number;
  /** How long a connector's tool list is used before it is listed again, unless the server hints otherwise. */
  mcpToolsTtlMs: number;
  /** Connect and listing timeout for MCP servers (discovery at agent create, refresh). */
  mcpRequestTimeoutMs: number;
  /** An MCP connection with no call in progress for this long is closed (0: kept open). */
  mcpIdleCloseMs: number;
  /** Bytes of one MCP message (a tool result; a tool list across its pages) read at most. */
  mcpMaxResponseBytes: number;
  /** Third-party toolkits: `kind` or `kind/toolkit` → the MCP endpoint that serves it. */
  toolkits: Record<string, ToolkitEndpoint>;
  sandbox: SandboxConfig;
  /** Limits of the agents' HTTP tools (`http_request`, `web_browse`). */
  httpTools: HttpToolsConfig;
  /** The search provider of `web_search`; null: web_search is unavailable (web_browse still works). */
  webSearch: WebSearchConfig | null;
  /** Where agents' skills come from. */
  skills: SkillsConfig;
  /** The worker threads that parse and convert untrusted input (web pages, search answers, skill front matter). */
  cpuPool: CpuPoolConfig;
  /** OpenTelemetry trace export (docs/observability.md); null: no exporter runs. */
  tracing: TracingConfig | null;
  /** GET /metrics (Prometheus text format). */
  metrics: MetricsConfig;
  /** Rate and concurrency limits where none is set (AGENTRY_DEFAULT_RPM, AGENTRY_DEFAULT_CONCURRENT_TURNS). */
  limitDefaults: LimitDefaults;
  /** The bearer token of the operator's /v1/admin routes (AGENTRY_ADMIN_TOKEN); null: those routes answer 404. */
  adminToken: string | null;
}

export const OTEL_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** From the standard OTEL_* variables (the OpenTelemetry SDK environment specification). */
export interface TracingConfig {
  /** The OTLP/HTTP traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  timeoutMs: number;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: (typeof OTEL_SAMPLERS)[number];
  samplerRatio: number;
  /** Message and tool content (previews) on spans: opt-in. */
  captureContent: boolean;
  batch: {
    scheduledDelayMillis: number;
    maxQueueSize: number;
    maxExportBatchSize: number;
    exportTimeoutMillis: number;
  };
}

/** The limits that apply where the operator set none for an organization or key (docs/operations.md, "Limits"). */
export interface LimitDefaults {
  /** Requests per minute (AGENTRY_DEFAULT_RPM); null: unlimited. */
  requestsPerMinute: number | null;
  /** Turns running at once (AGENTRY_DEFAULT_CONCURRENT_TURNS); null: unlimited. */
  concurrentTurns: number | null;
}

export interface MetricsConfig {
  enabled: boolean;
  /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
  token: string | null;
}

export interface HttpToolsConfig {
  /** One timeout over a whole exchange, redirects and bodies included. */
  timeoutMs: number;
  maxRequestBytes: number;
  /** Response body bytes kept for the model; the rest is not read. */
  maxResponseBytes: number;
  maxRedirects: number;
}

export interface CpuPoolConfig {
  /** Worker threads: jobs that run at once. */
  workers: number;
  /** Longest one job may run; its worker is then ended and replaced. */
  timeoutMs: number;
  /** Heap (old generation) of one worker in MB; a job needing more ends its worker. */
  memoryMb: number;
  /** Jobs that may wait for a worker; one more is refused at once. */
  maxQueue: number;
}

export const WEB_SEARCH_PROVIDERS = ['searxng', 'brave', 'tavily'] as const;

export interface WebSearchConfig {
  provider: (typeof WEB_SEARCH_PROVIDERS)[number];
  /** The provider's endpoint: a SearXNG base URL, or another Brave/Tavily-style endpoint; null: the vendor's. */
  url: string | null;
  apiKey: string | null;
  /** Results per search. */
  results: number;
}

export interface SkillsConfig {
  /** A local skills root laid out `<owner>/<name>/<path>/SKILL.md`. */
  dir: string | null;
  /** A clone URL with `{repo}` for `owner/name` (e.g. https://github.com/{repo}.git); null: no cloning. */
  gitUrl: string | null;
  gitTimeoutMs: number;
  /** Bound on one clone: what is downloaded, and what a checkout would write. */
  gitMaxBytes: number;
}

/** The agent sandbox (docs/sandbox.md): unset values take the runtime's defaults. */
export interface SandboxConfig {
  bwrapPath: string | null;
  /** One host user for every organization's sandboxes; null: one per organization when the server is root
   *  (`uidBase` + project id), else the server's own. */
  user: { uid: number; gid: number } | null;
  uidBase: number;
  /** Disk quota of each workspace. */
  workspaceQuotaBytes: number;
  /** Destination ports the egress proxy allows; null: 80 and 443. */
  egressPorts: number[] | null;
  limits: Partial<SandboxLimits>;
  readBytes: number;
  writeBytes: number;
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

/** An integer that is null when unset. */
function optionalInt(env: Env, name: string, min: number, max: number): number | null {
  return optional(env, name) === null ? null : int(env, name, min, min, max);
}

/** Retention in days: unset, empty or 0 keeps forever (null). */
function days(env: Env, name: string): number | null {
  const value = int(env, name, 0, 0, MAX_RETENTION_DAYS);
  return value === 0 ? null : value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(name, `must be true or false, got ${JSON.stringify(raw)}`);
}

/** AGENTRY_DATABASE_PREPARED: true or false (as bool reads them), or `protocol`. */
function preparedStatements(env: Env): boolean | 'protocol' {
  const value = oneOf(env, 'AGENTRY_DATABASE_PREPARED', ['true', 'false', 'protocol', '1', '0'] as const, 'true');
  return value === 'protocol' ? value : value === 'true' || value === '1';
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const found = allowed.find((candidate) => candidate === raw);
  if (found === undefined)
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
  return found;
}

/**
 * A Postgres URL as node-postgres and libpq read it. One that reaches the server through a Unix socket names the
 * socket's directory in its `host` parameter and may leave the host empty (`postgres://user@/db?host=/run/postgresql`),
 * which URL parsing refuses when the URL has a user name; such a URL is read with `localhost` in the host's place.
 */
export function parseDatabaseUrl(raw: string): URL {
  return new URL(raw.replace(/^(postgres(?:ql)?:\/\/[^/?#@]*@)(?=[/?#]|$)/i, '$1localhost'));
}

function url(
  env: Env,
  name: string,
  protocols: readonly string[],
  parse = (raw: string) => new URL(raw),
): string | null {
  const raw = optional(env, name);
  if (raw === null) return null;
  let parsed: URL;
  try {
    parsed = parse(raw);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return raw;
}

/** A comma-separated list of host names (an origin such as `https://app.example.com` gives its host name). */
function hostNames(env: Env, name: string): string[] {
  const raw = optional(env, name);
  if (raw === null) return [];
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const host = entry.includes('://') && URL.canParse(entry) ? new URL(entry).hostname : entry.toLowerCase();
      if (!/^[a-z0-9.-]+$|^\[[0-9a-f:.]+\]$/i.test(host)) {
        throw new ConfigError(name, `entries must be host names or origins, got ${JSON.stringify(entry)}`);
      }
      return host;
    });
}

/** `key=value,key2=value2` with percent-encoded values (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES). */
function keyValueList(env: Env, name: string): Record<string, string> {
  const raw = optional(env, name);
  const out: Record<string, string> = {};
  if (raw === null) return out;
  for (const entry of raw.split(',')) {
    if (entry.trim() === '') continue;
    const at = entry.indexOf('=');
    const key = at < 0 ? '' : entry.slice(0, at).trim();
    if (key === '') throw new ConfigError(name, `entries must be key=value, got ${JSON.stringify(entry)}`);
    try {
      out[key] = decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      throw new ConfigError(name, `the value of ${key} is not valid percent-encoding`);
    }
  }
  return out;
}

function tracingConfig(env: Env): TracingConfig | null {
  if (bool(env, 'OTEL_SDK_DISABLED', false)) return null;
  const exporters = (optional(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp').split(',').map((name) => name.trim());
  if (exporters.includes('none')) return null;
  if (!exporters.includes('otlp')) {
    throw new ConfigError('OTEL_TRACES_EXPORTER', `only otlp (or none) is supported, got ${exporters.join(',')}`);
  }
  const protocols = ['http', 'https'].map((scheme) => `${scheme}:`);
  const signal = url(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', protocols);
  const base = url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT', protocols);
  if (signal === null && base === null) return null;
  const protocolName = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = env[protocolName];
  if (protocol === 'grpc') throw new ConfigError(protocolName, 'grpc is not supported: use http/protobuf (port 4318)');
  const resourceAttributes = keyValueList(env, 'OTEL_RESOURCE_ATTRIBUTES');
  const ratio = optional(env, 'OTEL_TRACES_SAMPLER_ARG');
  const samplerRatio = ratio === null ? 1 : Number(ratio);
  if (!Number.isFinite(samplerRatio) || samplerRatio < 0 || samplerRatio > 1) {
    throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', `must be a number from 0 to 1, got ${JSON.stringify(ratio)}`);
  }
  return {
    url: signal ?? `${(base ?? '').replace(/\/+$/, '')}/v1/traces`,
    protocol: oneOf(env, protocolName, ['http/protobuf', 'http/json'] as const, 'http/protobuf'),
    headers: {
      ...keyValueList(env, 'OTEL_EXPORTER_OTLP_HEADERS'),
      ...keyValueList(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
    },
    timeoutMs: int(
      env,
      env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT',
      10_000,
      1,
      600_000,
    ),
    serviceName: str(env, 'OTEL_SERVICE_NAME', resourceAttributes['service.name'] ?? 'agentry'),
    resourceAttributes,
    sampler: oneOf(env, 'OTEL_TRACES_SAMPLER', OTEL_SAMPLERS, 'parentbased_always_on'),
    samplerRatio,
    captureContent:
      bool(env, 'AGENTRY_OTEL_CAPTURE_CONTENT', false) ||
      bool(env, 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', false),
    batch: {
      scheduledDelayMillis: int(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 1, 600_000),
      maxQueueSize: int(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, 1_000_000),
      maxExportBatchSize: int(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, 1_000_000),
      exportTimeoutMillis: int(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, 1, 600_000),
    },
  };
}

function metricsConfig(env: Env): MetricsConfig {
  const token = optional(env, 'AGENTRY_METRICS_TOKEN');
  return { enabled: bool(env, 'AGENTRY_METRICS', token !== null), token };
}

/** AGENTRY_PROVIDERS: each provider's connection, and its model catalogue fields (per provider and per model). */
function providers(env: Env): { providers: Record<string, ProviderConfig>; catalogue: OperatorCatalogue } {
  const catalogue: OperatorCatalogue = { models: {}, providers: {} };
  const raw = optional(env, 'AGENTRY_PROVIDERS');
  if (raw === null) return { providers: {}, catalogue };
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
    addProviderCatalogue(catalogue, name, value);
  }
  return { providers: result, catalogue };
}

/** An AGENTRY_PROVIDERS entry's catalogue fields: its own (every model), and `models` {"model": fields}. */
function addProviderCatalogue(catalogue: OperatorCatalogue, name: string, entry: object): void {
  try {
    const own = modelOverrideAt(entry, name, ['baseURL', 'apiKey', 'models']);
    // An entry with only its connection describes no model: its models keep the defaults.
    if (Object.keys(own).length > 0) catalogue.providers[name] = own;
    const models: unknown = Reflect.get(entry, 'models');
    if (models === undefined) return;
    if (typeof models !== 'object' || models === null || Array.isArray(models)) {
      throw new CatalogueEntryError(`${name}.models must be an object of {"model": {…}}`);
    }
    for (const [model, fields] of Object.entries(models)) {
      catalogue.models[`${name}/${model}`] = modelOverrideAt(fields, `${name}.models[${JSON.stringify(model)}]`);
    }
  } catch (error) {
    if (error instanceof CatalogueEntryError) throw new ConfigError('AGENTRY_PROVIDERS', error.message);
    throw error;
  }
}

/** The operator's model catalogue: AGENTRY_MODEL_CATALOG's file, then AGENTRY_PROVIDERS' entries over it. */
function modelCatalog(env: Env, fromProviders: OperatorCatalogue): OperatorCatalogue {
  const path = optional(env, 'AGENTRY_MODEL_CATALOG');
  let file: OperatorCatalogue = { models: {}, providers: {} };
  if (path !== null) {
    try {
      file = readOperatorCatalogue(resolve(path));
    } catch (error) {
      if (error instanceof CatalogueEntryError) throw new ConfigError('AGENTRY_MODEL_CATALOG', error.message);
      throw error;
    }
  }
  const merged: OperatorCatalogue = { models: { ...file.models }, providers: { ...file.providers } };
  for (const kind of ['models', 'providers'] as const) {
    for (const [id, override] of Object.entries(fromProviders[kind])) {
      const base = merged[kind][id] ?? {};
      merged[kind][id] = {
        ...base,
        ...override,
        prices: { ...base.prices, ...override.prices },
        capabilities: { ...base.capabilities, ...override.capabilities },
      };
    }
  }
  return merged;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

function headerMap(value: unknown, where: string): Record<string, string> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError('AGENTRY_TOOLKITS', `${where}.headers must be an object of strings`);
  }
  const headers: Record<string, string> = {};
  for (const [name, header] of Object.entries(value)) {
    if (!HEADER_NAME.test(name) || typeof header !== 'string' || /[\r\n\0]/.test(header)) {
      throw new ConfigError(
        'AGENTRY_TOOLKITS',
        `${where}.headers.${name} must be a valid header name and string value`,
      );
    }
    headers[name] = header;
  }
  return headers;
}

function toolkits(env: Env): Record<string, ToolkitEndpoint> {
  const raw = optional(env, 'AGENTRY_TOOLKITS');
  if (raw === null) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError('AGENTRY_TOOLKITS', 'must be a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('AGENTRY_TOOLKITS', 'must be a JSON object of {"<kind>[/<toolkit>]":{"url":"…"}}');
  }
  const result: Record<string, ToolkitEndpoint> = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (!/^[a-z0-9][a-z0-9_-]{0,63}(\/[^\s/]{1,300})?$/.test(key)) {
      throw new ConfigError('AGENTRY_TOOLKITS', `key ${JSON.stringify(key)} must be <kind> or <kind>/<toolkit>`);
    }
    if (typeof value !== 'object' || value === null) {
      throw new ConfigError('AGENTRY_TOOLKITS', `${key} must be an object with a url`);
    }
    const target: unknown = Reflect.get(value, 'url');
    if (typeof target !== 'string' || !URL.canParse(target.replaceAll('{toolkit}', 'x'))) {
      throw new ConfigError('AGENTRY_TOOLKITS', `${key}.url must be a valid URL`);
    }
    const protocol = new URL(target.replaceAll('{toolkit}', 'x')).protocol;
    if (protocol !== 'https:' && protocol !== 'http:') {
      throw new ConfigError('AGENTRY_TOOLKITS', `${key}.url must use https or http`);
    }
    result[key] = { url: target, headers: headerMap(Reflect.get(value, 'headers'), key) };
  }
  return result;
}

function secretKey(env: Env): Buffer | null {
  const raw = optional(env, 'AGENTRY_SECRET_KEY');
  if (raw === null) return null;
  const key = parseSecretKey(raw);
  if (key === null) throw new ConfigError('AGENTRY_SECRET_KEY', 'must be 32 bytes as 64 hex digits or base64');
  return key;
}

function redisPrefix(env: Env): string {
  const value = str(env, 'AGENTRY_REDIS_PREFIX', 'agentry:');
  if (!/^[A-Za-z0-9:._-]{1,64}$/.test(value)) {
    throw new ConfigError('AGENTRY_REDIS_PREFIX', 'must be 1-64 letters, digits or : . _ -');
  }
  return value;
}

/** The environment variable of each sandbox limit. */
const SANDBOX_LIMIT_VARIABLES: Record<keyof SandboxLimits, string> = {
  timeoutMs: 'AGENTRY_SANDBOX_TIMEOUT_MS',
  maxTimeoutMs: 'AGENTRY_SANDBOX_MAX_TIMEOUT_MS',
  cpuSeconds: 'AGENTRY_SANDBOX_CPU_SECONDS',
  memoryBytes: 'AGENTRY_SANDBOX_MEMORY_BYTES',
  addressSpaceBytes: 'AGENTRY_SANDBOX_ADDRESS_SPACE_BYTES',
  processes: 'AGENTRY_SANDBOX_PROCESSES',
  fileSizeBytes: 'AGENTRY_SANDBOX_FILE_SIZE_BYTES',
  openFiles: 'AGENTRY_SANDBOX_OPEN_FILES',
  tmpBytes: 'AGENTRY_SANDBOX_TMP_BYTES',
  outputBytes: 'AGENTRY_SANDBOX_OUTPUT_BYTES',
  outputKillBytes: 'AGENTRY_SANDBOX_OUTPUT_KILL_BYTES',
};

function sandboxConfig(env: Env): SandboxConfig {
  const limits: Partial<SandboxLimits> = {};
  for (const name of LIMIT_NAMES) {
    const variable = SANDBOX_LIMIT_VARIABLES[name];
    if (optional(env, variable) !== null) limits[name] = int(env, variable, 0, 1, Number.MAX_SAFE_INTEGER);
  }
  try {
    resolveLimits(limits);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const culprit = LIMIT_NAMES.find((name) => message.includes(` ${name} `)) ?? 'outputKillBytes';
    throw new ConfigError(SANDBOX_LIMIT_VARIABLES[culprit], message);
  }
  const uid = optional(env, 'AGENTRY_SANDBOX_UID');
  const gid = optional(env, 'AGENTRY_SANDBOX_GID');
  if ((uid === null) !== (gid === null)) {
    throw new ConfigError(
      uid === null ? 'AGENTRY_SANDBOX_UID' : 'AGENTRY_SANDBOX_GID',
      'set both AGENTRY_SANDBOX_UID and AGENTRY_SANDBOX_GID, or neither',
    );
  }
  if (uid !== null && optional(env, 'AGENTRY_SANDBOX_UID_BASE') !== null) {
    throw new ConfigError(
      'AGENTRY_SANDBOX_UID_BASE',
      'set AGENTRY_SANDBOX_UID/GID (one user for every organization) or AGENTRY_SANDBOX_UID_BASE (one per organization), not both',
    );
  }
  const ports = optional(env, 'AGENTRY_SANDBOX_EGRESS_PORTS');
  const egressPorts =
    ports === null
      ? null
      : ports.split(',').map((part) => {
          const port = Number(part.trim());
          if (!Number.isInteger(port) || port < 1 || port > 65535) {
            throw new ConfigError(
              'AGENTRY_SANDBOX_EGRESS_PORTS',
              `must be comma-separated ports, got ${JSON.stringify(ports)}`,
            );
          }
          return port;
        });
  return {
    bwrapPath: optional(env, 'AGENTRY_SANDBOX_BWRAP'),
    user:
      uid === null || gid === null
        ? null
        : {
            uid: int(env, 'AGENTRY_SANDBOX_UID', 0, 1, 4_294_967_294),
            gid: int(env, 'AGENTRY_SANDBOX_GID', 0, 0, 4_294_967_294),
          },
    uidBase: int(env, 'AGENTRY_SANDBOX_UID_BASE', DEFAULT_UID_BASE, 1, MAX_SANDBOX_UID - 1),
    workspaceQuotaBytes:
      int(env, 'AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB', DEFAULT_WORKSPACE_QUOTA_BYTES / MIB, 1, 2 ** 24) * MIB,
    egressPorts,
    limits,
    readBytes: int(env, 'AGENTRY_SANDBOX_READ_BYTES', 1024 * 1024, 1, 1024 * 1024 * 1024),
    writeBytes: int(env, 'AGENTRY_SANDBOX_WRITE_BYTES', 10 * 1024 * 1024, 1, 1024 * 1024 * 1024),
  };
}

function webSearchConfig(env: Env): WebSearchConfig | null {
  const provider = optional(env, 'AGENTRY_WEB_SEARCH_PROVIDER');
  if (provider === null) return null;
  const chosen = oneOf(env, 'AGENTRY_WEB_SEARCH_PROVIDER', WEB_SEARCH_PROVIDERS, 'searxng');
  const endpoint = url(env, 'AGENTRY_WEB_SEARCH_URL', ['https:', 'http:']);
  const apiKey = optional(env, 'AGENTRY_WEB_SEARCH_API_KEY');
  if (chosen === 'searxng' && endpoint === null) {
    throw new ConfigError('AGENTRY_WEB_SEARCH_URL', 'is required for the searxng provider (the instance base URL)');
  }
  if (chosen !== 'searxng' && apiKey === null) {
    throw new ConfigError('AGENTRY_WEB_SEARCH_API_KEY', `is required for the ${chosen} provider`);
  }
  return { provider: chosen, url: endpoint, apiKey, results: int(env, 'AGENTRY_WEB_SEARCH_RESULTS', 8, 1, 50) };
}

function skillsConfig(env: Env): SkillsConfig {
  const dir = optional(env, 'AGENTRY_SKILLS_DIR');
  const gitUrl = optional(env, 'AGENTRY_SKILLS_GIT_URL');
  if (gitUrl !== null) {
    const sample = gitUrl.replaceAll('{repo}', 'owner/name');
    if (!gitUrl.includes('{repo}') || !URL.canParse(sample)) {
      throw new ConfigError(
        'AGENTRY_SKILLS_GIT_URL',
        'must be a URL containing {repo}, e.g. https://github.com/{repo}.git',
      );
    }
    if (!['https:', 'http:', 'git:', 'file:'].includes(new URL(sample).protocol)) {
      throw new ConfigError('AGENTRY_SKILLS_GIT_URL', 'must use https, http, git or file');
    }
    // The host is the operator's choice, never the agent's: `{repo}` belongs to the path.
    if (new URL(gitUrl.replaceAll('{repo}', 'other/repo')).host !== new URL(sample).host) {
      throw new ConfigError('AGENTRY_SKILLS_GIT_URL', 'must have {repo} in its path, not in its host');
    }
  }
  return {
    dir: dir === null ? null : resolve(dir),
    gitUrl,
    gitTimeoutMs: int(env, 'AGENTRY_SKILLS_GIT_TIMEOUT_MS', 60_000, 1000, 3600_000),
    gitMaxBytes: int(env, 'AGENTRY_SKILLS_GIT_MAX_BYTES', 100 * 1024 * 1024, 64 * 1024, 16 * 1024 * 1024 * 1024),
  };
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
  const configured = providers(env);
  return {
    role: oneOf(env, 'AGENTRY_ROLE', ['api', 'worker', 'all'] as const, 'all'),
    host: str(env, 'HOST', '127.0.0.1'),
    port: int(env, 'PORT', 8080, 0, 65535),
    dataDir: resolve(str(env, 'AGENTRY_DATA_DIR', './data')),
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:'], parseDatabaseUrl),
    databaseSchema,
    databaseTimeoutMs: int(env, 'AGENTRY_DATABASE_TIMEOUT_MS', 5000, 100, 600_000),
    databasePrepared: preparedStatements(env),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: redisPrefix(env),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    logFormat: oneOf(env, 'AGENTRY_LOG_FORMAT', ['auto', 'pretty', 'json'] as const, 'auto'),
    requestLogMinMs: int(env, 'AGENTRY_REQUEST_LOG_MIN_MS', 0, 0, 3600_000),
    sqliteWalPages: int(env, 'AGENTRY_SQLITE_WAL_PAGES', SERVER_AUTOCHECKPOINT_PAGES, 100, 1_000_000),
    storageProbeMs: int(env, 'AGENTRY_STORAGE_PROBE_MS', DEFAULT_STORAGE_PROBE_MS, 100, 600_000),
    bootstrapKey,
    defaultModel,
    providers: configured.providers,
    modelCatalog: modelCatalog(env, configured.catalogue),
    contextWindow: int(env, 'AGENTRY_CONTEXT_WINDOW', 0, 0, 100_000_000),
    openaiApiKey: optional(env, 'OPENAI_API_KEY'),
    anthropicApiKey: optional(env, 'ANTHROPIC_API_KEY'),
    bodyLimitBytes: int(env, 'AGENTRY_BODY_LIMIT_BYTES', 8 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxUploadBytes: int(env, 'AGENTRY_MAX_UPLOAD_BYTES', 50 * 1024 * 1024, 1, 1024 * 1024 * 1024 * 1024),
    shutdownGraceMs: int(env, 'AGENTRY_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    idempotencyTtlMs: int(env, 'AGENTRY_IDEMPOTENCY_TTL_MS', 24 * 3600_000, 1000, 30 * 24 * 3600_000),
    webhookRetryBaseMs: int(env, 'AGENTRY_WEBHOOK_RETRY_BASE_MS', 5000, 1, 3600_000),
    webhookRetryWindowMs: int(env, 'AGENTRY_WEBHOOK_RETRY_WINDOW_MS', 7_200_000, 1, 7 * 24 * 3600_000),
    webhookHistoryRetentionMs: int(env, 'AGENTRY_WEBHOOK_HISTORY_RETENTION_MS', 30 * DAY_MS, 1, 3650 * DAY_MS),
    retention: {
      sessions: days(env, 'AGENTRY_RETENTION_SESSIONS_DAYS'),
      runs: days(env, 'AGENTRY_RETENTION_RUNS_DAYS'),
      sessionEvents: days(env, 'AGENTRY_RETENTION_SESSION_EVENTS_DAYS'),
      files: days(env, 'AGENTRY_RETENTION_FILES_DAYS'),
      webhooks: days(env, 'AGENTRY_RETENTION_WEBHOOKS_DAYS'),
    },
    retentionSweepMs: int(env, 'AGENTRY_RETENTION_SWEEP_MS', 600_000, 1000, 7 * DAY_MS),
    retentionBatch: int(env, 'AGENTRY_RETENTION_BATCH', 500, 1, 100_000),
    webhookConcurrency: int(env, 'AGENTRY_WEBHOOK_CONCURRENCY', 64, 1, 10_000),
    webhookEndpointConcurrency: int(env, 'AGENTRY_WEBHOOK_ENDPOINT_CONCURRENCY', 8, 1, 10_000),
    responsesSyncTimeoutMs: int(env, 'AGENTRY_RESPONSES_SYNC_TIMEOUT_MS', 300_000, 1, 3600_000),
    mcpAllowedOrigins: hostNames(env, 'AGENTRY_MCP_ALLOWED_ORIGINS'),
    sseHeartbeatMs: int(env, 'AGENTRY_SSE_HEARTBEAT_MS', 15_000, 10, 3600_000),
    allowInsecureDestinations: bool(env, 'AGENTRY_ALLOW_INSECURE_DESTINATIONS', false),
    publicUrl: url(env, 'AGENTRY_PUBLIC_URL', ['https:', 'http:'])?.replace(/\/+$/, '') ?? null,
    responsesCompat: oneOf(env, 'AGENTRY_RESPONSES_COMPAT', COMPAT_SETTINGS, 'auto'),
    responsesStreamEvents: oneOf(env, 'AGENTRY_RESPONSES_STREAM_EVENTS', ['all', 'standard'] as const, 'all'),
    workerConcurrency: int(env, 'AGENTRY_WORKER_CONCURRENCY', 64, 1, 10_000),
    leaseMs: int(env, 'AGENTRY_LEASE_MS', 30_000, 500, 3600_000),
    pollMs: int(env, 'AGENTRY_POLL_MS', 1000, 10, 600_000),
    processTtlMs: int(env, 'AGENTRY_PROCESS_TTL_MS', 2500, 300, 600_000),
    contextCacheBytes: int(env, 'AGENTRY_CONTEXT_CACHE_MB', 16, 0, 1_000_000) * 1024 * 1024,
    scheduleMisfireGraceMs: int(env, 'AGENTRY_SCHEDULE_MISFIRE_GRACE_MS', 60_000, 1000, 7 * DAY_MS),
    secretKey: secretKey(env),
    toolTimeoutMs: int(env, 'AGENTRY_TOOL_TIMEOUT_MS', 60_000, 100, 3600_000),
    mcpToolsTtlMs: int(env, 'AGENTRY_MCP_TOOLS_TTL_MS', 300_000, 1000, 7 * DAY_MS),
    mcpRequestTimeoutMs: int(env, 'AGENTRY_MCP_REQUEST_TIMEOUT_MS', 15_000, 100, 600_000),
    mcpIdleCloseMs: int(env, 'AGENTRY_MCP_IDLE_CLOSE_MS', 300_000, 0, 7 * DAY_MS),
    mcpMaxResponseBytes: int(env, 'AGENTRY_MCP_MAX_RESPONSE_BYTES', 16 * 1024 * 1024, 64 * 1024, 1024 * 1024 * 1024),
    toolkits: toolkits(env),
    sandbox: sandboxConfig(env),
    httpTools: {
      timeoutMs: int(env, 'AGENTRY_HTTP_TIMEOUT_MS', 30_000, 100, 600_000),
      maxRequestBytes: int(env, 'AGENTRY_HTTP_MAX_REQUEST_BYTES', 1024 * 1024, 1, 100 * 1024 * 1024),
      maxResponseBytes: int(env, 'AGENTRY_HTTP_MAX_RESPONSE_BYTES', 1024 * 1024, 1024, 100 * 1024 * 1024),
      maxRedirects: int(env, 'AGENTRY_HTTP_MAX_REDIRECTS', 5, 0, 20),
    },
    webSearch: webSearchConfig(env),
    skills: skillsConfig(env),
    cpuPool: {
      // One core is left to the event loop; more than four threads would only queue on the same cores.
      workers: int(env, 'AGENTRY_CPU_WORKERS', Math.min(4, Math.max(1, availableParallelism() - 1)), 1, 64),
      timeoutMs: int(env, 'AGENTRY_CPU_TIMEOUT_MS', 5000, 100, 600_000),
      memoryMb: int(env, 'AGENTRY_CPU_MEMORY_MB', 256, 32, 16_384),
      maxQueue: int(env, 'AGENTRY_CPU_QUEUE', 100, 1, 100_000),
    },
    tracing: tracingConfig(env),
    metrics: metricsConfig(env),
    limitDefaults: {
      requestsPerMinute: optionalInt(env, 'AGENTRY_DEFAULT_RPM', 1, 1_000_000_000),
      concurrentTurns: optionalInt(env, 'AGENTRY_DEFAULT_CONCURRENT_TURNS', 1, 1_000_000),
    },
    adminToken: optional(env, 'AGENTRY_ADMIN_TOKEN'),
  };
}
