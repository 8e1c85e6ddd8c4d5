/**
 * Sign-in: paste an API key. It is checked with GET /v1/organization and kept in this tab's session storage only.
 * Stable hooks for tests: the field's label is "API key" and the button "Sign in".
 */
import { useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useNavigate, useSearchParams } from 'react-router';
import { toApiError } from '../api/client.ts';
import { clearKey, storeKey } from '../auth/key-store.ts';
import { organizationQuery } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import { ErrorNote, Field } from '../components/ui.tsx';

/** Only paths inside the console: a `next` pointing elsewhere is ignored. */
function safeNext(next: string | null): string {
  return next?.startsWith('/') && !next.startsWith('//') ? next : '/agents';
}

export function SignIn() {
  usePageTitle('Sign in');
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const queryClient = useQueryClient();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const trimmed = key.trim();
    try {
      const response = await fetch('/v1/organization', { headers: { authorization: `Bearer ${trimmed}` } });
      const body: unknown = await response.json().catch(() => null);
      if (!response.ok) throw toApiError(response.status, body);
      queryClient.clear();
      storeKey(trimmed);
      await queryClient.fetchQuery(organizationQuery);
      navigate(safeNext(params.get('next')), { replace: true });
    } catch (failure) {
      clearKey();
      setError(failure);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" className="sign-in">
      <form onSubmit={submit} noValidate>
        <h1>Agentry console</h1>
        <p className="muted">
          Sign in with an API key of your organization. The first start of the server printed one; more with{' '}
          <code>bin/agentry.js keys create --org default</code> in the server's folder.
        </p>
        <Field label="API key" hint="Kept in this browser tab only, until you sign out or close it.">
          {(props) => (
            <input
              {...props}
              type="password"
              name="api-key"
              autoComplete="off"
              spellCheck={false}
              placeholder="agk_…"
              value={key}
              onChange={(event) => setKey(event.target.value)}
              required
            />
          )}
        </Field>
        <ErrorNote error={error} />
        <button type="submit" className="primary" disabled={busy || key.trim() === ''}>
          Sign in
        </button>
      </form>
    </main>
  );
}
