/**
 * The one typed dependency object built at startup and handed to the HTTP layer, the CLI, the engine and the
 * webhook dispatcher. No module keeps singletons; tests build their own.
 */
import { sql } from 'kysely';
import type { Logger } from 'pino';
import { type Bus, createLocalBus } from './bus/bus.ts';
import { createLateBus } from './bus/late-bus.ts';
import { createStreamHub, type StreamHub } from './bus/live-hub.ts';
import type { RedisCounter } from './bus/redis-counter.ts';
import type { Config } from './config.ts';
import { type A2aService, createA2aService } from './domain/a2a/a2a-service.ts';
import { createPushConfigs, type PushConfigs } from './domain/a2a/push-configs.ts';
import { type AgentService, createAgentService } from './domain/agents/agent-service.ts';
import { createAgentApplier } from './domain/apply/agent-documents.ts';
import { type ApplyService, createApplyService } from './domain/apply/apply-service.ts';
import { type ChatCompletionService, createChatCompletionService } from './domain/chat-completions/chat-service.ts';
import { checkAttachment, resolveAttachment } from './domain/files/attachments.ts';
import { createFileReader, createFileService, type FileService } from './domain/files/file-service.ts';
import { createImageImporter } from './domain/files/image-import.ts';
import { createIdempotency, type Idempotency } from './domain/idempotency.ts';
import { createLimitService, type LimitService } from './domain/limits/limit-service.ts';
import { createRateLimiter, type RateLimiter } from './domain/limits/rate-limiter.ts';
import { type CredentialVault, createCredentialVault } from './domain/mcp-servers/credential-vault.ts';
import { createMcpOAuthService, type McpOAuthService } from './domain/mcp-servers/mcp-oauth-service.ts';
import { createMcpPromptParts } from './domain/mcp-servers/mcp-prompt-parts.ts';
import { createMcpServerCatalog, type McpServerCatalog } from './domain/mcp-servers/mcp-server-catalog.ts';
import { createMcpServerService, type McpServerService } from './domain/mcp-servers/mcp-server-service.ts';
import { createMcpServerStore } from './domain/mcp-servers/mcp-server-store.ts';
import { createMemoryService, type MemoryService } from './domain/memories/memory-service.ts';
import { createMemoryStore } from './domain/memories/memory-store.ts';
import { type Authenticator, createAuthenticator } from './domain/orgs/api-keys.ts';
import { createOrgService, type OrgService, projectIdOf } from './domain/orgs/org-service.ts';
import { eventsAfter, eventsFrom, lastEventSeq, newestSeqs, type SessionEvent } from './domain/outbox.ts';
import { createProtocolTurns, type ProtocolTurns } from './domain/protocol-turns/protocol-turns.ts';
import { createReportService, type ReportService } from './domain/reports/report-service.ts';
import { type ConversationService, createConversationService } from './domain/responses/conversations.ts';
import {
  configuredProviders,
  getModel,
  listModels,
  type ModelList,
  type ModelObject,
} from './domain/responses/models.ts';
import { createResponseService, type ResponseService } from './domain/responses/response-service.ts';
import { createRetentionService, type RetentionService } from './domain/retention/retention-service.ts';
import { createRunService, type RunService } from './domain/runs/run-service.ts';
import { createScheduleRunner, type ScheduleRunner } from './domain/schedules/schedule-runner.ts';
import { createScheduleService, type ScheduleService } from './domain/schedules/schedule-service.ts';
import { scheduleTurnHook } from './domain/schedules/schedule-store.ts';
import { createSessionService, type SessionService } from './domain/sessions/session-service.ts';
import { createLegacyWebhookService, type LegacyWebhookService } from './domain/tasks/legacy-webhooks.ts';
import { createTaskNotifier, type TaskNotifier } from './domain/tasks/task-notifier.ts';
import { createTaskService, type TaskService } from './domain/tasks/task-service.ts';
import { createThreadService, type ThreadService } from './domain/threads/thread-service.ts';
import type { LocalClaimsSlot } from './domain/turns/local-claims.ts';
import { createMessageService, type MessageService } from './domain/turns/message-service.ts';
import type { TurnHooks } from './domain/turns/turn-hooks.ts';
import { createUsageService, type UsageService } from './domain/usage/usage-service.ts';
import { type FollowUpSession, followUpSession } from './domain/webhooks/followup.ts';
import { createWebhookServices, type WebhookServices } from './domain/webhooks/webhook-services.ts';
import { DELIVERY_TIMEOUT_MS } from './domain/webhooks/webhook-types.ts';
import { createWorkflowService, type WorkflowService, workflowTurnHook } from './domain/workflows/workflow-service.ts';
import { createEngine, type Engine } from './engine/engine.ts';
import { createScheduler, type Scheduler } from './engine/scheduler.ts';
import { type Clock, systemClock } from './lib/clock.ts';
import { createEgressFetch, type EgressFetch } from './lib/egress-fetch.ts';
import { prepareDataDir } from './lib/private-files.ts';
import { deploymentSecretBox, type SecretBox } from './lib/secret-box.ts';
import { createModelCatalogue, installModelCatalogue, type ModelCatalogue } from './models/catalogue.ts';
import { createModelRegistry, type ModelRegistry } from './models/registry.ts';
import { type Metrics, noopMetrics } from './observability/metrics-types.ts';
import type { Tracing } from './observability/tracing.ts';
import { openStorage, type Storage } from './storage/db.ts';
import { type AgentNetworkOptions, createBuiltinProviders } from './tools/builtin/builtin-providers.ts';
import { createCpuWork } from './tools/builtin/cpu-work.ts';
import { createMemoryProvider } from './tools/builtin/memory-tool.ts';
import { createClientToolProvider } from './tools/client-tools.ts';
import { createDiscover } from './tools/mcp/discovery.ts';
import { createMcpPool, type McpPool } from './tools/mcp/pool.ts';
import { connectorKeyPrefix, createMcpProvider } from './tools/mcp/provider.ts';
import { createToolListCache } from './tools/mcp/tool-cache.ts';
import { createQuestionProvider } from './tools/question.ts';
import { createToolRegistry, type ToolRegistry } from './tools/registry.ts';
import { createDeferredSandboxRuntime } from './tools/sandbox/deferred-runtime.ts';
import { describeIdentity } from './tools/sandbox/sandbox-identity.ts';
import type { SandboxRuntime, SandboxRuntimeOptions } from './tools/sandbox/sandbox-runtime.ts';
import { type A2aPushNotifier, createA2aPushNotifier } from './webhooks/a2a-push.ts';
import { createWebhookDispatcher, type WebhookDispatcher } from './webhooks/dispatcher.ts';

export interface Deps {
  config: Config;
  logger: Logger;
  clock: Clock;
  storage: Storage;
  auth: Authenticator;
  models: ModelRegistry;
  /** What is known of each model: window, output limit, prices, capabilities (built in and the operator's). */
  catalogue: ModelCatalogue;
  agents: AgentService;
  /** Agents as code: plans and applies agent documents by name (POST /v1/apply). */
  /** Agents as code: export and apply of agents, connectors, schedules and webhook endpoints. */
  agentApply: ApplyService;
  sessions: SessionService;
  orgs: OrgService;
  idempotency: Idempotency;
  bus: Bus;
  /** Live session events of this process, per session. */
  live: StreamHub;
  messages: MessageService;
  /** What the features built on turns add to their state changes, in the change's transaction. */
  turnHooks: TurnHooks;
  /** Where this process's engine, when it runs, lets accepts take the leases of sessions it can run at once. */
  localClaims: LocalClaimsSlot;
  responses: ResponseService;
  /** POST /v1/chat/completions: stateless turns in hidden sessions. */
  chatCompletions: ChatCompletionService;
  /** Turns of agents for callers of other protocols (the MCP endpoints). */
  protocolTurns: ProtocolTurns;
  conversations: ConversationService;
  webhooks: WebhookServices;
  /** Encrypts the secrets stored in the database (connector headers, webhook secrets) and opens them for use. */
  secrets: SecretBox;
  mcpServers: McpServerService;
  /** Agents' memories across sessions (docs/memory.md), for the API; the `memory` tool reads the same store. */
  memories: MemoryService;
  /** MCP sign-in (docs/mcp-auth.md): starting an authorization, its callback, the client metadata document. */
  mcpOAuth: McpOAuthService;
  /** The credential vault of MCP connectors. */
  mcpCredentials: CredentialVault;
  /** A connector's resources and prompts, asked of the server for the API. */
  mcpCatalog: McpServerCatalog;
  /** The tool layer: every turn's tools and every accepted message's tool warnings. */
  tools: ToolRegistry;
  /** Agent workspaces and sandboxed commands (docs/sandbox.md). */
  sandbox: SandboxRuntime;
  /** Settles once the sandbox is detected (and its line logged); at once unless built with `deferSandbox`. */
  sandboxReady: Promise<void>;
  /** Reports in agent workspaces, for the download routes. */
  reports: ReportService;
  /** OpenTelemetry trace export; null when no OTLP endpoint is configured (nothing runs then). */
  tracing: Tracing | null;
  /** Prometheus metrics (no-ops unless AGENTRY_METRICS is on). */
  metrics: Metrics;
  /** Rate and concurrency limits of organizations and keys, for the operator's routes and the CLI. */
  limits: LimitService;
  /** Counts requests against the limits per minute (in Redis or the database: shared by every process). */
  rateLimiter: RateLimiter;
  /** Legacy Tasks: prompts run as turns of hidden workspace Sessions (docs/legacy.md). */
  tasks: TaskService;
  /** Agents as A2A servers: tasks are turns of sessions (docs/a2a.md). */
  a2a: A2aService;
  /** A2A push notification configs, per task (docs/a2a.md); the notifier delivers them. */
  a2aPush: PushConfigs;
  /** Legacy organization webhooks (/v1/webhooks): task.* notifications, best-effort. */
  legacyWebhooks: LegacyWebhookService;
  /** Threads of the older API (/api/sdk/threads). */
  threads: ThreadService;
  /** Tool runs of the older API as Workflow Runs. */
  workflows: WorkflowService;
  /** Schedules and their runs (docs/schedules.md). */
  schedules: ScheduleService;
  /** Fires ticks and starts schedule runs (the worker's scheduler and manual runs use it). */
  scheduleRunner: ScheduleRunner;
  /** Runs and their traces (read only). */
  runs: RunService;
  /** Usage reports over the runs (docs/usage.md). */
  usage: UsageService;
  /** Uploaded files, for /v1/files and the older API's files. */
  files: FileService;
  /** Each organization's data retention and the sweeper that enforces it (docs/retention.md). */
  retention: RetentionService;
  /** The organization's agents and the configured model providers, as /v1/models lists them. */
  listModels(orgId: string): Promise<ModelList>;
  getModel(orgId: string, id: string): Promise<ModelObject>;
  /** The retained session events, for the session stream's resume and replay. */
  sessionEvents: {
    lastSeq(sessionId: string): Promise<number>;
    after(sessionId: string, afterSeq: number, limit: number): Promise<{ events: SessionEvent[]; truncated: boolean }>;
  };
  /** A session as the webhook follow-up route shows it. */
  followUpSession(orgId: string, sessionId: string): Promise<FollowUpSession>;
  /**
   * Applies pending migrations and connects the cluster bus: the first work that needs the database. buildDeps does
   * it, unless asked to leave it to its caller (`deferDatabase`: main.ts, which listens first and then tries this
   * until the database answers). Does nothing once it has succeeded.
   */
  connect(): Promise<void>;
  /** Closes what the services hold open besides storage and the bus (MCP connections, CPU workers). */
  close(): Promise<void>;
}

/** Images given by URL to /v1/responses: OpenAI's limit for one image. */
const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export interface BuildDepsOptions {
  /** Use this bus instead of the one the configuration asks for (the CLI needs none across processes). */
  bus?: Bus;
  /** Name resolution and trusted certificates of the agents' network tools and sandbox proxy (tests: local hosts). */
  agentNetwork?: AgentNetworkOptions;
  /** false: no bubblewrap trial and no startup line (the CLI runs no turn); the sandbox is then unavailable. */
  detectSandbox?: boolean;
  /** SQLite: WAL checkpoints on a thread of their own (the server process). */
  backgroundCheckpoints?: boolean;
  /** true: touch no database yet; the caller runs `deps.connect()` (retrying while the database is unreachable). */
  deferDatabase?: boolean;
  /**
   * true: return while the sandbox is detected (`deps.sandboxReady` settles when it is); meanwhile each use of the
   * sandbox, and the sandbox tools' listing, waits for it.
   */
  deferSandbox?: boolean;
}

/**
 * Opens storage, applies migrations and wires the services. The bus is Redis when REDIS_URL is set (cluster
 * mode), else in-process (embedded mode).
 */
export async function buildDeps(
  config: Config,
  logger: Logger,
  clock: Clock = systemClock,
  options: BuildDepsOptions = {},
): Promise<Deps> {
  const catalogue = createModelCatalogue(config.modelCatalog);
  installModelCatalogue(catalogue);
  const models = createModelRegistry(config);
  const modelProblem = models.problem(config.defaultModel);
  if (modelProblem !== null) throw new StartupError(`AGENTRY_DEFAULT_MODEL: ${modelProblem}`);
  if (config.redisUrl !== null && config.databaseUrl === null) {
    // Redis only makes sense between processes on several machines, and SQLite is one machine's file.
    throw new StartupError(
      'REDIS_URL is set but DATABASE_URL is not: cluster mode needs PostgreSQL (SQLite serves one process); set DATABASE_URL or unset REDIS_URL',
    );
  }
  const unfixed = prepareDataDir(config.dataDir);
  if (unfixed.length > 0) {
    logger.warn(
      { problems: unfixed },
      `the data directory could not be made private (owner only): ${unfixed.join('; ')}`,
    );
  }
  const storage = await openStorage(config, {
    backgroundCheckpoints: options.backgroundCheckpoints ?? false,
    autocheckpointPages: config.sqliteWalPages,
    onCheckpointerError: (error) => logger.warn({ err: error }, 'the SQLite checkpoint thread stopped'),
    onLongCheckpointPause: (pausedMs) =>
      logger.warn(
        { pausedMs: Math.round(pausedMs) },
        'the SQLite checkpoint thread held writes back longer than allowed (a slow disk sync?); writes resumed',
      ),
    storageProbeMs: config.storageProbeMs,
    logger,
    onConnectionError: (error) =>
      logger.warn({ err: error }, 'a database connection was lost; a new one is opened when needed'),
  });
  const secrets = deploymentSecretBox(config);
  // Cluster mode: the Redis bus is named after the database, so it is bound once the database answers.
  const late = options.bus === undefined && config.redisUrl !== null ? createLateBus() : null;
  const bus = options.bus ?? late ?? createLocalBus();
  // The rate limiter's counters in Redis, named like the bus's channels; the database counts until then.
  let rateCounter: RedisCounter | null = null;
  let connected = false;
  const connect = async () => {
    if (connected) return;
    const applied = await storage.migrate(secrets);
    if (applied.length > 0) logger.info({ migrations: applied }, `database migrated (${applied.join(', ')})`);
    if (late !== null && config.redisUrl !== null && rateCounter === null) {
      const prefix = await deploymentPrefix(config, storage);
      late.bind(await redisBus(config.redisUrl, prefix, logger));
      const { createRedisCounter } = await import('./bus/redis-counter.ts');
      rateCounter = createRedisCounter(config.redisUrl, prefix, logger);
    }
    connected = true;
  };
  if (options.deferDatabase !== true) {
    try {
      await connect();
    } catch (error) {
      await storage.close();
      throw error;
    }
  }
  const db = storage.db;
  // The OpenTelemetry SDK and prom-client are loaded only when configured: off, they cost nothing, not even startup.
  const tracing =
    config.tracing === null ? null : (await import('./observability/tracing.ts')).createTracing(config.tracing);
  const metrics = config.metrics.enabled ? (await import('./observability/metrics.ts')).createMetrics() : noopMetrics;
  if (config.tracing !== null) {
    const { url, protocol, serviceName } = config.tracing;
    logger.info({ url, protocol, serviceName }, `traces: exporting to ${url} (${protocol}) as ${serviceName}`);
  }
  if (config.metrics.enabled) {
    logger.info(`metrics: GET /metrics${config.metrics.token === null ? '' : ' (bearer token required)'}`);
  }
  metrics.watchDatabase(db);
  const live = createStreamHub(bus, {
    store: {
      after: (sessionId, afterSeq, limit) => eventsFrom(db, sessionId, afterSeq, limit),
      newest: (sessionIds) => newestSeqs(db, sessionIds),
    },
    logger,
    // Open streams check the database for events that did not arrive live as often as workers poll it for work:
    // in cluster mode always (a publication can be lost elsewhere), with the in-process bus never (it loses none).
    catchUpMs: config.pollMs,
    checkAlways: config.redisUrl !== null,
  });
  const idempotency = createIdempotency({ db, clock, ttlMs: config.idempotencyTtlMs });
  const webhooks = createWebhookServices({
    db,
    dialect: storage.dialect,
    clock,
    secrets,
    allowInsecureDestinations: config.allowInsecureDestinations,
    retryWindowMs: config.webhookRetryWindowMs,
    historyRetentionMs: config.webhookHistoryRetentionMs,
    changeVersion: storage.changeVersion,
  });
  // Every writer of webhook events asks it which of them the organization's endpoints receive.
  const { subscriptions } = webhooks;
  // Features built on turns: schedule runs settle with their turns, tool-run turns report workflow.run.* webhooks.
  const turnHooks: TurnHooks = [scheduleTurnHook, workflowTurnHook];
  const sessions = createSessionService({ db, clock, subscriptions, bus });
  const mcpStore = createMcpServerStore(secrets);
  // Organization connectors are user-chosen destinations: the egress guard applies. Toolkit endpoints are the
  // operator's own configuration and may live on a private network.
  const guardedFetch = createEgressFetch({ allowInsecure: config.allowInsecureDestinations });
  const toolkitFetch = createEgressFetch({ allowInsecure: true });
  const fetches: EgressFetch[] = [guardedFetch, toolkitFetch];
  const mcpClient = {
    requestTimeoutMs: config.mcpRequestTimeoutMs,
    idleCloseMs: config.mcpIdleCloseMs,
    maxResponseBytes: config.mcpMaxResponseBytes,
    logger,
  };
  const connectorPool = createMcpPool({ ...mcpClient, fetch: guardedFetch });
  const toolkitPool = createMcpPool({ ...mcpClient, fetch: toolkitFetch });
  const pools: McpPool[] = [connectorPool, toolkitPool];
  const discover = createDiscover({ ...mcpClient, fetch: guardedFetch });
  const mcpServers = createMcpServerService({
    db,
    clock,
    store: mcpStore,
    discover,
    allowInsecureDestinations: config.allowInsecureDestinations,
    closeConnections: (id) => connectorPool.evictPrefix(connectorKeyPrefix(id)),
  });
  // OAuth requests (discovery, registration, tokens) go through the same egress guard as the connections.
  const mcpCredentials = createCredentialVault({ secrets, clock, fetch: guardedFetch, subscriptions, logger });
  const mcpOAuth = createMcpOAuthService({
    db,
    clock,
    secrets,
    store: mcpStore,
    vault: mcpCredentials,
    discover,
    fetch: guardedFetch,
    publicUrl: config.publicUrl,
  });
  const sandboxOptions: SandboxRuntimeOptions = {
    dataDir: config.dataDir,
    limits: config.sandbox.limits,
    fileLimits: { readBytes: config.sandbox.readBytes, writeBytes: config.sandbox.writeBytes },
    quotaBytes: config.sandbox.workspaceQuotaBytes,
    projectIdOf: (orgId) => projectIdOf(db, orgId),
    logger,
    resolver: options.agentNetwork?.resolver,
    allowInsecureDestinations: config.allowInsecureDestinations,
    egressPorts: config.sandbox.egressPorts ?? undefined,
    // The runtime detects bubblewrap itself, with its trial run in the runs' folder of this process.
    ...(options.detectSandbox === false
      ? { detection: { available: false, reason: 'sandbox detection is off in this process', hint: 'run the server' } }
      : { bwrapPath: config.sandbox.bwrapPath, user: config.sandbox.user, uidBase: config.sandbox.uidBase }),
  };
  // Detecting bubblewrap is mostly waiting on child processes: a caller that defers it builds the rest meanwhile.
  const { runtime: sandbox, ready: sandboxDetected } = createDeferredSandboxRuntime(sandboxOptions);
  const sandboxReady = sandboxDetected.then(() => {
    if (options.detectSandbox !== false) logSandbox(logger, sandbox);
  });
  sandboxReady.catch(() => {});
  if (options.deferSandbox !== true) await sandboxReady;
  // Untrusted input (web pages, search answers, skill front matter) is parsed in worker threads with limits.
  const cpu = createCpuWork(config.cpuPool, logger);
  const builtin = createBuiltinProviders(config, sandbox, cpu, options.agentNetwork);
  const mcpProvider = createMcpProvider({
    db,
    clock,
    logger,
    store: mcpStore,
    credentials: mcpCredentials,
    cache: createToolListCache({ clock, defaultTtlMs: config.mcpToolsTtlMs, logger }),
    connectorPool,
    toolkitPool,
    toolkits: config.toolkits,
  });
  const mcpCatalog = createMcpServerCatalog({
    browse: mcpProvider.browse,
    requestTimeoutMs: config.mcpRequestTimeoutMs,
  });
  const tools = createToolRegistry([
    createClientToolProvider(),
    createQuestionProvider(),
    mcpProvider,
    ...builtin.providers,
    createMemoryProvider(createMemoryStore(clock)),
  ]);
  const agents = createAgentService({
    db,
    clock,
    defaultModel: config.defaultModel,
    validation: { models, allowInsecureDestinations: config.allowInsecureDestinations },
    idempotency,
    connectors: mcpServers,
    changeVersion: storage.changeVersion,
    toolWarnings: tools.warnings,
  });
  const images = createImageImporter({
    db,
    clock,
    dataDir: config.dataDir,
    allowInsecureDestinations: config.allowInsecureDestinations,
    maxBytes: Math.min(config.maxUploadBytes, MAX_IMAGE_BYTES),
  });
  const localClaims: LocalClaimsSlot = { current: null };
  const messages = createMessageService({
    db,
    clock,
    bus,
    localClaims,
    idempotency,
    toolWarnings: tools.warnings,
    subscriptions,
    turnHooks,
    promptParts: createMcpPromptParts({
      db,
      withServer: mcpProvider.withServer,
      images,
      requestTimeoutMs: config.mcpRequestTimeoutMs,
    }),
    resolveAttachment,
  });
  const scheduleRunner = createScheduleRunner({
    db,
    dialect: storage.dialect,
    clock,
    bus,
    logger,
    agents,
    sessions,
    messages,
    subscriptions,
  });
  const schedules = createScheduleService({
    db,
    clock,
    idempotency,
    logger,
    dispatch: (scheduleId) => scheduleRunner.dispatch(scheduleId),
    subscriptions,
  });
  const threads = createThreadService({ db, clock });
  const providers = configuredProviders(config);
  const limits = createLimitService({
    db,
    clock,
    defaults: config.limitDefaults,
    changeVersion: storage.changeVersion,
  });
  return {
    runs: createRunService({ db }),
    usage: createUsageService({ db }),
    files: createFileService({ db, clock, dataDir: config.dataDir, maxUploadBytes: config.maxUploadBytes }),
    retention: createRetentionService({
      db,
      clock,
      logger: logger.child({ component: 'retention' }),
      defaults: config.retention,
      dataDir: config.dataDir,
      batch: config.retentionBatch,
      onSweep: (counts) => metrics.retentionDeleted(counts),
    }),
    listModels: (orgId) => listModels({ db, providers, catalogue }, orgId),
    getModel: (orgId, id) => getModel({ db, providers, catalogue }, orgId, id),
    sessionEvents: {
      lastSeq: (sessionId) => lastEventSeq(db, sessionId),
      after: (sessionId, afterSeq, limit) => eventsAfter(db, sessionId, afterSeq, limit),
    },
    followUpSession: (orgId, sessionId) => followUpSession(db, orgId, sessionId),
    config,
    logger,
    clock,
    storage,
    auth: createAuthenticator({ db, changeVersion: storage.changeVersion }),
    models,
    catalogue,
    agents,
    agentApply: createApplyService({
      agents,
      agentApplier: createAgentApplier({ agents }),
      mcpServers,
      schedules,
      endpoints: webhooks.endpoints,
      clock,
    }),
    sessions,
    orgs: createOrgService({ db, clock, agents }),
    idempotency,
    bus,
    live,
    messages,
    turnHooks,
    localClaims,
    responses: createResponseService({
      db,
      clock,
      bus,
      localClaims,
      live,
      idempotency,
      agents,
      sessions,
      checkAttachment,
      images,
      messages,
      subscriptions,
      turnHooks,
      models,
    }),
    chatCompletions: createChatCompletionService({
      db,
      clock,
      bus,
      localClaims,
      live,
      agents,
      checkAttachment,
      images,
      toolWarnings: tools.warnings,
      messages,
      subscriptions,
      turnHooks,
    }),
    protocolTurns: createProtocolTurns({
      agents,
      sessions,
      messages,
      live,
      // A publication can be lost only between processes (cluster mode); there, re-read as streams check.
      recheckMs: config.redisUrl === null ? null : config.pollMs,
    }),
    conversations: createConversationService({ db, clock, bus, agents, sessions, messages, subscriptions, turnHooks }),
    webhooks,
    secrets,
    mcpServers,
    memories: createMemoryService({ db, clock }),
    mcpOAuth,
    mcpCredentials,
    mcpCatalog,
    tools,
    sandbox,
    sandboxReady,
    reports: createReportService({ agents, runtime: sandbox }),
    tracing,
    metrics,
    limits,
    rateLimiter: createRateLimiter({
      db: storage.counterDb,
      defaults: config.limitDefaults,
      shared: () => rateCounter,
    }),
    a2aPush: createPushConfigs({
      db,
      clock,
      secrets,
      allowInsecureDestinations: config.allowInsecureDestinations,
    }),
    a2a: createA2aService({
      db,
      live,
      messages,
      sessions,
      agentOf: (orgId, agentId, executor) => agents.get(orgId, agentId, executor),
      pollMs: config.pollMs,
    }),
    tasks: createTaskService({
      db,
      clock,
      bus,
      live,
      messages,
      agentOf: (orgId, agentId, executor) => agents.get(orgId, agentId, executor),
      toolWarnings: tools.warnings,
      checkAttachment,
    }),
    legacyWebhooks: createLegacyWebhookService({
      db,
      dialect: storage.dialect,
      clock,
      secrets,
      allowInsecureDestinations: config.allowInsecureDestinations,
    }),
    threads,
    workflows: createWorkflowService({
      db,
      clock,
      bus,
      live,
      models,
      threads,
      messages,
      agentOf: (orgId, agentId, executor) => agents.get(orgId, agentId, executor),
      toolWarnings: tools.warnings,
      checkAttachment,
      subscriptions,
    }),
    schedules,
    scheduleRunner,
    connect,
    close: async () => {
      await tracing?.shutdown().catch(() => undefined);
      await sandbox.close();
      await builtin.close();
      await cpu.close();
      await Promise.all(pools.map((pool) => pool.close()));
      await Promise.all(fetches.map((fetcher) => fetcher.close()));
      await rateCounter?.close();
    },
  };
}

/** One line at startup: whether agents' commands can be sandboxed here, and if not why and how to fix it. */
function logSandbox(logger: Logger, sandbox: SandboxRuntime): void {
  const host = sandbox.available();
  if (host.available) {
    logger.info(
      {
        bwrap: host.path,
        version: host.version,
        identity: host.identity,
        seccomp: host.seccomp,
        network: host.socat !== null,
        warnings: host.warnings,
      },
      `sandbox available: bubblewrap ${host.version}, sandboxes run as ${describeIdentity(host.identity)}${host.warnings.length > 0 ? ` (${host.warnings.join('; ')})` : ''}`,
    );
  } else {
    logger.warn(
      { reason: host.reason, hint: host.hint },
      `sandbox unavailable, the sandbox tools are not offered: ${host.reason}; to fix: ${host.hint}`,
    );
  }
}

/**
 * The Redis bus of this deployment. Its channels are named after the database and schema as Postgres itself
 * reports them, so every process of one deployment meets on the same channels however it reaches the database,
 * and deployments sharing a Redis stay apart (AGENTRY_REDIS_PREFIX separates same-named databases).
 */
async function redisBus(url: string, prefix: string, logger: Logger): Promise<Bus> {
  // ioredis loads only in a process that uses Redis.
  const { createRedisBus } = await import('./bus/redis-bus.ts');
  return createRedisBus(url, logger, { channelPrefix: prefix });
}

/** The start of this deployment's Redis names (channels, counters): see redisBus. */
async function deploymentPrefix(config: Config, storage: Storage): Promise<string> {
  const { rows } = await sql<{ database: string; schema: string | null }>`
    select current_database() as database, current_schema() as schema`.execute(storage.db);
  const identity = rows[0];
  if (identity === undefined) throw new StartupError('could not read the database identity for REDIS channel names');
  const { deploymentChannelPrefix } = await import('./bus/redis-bus.ts');
  return deploymentChannelPrefix(config.redisPrefix, identity.database, identity.schema ?? 'public');
}

/** The turn engine of this process, over the same storage and bus as the API. */
export function buildEngine(deps: Deps): Engine {
  return createEngine(
    {
      db: deps.storage.workerDb,
      registryDb: deps.storage.counterDb,
      dialect: deps.storage.dialect,
      space: deps.storage.space,
      leaseMs: deps.config.leaseMs,
      turnLimits: deps.limits.turnLimits,
      clock: deps.clock,
      bus: deps.bus,
      models: deps.models,
      logger: deps.logger,
      tools: deps.tools,
      toolTimeoutMs: deps.config.toolTimeoutMs,
      allowInsecureDestinations: deps.config.allowInsecureDestinations,
      files: createFileReader({ db: deps.storage.db, dataDir: deps.config.dataDir }),
      metrics: deps.metrics,
      subscriptions: deps.webhooks.subscriptions,
      turnHooks: deps.turnHooks,
      agentAtStart: (orgId, agentId) => deps.agents.atTurnStart(orgId, agentId, deps.storage.workerDb),
      runExporter:
        deps.tracing === null
          ? undefined
          : deps.tracing.runExporter({
              db: deps.storage.db,
              logger: deps.logger,
              now: () => deps.clock.now(),
              pollMs: Math.max(deps.config.pollMs, 1000),
            }),
    },
    {
      concurrency: deps.config.workerConcurrency,
      pollMs: deps.config.pollMs,
      processTtlMs: deps.config.processTtlMs,
      contextCacheBytes: deps.config.contextCacheBytes,
      role: deps.config.role,
      localClaims: deps.localClaims,
    },
  );
}

/** The schedule ticker of this process (roles `all` and `worker`). */
export function buildScheduler(deps: Deps): Scheduler {
  return createScheduler(deps.scheduleRunner, deps.logger, {
    pollMs: deps.config.pollMs,
    misfireGraceMs: deps.config.scheduleMisfireGraceMs,
    space: deps.storage.space,
  });
}

/**
 * The background senders look when the bus says changes committed, so a notification leaves within a fraction of a
 * second of its event, and otherwise poll every AGENTRY_POLL_MS for news nobody announced. Under load they look at
 * most once per gap: webhooks every 50 ms; A2A push and legacy task notices, which few changes concern, every
 * 250 ms (as often as they polled before the signal), since in cluster mode every worker hears every change.
 */
const WEBHOOK_MIN_GAP_MS = 50;
const NOTICE_MIN_GAP_MS = 250;

/** The webhook dispatcher of this process (roles `all` and `worker`), over the same storage and bus as the API. */
export function buildDispatcher(deps: Deps): WebhookDispatcher {
  const { config } = deps;
  return createWebhookDispatcher(
    {
      db: deps.storage.db,
      dialect: deps.storage.dialect,
      clock: deps.clock,
      bus: deps.bus,
      logger: deps.logger,
      deliveries: deps.webhooks.deliveries,
      secrets: deps.secrets,
      allowInsecureDestinations: config.allowInsecureDestinations,
      retryBaseMs: config.webhookRetryBaseMs,
      retryWindowMs: config.webhookRetryWindowMs,
      historyRetentionMs: config.webhookHistoryRetentionMs,
      metrics: deps.metrics,
      space: deps.storage.space,
    },
    {
      concurrency: config.webhookConcurrency,
      perEndpoint: config.webhookEndpointConcurrency,
      pollMs: config.pollMs,
      minGapMs: WEBHOOK_MIN_GAP_MS,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      // Longer than any attempt, so a live attempt is never taken over; a crashed worker's lapse within this.
      leaseMs: Math.max(config.leaseMs, DELIVERY_TIMEOUT_MS * 2),
    },
  );
}

/** The A2A push notification sender of this process (roles `all` and `worker`), beside the webhook dispatcher. */
export function buildA2aPushNotifier(deps: Deps): A2aPushNotifier {
  const { config } = deps;
  return createA2aPushNotifier(
    {
      db: deps.storage.db,
      dialect: deps.storage.dialect,
      clock: deps.clock,
      logger: deps.logger,
      messages: deps.messages,
      reportsOf: (orgId, taskId) => deps.a2a.reportsOf(orgId, taskId),
      secrets: deps.secrets,
      allowInsecureDestinations: config.allowInsecureDestinations,
      retryBaseMs: config.webhookRetryBaseMs,
      retryWindowMs: config.webhookRetryWindowMs,
      historyRetentionMs: config.webhookHistoryRetentionMs,
      space: deps.storage.space,
      bus: deps.bus,
    },
    {
      pollMs: config.pollMs,
      minGapMs: NOTICE_MIN_GAP_MS,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      leaseMs: Math.max(config.leaseMs, DELIVERY_TIMEOUT_MS * 2),
      concurrency: config.webhookConcurrency,
    },
  );
}

/** The task.* legacy webhook sender of this process (roles `all` and `worker`), beside the webhook dispatcher. */
export function buildTaskNotifier(deps: Deps): TaskNotifier {
  return createTaskNotifier({
    db: deps.storage.db,
    clock: deps.clock,
    logger: deps.logger,
    webhooks: deps.legacyWebhooks,
    workflows: deps.workflows,
    allowInsecureDestinations: deps.config.allowInsecureDestinations,
    bus: deps.bus,
    pollMs: deps.config.pollMs,
    minGapMs: NOTICE_MIN_GAP_MS,
    timeoutMs: DELIVERY_TIMEOUT_MS,
    space: deps.storage.space,
  });
}
