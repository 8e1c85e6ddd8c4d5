/**
 * The seam between the planner (apply-service.ts) and each kind of document without versions: connectors,
 * schedules, webhook endpoints. A kind lists the organization's resources as documents, plans one document
 * against the resource of its name (the fields it changes, checked before anything is written) and writes it
 * through the kind's own service, which records the change in the audit log like any other.
 */
import type { AuditContext } from '../audit/audit-log.ts';
import type { MarkedKind } from './apply-types.ts';

/** A resource of the organization as a document, with the marker the lock compares. */
export interface Existing<D> {
  id: string;
  name: string;
  document: D;
  marker: string;
}

export interface PlanContext {
  orgId: string;
  /** Values of `${NAME}` references. */
  secrets: Record<string, string>;
  /** Whether an agent of this name exists or is created by this apply (a 400 naming the field otherwise). */
  requireAgent(name: string, param: string): void;
}

export interface WriteContext {
  orgId: string;
  audit: AuditContext;
  /** The id of the agent of this name, once the apply's agents are written. */
  agentId(name: string, param: string): string;
}

export interface PlannedWrite {
  /** JSON pointers of the fields an update changes; empty for a create or no change. */
  changes: string[];
  /** Creates the resource (current absent) or applies the changes. */
  write(context: WriteContext): Promise<{ id: string; signing_secret?: string }>;
}

export interface ResourceKind<D extends { name: string }> {
  kind: MarkedKind;
  /** Singular, for messages: "MCP connector". */
  noun: string;
  /** The organization's resources as documents, oldest first. */
  existing(orgId: string): Promise<Existing<D>[]>;
  plan(context: PlanContext, document: D, current: Existing<D> | undefined): Promise<PlannedWrite>;
}
