/**
 * /console/connectors: the organization's MCP servers (/v1/mcp_servers): register one (with static headers,
 * which are never shown again, or signing in with OAuth), connect an OAuth one (the browser goes to its sign-in
 * page and comes back to the API's callback), see its tools, list them again, delete it (a 409 names the agents
 * using it).
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useSearchParams } from 'react-router';
import { ApiError, api, unwrap } from '../api/client.ts';
import type { McpServer } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  type FieldErrors,
  FormErrors,
  formChecks,
  Id,
  Loading,
  Pager,
  useCursorPages,
  useFieldErrors,
  When,
} from '../components/ui.tsx';

interface ConnectorForm {
  name: string;
  url: string;
  headers: string;
}

const LABELS: Record<string, string> = { name: 'Connector name', url: 'Server URL', headers: 'Headers' };
const connectorLabel = (key: string): string | null => LABELS[key.split(/[.[]/)[0] ?? key] ?? null;

/** What the form's values show wrong before sending, every field at once. */
function checkConnector(form: ConnectorForm): FieldErrors {
  const check = formChecks();
  check.required('name', 'Connector name', form.name);
  check.url('url', 'Server URL', form.url);
  const bad = form.headers.split('\n').find((line) => line.trim() !== '' && line.indexOf(':') <= 0);
  if (bad !== undefined) check.add('headers', `Headers: "${bad.trim()}" is not Name: value`);
  return check.errors;
}

/** `Name: value` lines into a header map. */
function parseHeaders(text: string): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (line.trim() === '' || colon <= 0) continue;
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return Object.keys(headers).length === 0 ? undefined : headers;
}

function Connector({ server, canWrite }: { server: McpServer; canWrite: boolean }) {
  const queryClient = useQueryClient();
  const refresh = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/mcp_servers/{id}/refresh', { params: { path: { id: server.id } } })),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ['mcp_servers'] }),
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/mcp_servers/{id}', { params: { path: { id: server.id } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['mcp_servers'] }),
  });
  const connect = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/mcp_servers/{id}/connect', { params: { path: { id: server.id } }, body: {} })),
    // The sign-in page of the server's authorization server; its callback lands on the API.
    onSuccess: (started) => window.open(started.authorization_url, '_blank', 'noopener'),
  });
  return (
    <li className="card">
      <div className="page-head">
        <h2>{server.name}</h2>
        {canWrite ? (
          <div className="row">
            {server.auth === 'oauth' ? (
              <button type="button" onClick={() => connect.mutate()} disabled={connect.isPending}>
                Connect
              </button>
            ) : null}
            <button type="button" onClick={() => refresh.mutate()} disabled={refresh.isPending}>
              List tools again
            </button>
            <ConfirmButton
              label="Delete"
              consequence={`Delete ${server.name} and its stored credentials? Agents can no longer use its tools (one an agent still names cannot be deleted).`}
              confirm="Confirm delete"
              onConfirm={() => remove.mutate()}
              pending={remove.isPending}
              danger
            />
          </div>
        ) : null}
      </div>
      <p className="muted small">
        <Id value={server.id} what="connector" /> · {server.last_error === null ? 'reachable' : 'failing'} ·{' '}
        <code>{server.url}</code> · protocol {server.protocol ?? 'unknown'} · tools fetched{' '}
        <When at={server.tools_fetched_at} />
        {server.header_names.length > 0 ? ` · headers: ${server.header_names.join(', ')}` : ''}
        {server.auth === 'oauth' ? ' · signs in with OAuth' : ''}
      </p>
      {server.last_error === null ? null : (
        <p className="note warning small">
          Last error: {typeof server.last_error === 'string' ? server.last_error : JSON.stringify(server.last_error)}
        </p>
      )}
      <ul className="inline-list">
        {server.tools.map((tool) => (
          <li key={tool.name} title={tool.description ?? undefined}>
            <code>{tool.name}</code>
          </li>
        ))}
      </ul>
      <ErrorNote error={connect.error ?? refresh.error ?? remove.error}>
        {remove.error instanceof ApiError && remove.error.code === 'mcp_server_in_use' ? (
          <p>Remove it from those agents first (edit each agent's MCP servers), then delete it.</p>
        ) : null}
      </ErrorNote>
    </li>
  );
}

export default function ConnectorsPage() {
  usePageTitle('Connectors');
  const canWrite = useCan('agents:write');
  const queryClient = useQueryClient();
  const [params, setParams] = useSearchParams();
  const after = params.get('after') ?? '';
  const pages = useCursorPages(after, (next) => setParams(next === '' ? {} : { after: next }));
  const servers = useQuery({
    queryKey: ['mcp_servers', 'all', after],
    queryFn: () =>
      unwrap(api.GET('/v1/mcp_servers', { params: { query: { limit: 25, ...(after === '' ? {} : { after }) } } })),
  });
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [headers, setHeaders] = useState('');
  const [oauth, setOauth] = useState(false);
  const create = useMutation({
    mutationFn: () => {
      const parsed = parseHeaders(headers);
      return unwrap(
        api.POST('/v1/mcp_servers', {
          body: { name, url, ...(parsed === undefined ? {} : { headers: parsed }), ...(oauth ? { oauth: {} } : {}) },
        }),
      );
    },
    onSuccess: async () => {
      setName('');
      setUrl('');
      setHeaders('');
      await queryClient.invalidateQueries({ queryKey: ['mcp_servers'] });
    },
  });
  const fields = useFieldErrors(checkConnector, connectorLabel);
  const errorOf = fields.errorOf;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (fields.ready({ name, url, headers })) create.mutate(undefined, { onError: fields.failed });
  };
  return (
    <section>
      <h1>Connectors</h1>
      <p className="muted">MCP servers of the organization. Agents use them through their MCP servers setting.</p>
      {canWrite ? (
        <form onSubmit={submit} noValidate className="card" aria-label="Register an MCP server">
          <h2>Register an MCP server</h2>
          <FormErrors errors={fields.errors} what="The connector" />
          <div className="grid-2">
            <Field label="Connector name" error={errorOf('name')}>
              {(props) => <input {...props} value={name} onChange={(e) => setName(e.target.value)} />}
            </Field>
            <Field label="Server URL" error={errorOf('url')}>
              {(props) => (
                <input {...props} type="url" value={url} onChange={(e) => setUrl(e.target.value)} spellCheck={false} />
              )}
            </Field>
          </div>
          <Field
            label="Headers"
            error={errorOf('headers')}
            hint="One `Name: value` per line, e.g. Authorization: Bearer …; stored encrypted, never shown again"
          >
            {(props) => (
              <textarea
                {...props}
                rows={2}
                value={headers}
                onChange={(e) => setHeaders(e.target.value)}
                spellCheck={false}
              />
            )}
          </Field>
          <label className="row small">
            <input type="checkbox" checked={oauth} onChange={(e) => setOauth(e.target.checked)} /> Signs in with OAuth
            (connect it after registering)
          </label>
          {fields.any ? null : <ErrorNote error={create.error} />}
          <button type="submit" className="primary" disabled={create.isPending}>
            Register
          </button>
        </form>
      ) : null}
      <ErrorNote error={servers.error} />
      {servers.data === undefined ? (
        servers.isPending ? (
          <Loading what="connectors" />
        ) : null
      ) : servers.data.data.length === 0 ? (
        <p className="muted">No connectors.</p>
      ) : (
        <>
          <ul className="plain-list">
            {servers.data.data.map((server) => (
              <Connector key={server.id} server={server} canWrite={canWrite} />
            ))}
          </ul>
          <Pager
            summary={pages.summary(servers.data.data.length, 'connectors')}
            onPrevious={pages.onPrevious}
            onNext={servers.data.has_more ? pages.onNext(servers.data.last_id) : null}
          />
        </>
      )}
    </section>
  );
}
