/**
 * What every kind of document shares when planned and applied (docs/agents-as-code.md): the plan's lines, the
 * lock, the change marker of kinds without versions, and how a failure names `documents[i].field`.
 */
import { AppError, validationError } from '../../errors/app-error.ts';
import { sha256Hex, stableStringify } from '../../lib/hash.ts';
import type { AuditContext } from '../audit/audit-log.ts';

export type DocumentKind = 'agent' | 'mcp_server' | 'schedule' | 'webhook_endpoint';

/** The lock's sections of kinds without versions, in the order they are applied. */
export const MARKED_KINDS = {
  mcp_server: 'mcp_servers',
  schedule: 'schedules',
  webhook_endpoint: 'webhook_endpoints',
} as const;
export type MarkedKind = keyof typeof MARKED_KINDS;
export type MarkerSection = (typeof MARKED_KINDS)[MarkedKind];

/** What the last apply left: per agent name its version; per name of the other kinds, a marker of its configuration. */
export interface ApplyLock {
  agents: Record<string, number>;
  mcp_servers?: Record<string, string>;
  schedules?: Record<string, string>;
  webhook_endpoints?: Record<string, string>;
}

export interface PlannedChange {
  kind: DocumentKind;
  name: string;
  action: 'create' | 'update' | 'unchanged';
  /** JSON pointers of the fields an update changes (empty otherwise). */
  changes: string[];
  /** An agent's version now (null before a create); after an apply, the version it was left at. Null for other kinds. */
  version: number | null;
  id: string | null;
  /** The signing secret of a webhook endpoint this apply created: answered once, never stored in clear. */
  signing_secret?: string;
}

export interface ApplyResult {
  dryRun: boolean;
  plan: PlannedChange[];
  lock: ApplyLock;
}

export interface ApplyOptions {
  dryRun: boolean;
  force: boolean;
  lock: ApplyLock | null;
  actor: string | null;
  audit?: AuditContext;
  /** Values of the `${NAME}` references in connector documents. */
  secrets?: Record<string, string>;
}

/** The change marker of a resource without versions: a hash of the configuration it has. */
export function markerOf(configuration: unknown): string {
  return `sha256:${sha256Hex(stableStringify(configuration)).slice(0, 32)}`;
}

/** Runs a check of the document at `index`, naming its field as `documents[index].field` when it fails. */
export async function inDocument<T>(index: number, check: () => T | Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (error) {
    if (!(error instanceof AppError) || error.code !== 'validation_error' || error.param === null) throw error;
    const param = `documents[${index}].${error.param}`;
    throw validationError(
      param,
      error.message.startsWith(`${error.param} `)
        ? `${param}${error.message.slice(error.param.length)}`
        : error.message,
    );
  }
}

/** The one resource of `items` named `name` at document `index`; undefined if none, a 400 if several. */
export function namedOnce<T extends { name: string }>(items: T[], name: string, index: number, what: string) {
  const found = items.filter((item) => item.name === name);
  if (found.length > 1) {
    throw validationError(
      `documents[${index}].name`,
      `several ${what}s are named ${JSON.stringify(name)}: rename all but one to apply by name`,
    );
  }
  return found[0];
}
