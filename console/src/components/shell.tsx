/**
 * The frame of every signed-in page: the organization and the key's scopes, the navigation (only the areas the
 * key can read), and the page itself. Without a key it sends the visitor to sign-in and back afterwards.
 */
import { useQueryClient } from '@tanstack/react-query';
import { Suspense } from 'react';
import { Navigate, NavLink, Outlet, useLocation, useNavigate } from 'react-router';
import type { Scope } from '../api/types.ts';
import { clearKey } from '../auth/key-store.ts';
import { useApiKey, useOrganization } from '../auth/session.tsx';
import { Loading } from './ui.tsx';

/** Each area, shown to keys holding its scope (null: every key). */
const NAV: { to: string; label: string; scope: Scope | null }[] = [
  { to: '/agents', label: 'Agents', scope: 'agents:read' },
  { to: '/sessions', label: 'Sessions', scope: 'sessions:read' },
  { to: '/runs', label: 'Runs', scope: 'sessions:read' },
  { to: '/approvals', label: 'Approvals', scope: 'sessions:read' },
  { to: '/schedules', label: 'Schedules', scope: 'agents:read' },
  { to: '/connectors', label: 'Connectors', scope: 'agents:read' },
  { to: '/webhooks', label: 'Webhooks', scope: 'webhooks:read' },
  { to: '/files', label: 'Files', scope: 'files:read' },
  { to: '/usage', label: 'Usage', scope: 'sessions:read' },
  { to: '/audit', label: 'Audit log', scope: 'audit:read' },
  { to: '/settings', label: 'Settings', scope: null },
];

export function Shell() {
  const key = useApiKey();
  const location = useLocation();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const organization = useOrganization();
  if (key === null) {
    const next = `${location.pathname}${location.search}`;
    return <Navigate to={`/sign-in?next=${encodeURIComponent(next)}`} replace />;
  }
  const scopes = organization?.api_key.scopes ?? [];
  const signOut = () => {
    clearKey();
    queryClient.clear();
    navigate('/sign-in');
  };
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">Agentry</span>
        <nav aria-label="Main">
          <ul>
            {NAV.filter((item) => item.scope === null || scopes.includes(item.scope)).map((item) => (
              <li key={item.to}>
                <NavLink to={item.to}>{item.label}</NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          {organization === undefined ? null : (
            <>
              <span>
                Organization <strong>{organization.name}</strong>
              </span>
              <span className="scopes" title={organization.api_key.scopes.join(' · ')}>
                <span className="sr-only">Key scopes: </span>
                {organization.api_key.scopes.join(' · ')}
              </span>
            </>
          )}
          <button type="button" className="link" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading what="page" />}>
          <Outlet />
        </Suspense>
      </main>
    </div>
  );
}
