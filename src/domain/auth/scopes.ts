export const SCOPES = [
  'tasks:read',
  'tasks:write',
  'webhooks:read',
  'webhooks:write',
  'accounts:write',
  'files:read',
  'files:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** Parses a comma- or space-separated scope list; returns the unknown names when any are invalid. */
export function parseScopes(text: string): { scopes: Scope[]; unknown: string[] } {
  const names = text.split(/[\s,]+/).filter((name) => name !== '');
  const scopes = [...new Set(names.filter(isScope))];
  return { scopes, unknown: names.filter((name) => !isScope(name)) };
}
