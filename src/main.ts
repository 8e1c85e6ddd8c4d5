/**
 * `npm start` / `agentry serve`: load config, build deps, listen, first-start bootstrap, then ready; and shut down
 * gracefully on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the database).
 */
import type { Logger } from 'pino';
import { buildApp } from './app.ts';
import { type Config, ConfigError, loadConfig } from './config.ts';
import {
  buildA2aPushNotifier,
  buildDeps,
  buildDispatcher,
  buildEngine,
  buildScheduler,
  buildTaskNotifier,
  type Deps,
} from './deps.ts';
import { agentModelIds } from './domain/agents/agent-repo.ts';
import { type BootstrapResult, bootstrap } from './domain/orgs/org-service.ts';
import type { Lifecycle } from './http/lifecycle.ts';
import { systemClock } from './lib/clock.ts';
import { createLogger } from './logger.ts';
import { DEFAULT_MODEL_ENTRY } from './models/catalogue.ts';
import { isDatabaseUnavailable, isStorageFull } from './storage/errors.ts';

const IDEMPOTENCY_SWEEP_MS = 3600_000;
/** How often a process that serves turns settles Chat Completions turns their requests left waiting. */
const ABANDONED_SWEEP_MS = 60_000;
/** Run from the project folder: `npx agentry` elsewhere would fetch an unrelated package from the npm registry. */
const KEY_COMMAND = 'from the project folder, bin/agentry.js keys create --org default';

export interface RunningServer {
  url: string;
  stop(): Promise<void>;
}

function announce(logger: Logger, message: string): void {
  // Always visible: scripts and benchmarks wait for this line whatever LOG_LEVEL says.
  if (logger.isLevelEnabled('info')) logger.info(message);
  else process.stdout.write(`${message}\n`);
}

/** What the operator needs to know about admin keys after this start; the key itself appears only here, once. */
function announceBootstrap(logger: Logger, result: BootstrapResult, consoleUrl: string | null): void {
  if (result.createdKey !== null) {
    // Outside the structured log, so it is never stored in log files by accident.
    const open = consoleUrl === null ? '' : `Open the web console at ${consoleUrl} and sign in with it.\n`;
    process.stdout.write(
      `\nCreated organization "default". Its admin API key (shown only this once):\n\n  ${result.createdKey}\n\n${open}More keys, ${KEY_COMMAND}\n\n`,
    );
  } else if (result.createdOrg) {
    announce(logger, 'created organization "default" with the admin API key given in AGENTRY_BOOTSTRAP_KEY');
  } else {
    announce(logger, `admin API keys are shown only on the first start; to make one, ${KEY_COMMAND}`);
  }
}

/** One line naming every model provider and whether its turns can run. */
function logProviders(logger: Logger, deps: Deps): void {
  const providers = deps.models.describe();
  const summary = providers.map((provider) => `${provider.name} (${provider.detail})`).join(', ');
  logger.info({ providers }, `model providers: ${summary}; default model ${deps.config.defaultModel}`);
}

/**
 * One line naming the models in use (the default model, the agents' models) that the catalogue does not describe:
 * they run with the default window and output limit, unpriced. Nothing when every one is described.
 */
async function logUncataloguedModels(logger: Logger, deps: Deps): Promise<void> {
  const used = new Set([deps.config.defaultModel, ...(await agentModelIds(deps.storage.db))]);
  const unknown = [...used].filter((model) => !deps.catalogue.knows(model));
  if (unknown.length === 0) return;
  const { contextWindow, maxOutputTokens } = DEFAULT_MODEL_ENTRY;
  logger.info(
    { models: unknown, contextWindow, maxOutputTokens },
    `models not in the catalogue, given the defaults (${contextWindow} tokens of context, ${maxOutputTokens} of output, unpriced): ${unknown.join(', ')}; describe them in AGENTRY_MODEL_CATALOG or AGENTRY_PROVIDERS`,
  );
}

export async function startServer(config: Config, logger: Logger = createLogger(config)): Promise<RunningServer> {
  // Nothing here needs the database yet: a process started while it is down listens, says "starting", and waits.
  const deps = await buildDeps(config, logger, systemClock, {
    backgroundCheckpoints: true,
    deferDatabase: true,
    deferSandbox: true,
  });
  logProviders(logger, deps);
  if (config.allowInsecureDestinations) {
    logger.warn(
      'AGENTRY_ALLOW_INSECURE_DESTINATIONS=true: private and plain-HTTP destinations are allowed (development only)',
    );
  }
  if (config.role !== 'all' && config.redisUrl === null) {
    logger.warn(
      { role: config.role },
      'AGENTRY_ROLE is not "all" but REDIS_URL is unset: wake-ups and interrupts between processes wait for the database poll (AGENTRY_POLL_MS, the lease heartbeat) and live events stay in the process that made them',
    );
  }
  // api: HTTP only. worker: the engine, with HTTP for /healthz and /readyz only. all: both.
  const engine = config.role === 'api' ? null : buildEngine(deps);
  const dispatcher = config.role === 'api' ? null : buildDispatcher(deps);
  const taskNotifier = config.role === 'api' ? null : buildTaskNotifier(deps);
  const a2aPush = config.role === 'api' ? null : buildA2aPushNotifier(deps);
  const scheduler = config.role === 'api' ? null : buildScheduler(deps);
  logger.info(
    {
      role: config.role,
      engine: engine !== null,
      webhooks: dispatcher !== null,
      schedules: scheduler !== null,
      routes: config.role === 'worker' ? 'probes' : 'api',
      bus: config.redisUrl === null ? 'local' : 'redis',
    },
    `starting with role ${config.role}`,
  );
  // Starting: until the database is migrated and the bootstrap below is done, the probes answer 503 and other
  // requests wait for it (or, while the database cannot be reached, get 503 at once).
  const { app, lifecycle } = await buildApp(deps, { role: config.role, starting: true });
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  const database = databaseWait(logger, lifecycle, url);
  await database.until('migrating the database', () => deps.connect());
  // A start on a full disk starts read-only (reads served, writes refused, /readyz 503) instead of failing; the
  // probe ends it once there is space (storage/storage-space.ts logs both).
  await deps.storage.space.check();
  logger.info(
    { storage: deps.storage.dialect, location: deps.storage.location, role: config.role },
    `storage ready: ${deps.storage.dialect} at ${deps.storage.location}`,
  );
  await database.until('reading the models in use', () => logUncataloguedModels(logger, deps));
  await database.until('registering the engine', async () => engine?.start());
  dispatcher?.start();
  taskNotifier?.start();
  a2aPush?.start();
  scheduler?.start();
  // Only now that the port is ours: a start that fails to listen must not use up the one showing of the first key.
  // A worker serves only the probes; the console lives on processes that serve the API.
  const consoleUrl =
    config.role === 'worker' ? null : `${url}${(await import('./http/routes/console.ts')).CONSOLE_PATH}/`;
  const bootstrapped = await database.until('creating the first organization', () =>
    bootstrap(deps.orgs, config.bootstrapKey),
  );
  announceBootstrap(logger, bootstrapped, consoleUrl);
  lifecycle.markReady();
  // The sandbox is detected meanwhile (a trial run, mostly waiting on bubblewrap); what needs it waits for it.
  deps.sandboxReady.catch((error: unknown) => {
    logger.error({ err: error }, `the sandbox could not be set up, sandboxed commands fail: ${String(error)}`);
  });
  announce(logger, `listening on ${url}`);
  if (consoleUrl !== null) announce(logger, `web console: ${consoleUrl}`);
  const sweep = setInterval(() => {
    if (!deps.storage.space.writable) return;
    deps.idempotency.sweep().catch((error: unknown) => {
      if (!isStorageFull(error)) logger.warn({ err: error }, 'idempotency sweep failed');
    });
  }, IDEMPOTENCY_SWEEP_MS);
  sweep.unref();
  const settle =
    engine === null
      ? null
      : setInterval(() => {
          if (!deps.storage.space.writable) return;
          deps.chatCompletions.settleAbandoned().catch((error: unknown) => {
            if (!isStorageFull(error)) logger.warn({ err: error }, 'settling abandoned chat completions failed');
          });
        }, ABANDONED_SWEEP_MS);
  settle?.unref();
  // Retention: in the processes that run background jobs (not role api); every one of them may sweep, the deletes
  // are safe to run at once (domain/retention), every AGENTRY_RETENTION_SWEEP_MS.
  const retain =
    engine === null
      ? null
      : setInterval(() => {
          if (!deps.storage.space.writable) return;
          deps.retention.sweep().catch((error: unknown) => {
            if (!isStorageFull(error)) logger.warn({ err: error }, 'retention sweep failed');
          });
        }, config.retentionSweepMs);
  retain?.unref();

  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      lifecycle.accepting = false;
      clearInterval(sweep);
      if (settle !== null) clearInterval(settle);
      if (retain !== null) clearInterval(retain);
      // Turns in flight get most of the grace period; what is left over is handed to another process.
      // Webhook attempts in flight finish (or time out) too; pending deliveries stay pending for the next start.
      await Promise.all([
        app.close(),
        engine?.stop(Math.floor(config.shutdownGraceMs * 0.8)),
        dispatcher?.stop(Math.floor(config.shutdownGraceMs * 0.8)),
        taskNotifier?.stop(),
        a2aPush?.stop(Math.floor(config.shutdownGraceMs * 0.8)),
        scheduler?.stop(),
        deps.retention.stop(),
      ]);
      await deps.close();
      await deps.bus.close();
      await deps.storage.close();
    })();
    return stopping;
  };
  return { url, stop };
}

/** The first wait for an unreachable database is this long; each next one twice as long, up to the maximum. */
const DATABASE_WAIT_MS = 500;
const DATABASE_WAIT_MAX_MS = 10_000;

/**
 * Startup steps that need the database, each tried until the database answers: a process started while Postgres
 * is down (or restarting) waits for it instead of exiting, logging every failed attempt with its reason, and
 * answers 503 "starting, waiting for the database" meanwhile. Any other error ends the start as before.
 */
function databaseWait(logger: Logger, lifecycle: Lifecycle, url: string) {
  return {
    async until<T>(step: string, run: () => Promise<T>): Promise<T> {
      for (let attempt = 1; ; attempt++) {
        try {
          const result = await run();
          if (lifecycle.waitingFor !== null) {
            lifecycle.waitingFor = null;
            logger.info(`the database answers; ${step} went on`);
          }
          return result;
        } catch (error) {
          if (!isDatabaseUnavailable(error)) throw error;
          const delayMs = Math.min(DATABASE_WAIT_MAX_MS, DATABASE_WAIT_MS * 2 ** (attempt - 1));
          const reason = error instanceof Error ? error.message : String(error);
          logger.warn(
            { err: error, attempt, retryInMs: delayMs, url },
            `starting: cannot reach the database while ${step} (${reason}); trying again in ${delayMs} ms`,
          );
          lifecycle.waitingFor = 'the database';
          await new Promise((resolve) => setTimeout(resolve, delayMs));
        }
      }
    },
  };
}

function exitWith(error: unknown, logger: Logger | null): never {
  if (error instanceof ConfigError) {
    process.stderr.write(`agentry: invalid configuration: ${error.message}\n`);
  } else if (logger !== null) {
    logger.fatal({ err: error }, 'startup failed');
  } else {
    process.stderr.write(`agentry: startup failed: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  process.exit(1);
}

/** Runs the server until SIGTERM or SIGINT. */
export async function serve(overrides: Partial<Config> = {}): Promise<void> {
  let config: Config;
  try {
    config = { ...loadConfig(), ...overrides };
  } catch (error) {
    exitWith(error, null);
  }
  const logger = createLogger(config);
  let server: RunningServer | null = null;
  const shutdown = (signal: NodeJS.Signals) => {
    if (server === null) {
      // Still starting: the signal ends the process as it would with no handler (this one was installed `once`).
      process.kill(process.pid, signal);
      return;
    }
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('shutdown grace period elapsed; exiting');
      process.exit(1);
    }, config.shutdownGraceMs);
    force.unref();
    server.stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (error: unknown) => exitWith(error, logger),
    );
  };
  // Installed before the server starts: a signal sent as soon as it says "listening on" must find them, and the
  // process may be paused between that line and the end of startServer on a busy machine.
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  try {
    server = await startServer(config, logger);
  } catch (error) {
    exitWith(error, logger);
  }
}

if (import.meta.main) await serve();
