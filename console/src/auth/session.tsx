/**
 * Who is signed in: the key (session storage) and what GET /v1/organization says about it. Pages ask `useCan`
 * before showing an action, so a read-only key sees no buttons that would only answer 403.
 */
import { useQuery } from '@tanstack/react-query';
import { useSyncExternalStore } from 'react';
import { api, unwrap } from '../api/client.ts';
import type { Organization, Scope } from '../api/types.ts';
import { onKeyChange, readKey } from './key-store.ts';

export function useApiKey(): string | null {
  return useSyncExternalStore(onKeyChange, readKey, () => null);
}

export const organizationQuery = {
  queryKey: ['organization'] as const,
  queryFn: () => unwrap(api.GET('/v1/organization')),
  staleTime: 30_000,
};

export function useOrganization(): Organization | undefined {
  const key = useApiKey();
  return useQuery({ ...organizationQuery, enabled: key !== null }).data;
}

/** Whether the signed-in key holds `scope`; false until the organization is known. */
export function useCan(scope: Scope): boolean {
  return useOrganization()?.api_key.scopes.includes(scope) ?? false;
}
