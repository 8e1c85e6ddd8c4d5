/**
 * A2A push notification configs (docs/a2a.md): stored per task, durably, in the task's organization. The URL
 * passes the same egress guard as webhook endpoints when it is set (private destinations refused unless the
 * deployment allows insecure ones) and again at every attempt; the token and the Bearer credentials are sealed at
 * rest and never read back. `notified_status` starts at the task's status when the config is set, so only later
 * changes are notified (the notifier, webhooks/a2a-push.ts, moves it on).
 */
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { type Resolver, storedDestinationProblem } from '../../lib/egress.ts';
import { newId } from '../../lib/ids.ts';
import type { SecretBox } from '../../lib/secret-box.ts';
import type { Executor } from '../../storage/db.ts';
import type { A2aPushConfigsTable } from '../../storage/schema.ts';
import { isTerminal, type MessageStatus } from '../turns/message-types.ts';

/** Configs one task may have. */
export const MAX_PUSH_CONFIGS_PER_TASK = 10;
const MAX_ID = 200;
const MAX_URL = 2048;
const MAX_SECRET = 4096;

export interface PushConfigInput {
  /** The A2A config id; empty: one is made. */
  id: string;
  url: string;
  /** Empty: none. */
  token: string;
  authentication?: { scheme: string; credentials: string } | undefined;
}

/** A config as answered: the token is returned, Bearer credentials never are. */
export interface PushConfigView {
  id: string;
  taskId: string;
  url: string;
  token: string;
  authentication?: { scheme: string; credentials: string };
}

export interface PushConfigDeps {
  db: Executor;
  clock: Clock;
  secrets: SecretBox;
  allowInsecureDestinations: boolean;
  resolver?: Resolver;
}

/** The task a config belongs to, as the caller's A2A service found it in its organization. */
export interface PushTask {
  orgId: string;
  agentId: string;
  /** The address the caller reached this server by. */
  baseUrl: string;
  id: string;
  sessionId: string;
  status: MessageStatus;
}

export function createPushConfigs(deps: PushConfigDeps) {
  const { db } = deps;

  function view(row: Pick<A2aPushConfigsTable, 'config_id' | 'task_id' | 'url' | 'sealed_token' | 'auth_scheme'>) {
    const result: PushConfigView = {
      id: row.config_id,
      taskId: row.task_id,
      url: row.url,
      token: row.sealed_token === null ? '' : deps.secrets.open(row.sealed_token),
    };
    if (row.auth_scheme !== null) result.authentication = { scheme: row.auth_scheme, credentials: '' };
    return result;
  }

  async function checkUrl(url: string, field: string): Promise<void> {
    if (url === '') throw validationError(field, `${field} is required`);
    if (url.length > MAX_URL) throw validationError(field, `${field}: at most ${MAX_URL} characters`);
    const options = { allowInsecure: deps.allowInsecureDestinations, resolver: deps.resolver };
    const problem = await storedDestinationProblem(url, field, options);
    if (problem !== null) throw validationError(field, problem);
  }

  async function validate(input: PushConfigInput, field: string) {
    const name = (part: string) => (field === '' ? part : `${field}.${part}`);
    const id = input.id === '' ? newId() : input.id;
    if (id.length > MAX_ID) throw validationError(name('id'), `${name('id')}: at most ${MAX_ID} characters`);
    await checkUrl(input.url, name('url'));
    if (input.token.length > MAX_SECRET) {
      throw validationError(name('token'), `${name('token')}: at most ${MAX_SECRET} characters`);
    }
    const auth = input.authentication;
    if (auth !== undefined && (auth.scheme !== '' || auth.credentials !== '')) {
      if (auth.scheme.toLowerCase() !== 'bearer') {
        throw validationError(
          name('authentication.scheme'),
          `${name('authentication.scheme')}: only Bearer is supported`,
        );
      }
      if (auth.credentials === '' || auth.credentials.length > MAX_SECRET || /[\r\n]/.test(auth.credentials)) {
        throw validationError(
          name('authentication.credentials'),
          `${name('authentication.credentials')}: 1 to ${MAX_SECRET} characters, one line`,
        );
      }
    }
    if (/[\r\n]/.test(input.token)) throw validationError(name('token'), `${name('token')}: one line`);
    return { id, name };
  }

  function live(orgId: string, taskId: string) {
    return db
      .selectFrom('a2a_push_configs')
      .where('org_id', '=', orgId)
      .where('task_id', '=', taskId)
      .where('deleted_at', 'is', null);
  }

  return {
    /** Checks a config without storing it (400 naming the field). */
    check: (input: PushConfigInput, field = '') => validate(input, field).then(() => undefined),

    /**
     * Sets a config of the task (a config id already set is replaced). `field` prefixes the names in validation
     * errors (`configuration.taskPushNotificationConfig` when it came with SendMessage). `since` is the status the
     * notifications start after (default: the task's status now).
     */
    async set(task: PushTask, input: PushConfigInput, field = '', since?: MessageStatus): Promise<PushConfigView> {
      const { id, name } = await validate(input, field);
      const auth = input.authentication;
      const bearer = auth !== undefined && auth.credentials !== '';
      const status = since ?? task.status;
      const now = deps.clock.now();
      const values = {
        url: input.url,
        sealed_token: input.token === '' ? null : deps.secrets.seal(input.token),
        auth_scheme: bearer ? 'Bearer' : null,
        sealed_credentials: bearer ? deps.secrets.seal(auth.credentials) : null,
      };
      await db.transaction().execute(async (trx) => {
        const existing = await trx
          .selectFrom('a2a_push_configs')
          .select(['id', 'config_id', 'deleted_at'])
          .where('org_id', '=', task.orgId)
          .where('task_id', '=', task.id)
          .execute();
        const same = existing.find((row) => row.config_id === id);
        if (same !== undefined) {
          await trx
            .updateTable('a2a_push_configs')
            .set({ ...values, deleted_at: null })
            .where('id', '=', same.id)
            .execute();
          return;
        }
        if (existing.filter((row) => row.deleted_at === null).length >= MAX_PUSH_CONFIGS_PER_TASK) {
          throw new AppError(
            'limit_exceeded',
            `task ${task.id} already has ${MAX_PUSH_CONFIGS_PER_TASK} push notification configs`,
            { param: name('id') },
          );
        }
        await trx
          .insertInto('a2a_push_configs')
          .values({
            id: newId(),
            org_id: task.orgId,
            task_id: task.id,
            session_id: task.sessionId,
            agent_id: task.agentId,
            base_url: task.baseUrl,
            config_id: id,
            ...values,
            notified_status: status,
            seq: 0,
            // An ended task changes no more: nothing to watch.
            done: isTerminal(status) ? 1 : 0,
            created_at: now,
            deleted_at: null,
          })
          // Two requests setting the same new id at once: the second replaces the first, as a later set would.
          .onConflict((conflict) =>
            conflict.columns(['task_id', 'config_id']).doUpdateSet({ ...values, deleted_at: null }),
          )
          .execute();
      });
      const stored = await live(task.orgId, task.id).selectAll().where('config_id', '=', id).executeTakeFirstOrThrow();
      return view(stored);
    },

    async get(task: PushTask, configId: string): Promise<PushConfigView> {
      const row = await live(task.orgId, task.id).selectAll().where('config_id', '=', configId).executeTakeFirst();
      if (row === undefined) throw notFound('push notification config', configId);
      return view(row);
    },

    async list(task: PushTask): Promise<PushConfigView[]> {
      const rows = await live(task.orgId, task.id).selectAll().orderBy('created_at').orderBy('id').execute();
      return rows.map(view);
    },

    /** Deletes a config: its pending notifications are never attempted again. */
    async delete(task: PushTask, configId: string): Promise<void> {
      const deleted = await db
        .updateTable('a2a_push_configs')
        .set({ deleted_at: deps.clock.now(), done: 1 })
        .where('org_id', '=', task.orgId)
        .where('task_id', '=', task.id)
        .where('config_id', '=', configId)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      if (deleted.numUpdatedRows === 0n) throw notFound('push notification config', configId);
    },
  };
}

export type PushConfigs = ReturnType<typeof createPushConfigs>;
