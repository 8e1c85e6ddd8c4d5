/**
 * What an API key may do. The spec's `tasks:*` scopes cover agents, sessions and the older Tasks API alike; the
 * narrower `agents:*` (agents and what configures them: connectors, schedules) and `sessions:*` (talking to agents:
 * sessions, messages, Responses, Chat Completions, conversations, runs) let a key do one and not the other. A
 * `tasks:*` key holds the narrower scopes of the same access as well, so no existing key changes meaning.
 * `audit:read` reads the audit log (GET /v1/audit_log); `accounts:write` includes it.
 */
export const SCOPES = [
  'tasks:read',
  'tasks:write',
  'webhooks:read',
  'webhooks:write',
  'accounts:write',
  'files:read',
  'files:write',
  'agents:read',
  'agents:write',
  'sessions:read',
  'sessions:write',
  'audit:read',
] as const;

export type Scope = (typeof SCOPES)[number];

/** The narrower scopes a scope includes. */
const INCLUDES: Partial<Record<Scope, readonly Scope[]>> = {
  'tasks:read': ['agents:read', 'sessions:read'],
  'tasks:write': ['agents:write', 'sessions:write'],
  // The administrators' scope reads who changed what; `audit:read` alone reads the log and changes nothing.
  'accounts:write': ['audit:read'],
};

/** The scopes that only read: a read-only key (`keys create --read-only`) holds these alone. */
export const READ_SCOPES: readonly Scope[] = SCOPES.filter((scope) => scope.endsWith(':read'));

export function isReadScope(scope: Scope): boolean {
  return scope.endsWith(':read');
}

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** The scopes a key granted `granted` holds: those and the narrower ones they include, in SCOPES order. */
export function effectiveScopes(granted: Iterable<Scope>): ReadonlySet<Scope> {
  const held = new Set<Scope>();
  for (const scope of granted) {
    held.add(scope);
    for (const included of INCLUDES[scope] ?? []) held.add(included);
  }
  return new Set(SCOPES.filter((scope) => held.has(scope)));
}

/** `agents:write` → `agents:write (or tasks:write)`: the scope, and the broader ones that include it. */
export function describeScope(scope: Scope): string {
  const broader = SCOPES.filter((candidate) => INCLUDES[candidate]?.includes(scope) === true);
  return broader.length === 0 ? scope : `${scope} (or ${broader.join(', ')})`;
}

/** Parses a comma- or space-separated scope list; returns the unknown names when any are invalid. */
export function parseScopes(text: string): { scopes: Scope[]; unknown: string[] } {
  const names = text.split(/[\s,]+/).filter((name) => name !== '');
  const scopes = [...new Set(names.filter(isScope))];
  return { scopes, unknown: names.filter((name) => !isScope(name)) };
}
