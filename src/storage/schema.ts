/**
 * Table types as Kysely sees them. Both dialects store the same column types: text ids, integer epoch
 * milliseconds for times, integer 0/1 for flags and JSON as text, so every query is identical on both.
 */
import type { ColumnType, Insertable, Selectable, Updateable } from 'kysely';

type Millis = number;

export interface OrgsTable {
  id: string;
  name: string;
  project_id: number;
  /** Credit balance in millionths of a USD; null means unlimited. */
  credit_balance_micros: number | null;
  created_at: Millis;
}

export interface ApiKeysTable {
  id: string;
  org_id: string;
  prefix: string;
  key_hash: string;
  scopes: string;
  name: string | null;
  created_at: Millis;
  expires_at: Millis | null;
  revoked_at: Millis | null;
}

export interface AgentsTable {
  id: string;
  org_id: string;
  name: string;
  description: string | null;
  instructions: string;
  model: string;
  max_steps: number;
  mcp_servers: string;
  client_tools: string;
  skills: string;
  network_policy: string | null;
  is_default: number;
  version: number;
  workspace_provisioned_at: Millis | null;
  created_at: Millis;
  updated_at: Millis;
}

export interface AgentVersionsTable {
  agent_id: string;
  version: number;
  config: string;
  created_at: Millis;
}

export interface SessionsTable {
  id: string;
  org_id: string;
  agent_id: string;
  title: string | null;
  status: string;
  created_at: Millis;
  updated_at: Millis;
}

export interface IdempotencyKeysTable {
  org_id: string;
  scope: string;
  key: string;
  request_hash: string;
  status_code: number;
  response_body: string;
  created_at: ColumnType<Millis, Millis, never>;
}

export interface Database {
  orgs: OrgsTable;
  api_keys: ApiKeysTable;
  agents: AgentsTable;
  agent_versions: AgentVersionsTable;
  sessions: SessionsTable;
  idempotency_keys: IdempotencyKeysTable;
}

export type OrgRow = Selectable<OrgsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type AgentRow = Selectable<AgentsTable>;
export type NewAgentRow = Insertable<AgentsTable>;
export type AgentUpdate = Updateable<AgentsTable>;
export type SessionRow = Selectable<SessionsTable>;
