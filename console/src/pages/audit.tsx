/**
 * /console/audit: the organization's audit log (GET /v1/audit_log, docs/audit-log.md), newest first, with cursor
 * paging. Filters (resource type, action, actor, from and to) are the API's and live in the URL. Each entry: when,
 * who (an API key's prefix, the CLI, the operator or Agentry), what, on which resource, the request id, and its
 * before and after summaries read as changes ("Changed instructions, mcpServers"; "Sessions days: 30 → 7").
 */
import { useQuery } from '@tanstack/react-query';
import { useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import type { AuditEntry } from '../api/types.ts';
import { usePageTitle } from '../components/title.ts';
import { ErrorNote, Field, Id, Loading, Pager, TableBox, useCursorPages, When } from '../components/ui.tsx';

/** The resource types the log records (docs/audit-log.md, "What is recorded"). */
const TARGET_TYPES = [
  'agent',
  'api_key',
  'organization',
  'mcp_server',
  'webhook_endpoint',
  'legacy_webhook',
  'schedule',
  'memory',
  'session',
  'tool_approval',
];
const ACTOR = /^\S+$/;
const ACTION = /^[a-z][a-z0-9_]*(\.([a-z][a-z0-9_]*|\*))?$/;

function actorText(actor: AuditEntry['actor']): string {
  if (actor.type === 'api_key') return `API key ${actor.api_key_prefix ?? actor.api_key_id ?? ''}`.trim();
  if (actor.type === 'cli') return 'agentry CLI';
  if (actor.type === 'admin') return 'operator (admin API)';
  return 'Agentry';
}

/** A field name as people read it: `sessions_days` → "sessions days", `limitUsd` → "limit usd". */
const words = (name: string) => name.replace(/([a-z])([A-Z])/g, '$1 $2').replaceAll('_', ' ');

function valueText(value: unknown): string {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.map(valueText).join(', ');
  return JSON.stringify(value);
}

/**
 * The changes an entry records, one line each: the fields it names as changed, then every summary field whose
 * value differs (before → after), or the summary of what was created or deleted.
 */
export function changesOf(entry: AuditEntry): string[] {
  const before = entry.before ?? {};
  const after = entry.after ?? {};
  const lines: string[] = [];
  const changed = after.changed_fields;
  if (Array.isArray(changed) && changed.length > 0) lines.push(`Changed ${changed.map(String).join(', ')}`);
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((key) => key !== 'changed_fields');
  for (const key of keys) {
    const was = valueText(before[key]);
    const now = valueText(after[key]);
    if (entry.before === null) lines.push(`${words(key)}: ${now}`);
    else if (entry.after === null) lines.push(`${words(key)} was ${was}`);
    else if (was !== now) lines.push(`${words(key)}: ${was} → ${now}`);
  }
  return lines;
}

/** "2026-11-28" from a date input into Unix seconds at the start of that UTC day, or undefined. */
function dayStart(day: string): number | undefined {
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isNaN(ms) ? undefined : ms / 1000;
}

export default function AuditPage() {
  usePageTitle('Audit log');
  const [params, setParams] = useSearchParams();
  const type = params.get('type') ?? '';
  const action = params.get('action') ?? '';
  const actor = params.get('actor') ?? '';
  const from = params.get('from') ?? '';
  const to = params.get('to') ?? '';
  const after = params.get('after') ?? '';
  const actorOk = actor === '' || ACTOR.test(actor);
  const actionOk = action === '' || ACTION.test(action);
  const since = dayStart(from);
  // "To" includes its whole day: the API's until is exclusive.
  const until = to === '' ? undefined : (dayStart(to) ?? 0) + 86_400;
  const rangeOk = since === undefined || until === undefined || since < until;
  const entries = useQuery({
    queryKey: ['audit_log', { type, action, actor, since, until, after }],
    queryFn: () =>
      unwrap(
        api.GET('/v1/audit_log', {
          params: {
            query: {
              limit: 25,
              ...(type === '' ? {} : { target_type: type }),
              ...(action === '' ? {} : { action }),
              ...(actor === '' ? {} : { actor }),
              ...(since === undefined ? {} : { since }),
              ...(until === undefined ? {} : { until }),
              ...(after === '' ? {} : { after }),
            },
          },
        }),
      ),
    enabled: actorOk && actionOk && rangeOk,
  });
  const set = (changes: Record<string, string>) =>
    setParams((current) => {
      const next = new URLSearchParams(current);
      for (const [name, value] of Object.entries(changes)) {
        if (value === '') next.delete(name);
        else next.set(name, value);
      }
      if (!('after' in changes)) next.delete('after');
      return next;
    });
  const pages = useCursorPages(after, (next) => set({ after: next }));
  const rows = entries.data?.data ?? [];
  return (
    <section>
      <h1>Audit log</h1>
      <p className="muted">
        Who changed what in the organization: keys, agents, connectors, webhooks, schedules, credits, approvals,
        memories and settings. Secrets are never recorded.
      </p>
      <form className="filters" aria-label="Filter the audit log" onSubmit={(event) => event.preventDefault()}>
        <Field label="Resource type">
          {(props) => (
            <select {...props} value={type} onChange={(e) => set({ type: e.target.value })}>
              <option value="">Every resource</option>
              {TARGET_TYPES.map((value) => (
                <option key={value} value={value}>
                  {value.replaceAll('_', ' ')}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Action" error={actionOk ? undefined : 'An action is like agent.updated, or agent.* for all'}>
          {(props) => (
            <input
              {...props}
              placeholder="agent.updated"
              value={action}
              onChange={(e) => set({ action: e.target.value.trim() })}
              spellCheck={false}
            />
          )}
        </Field>
        <Field label="Actor" error={actorOk ? undefined : 'An actor is one word'}>
          {(props) => (
            <input
              {...props}
              placeholder="cli, system, api_key or a key prefix"
              value={actor}
              onChange={(e) => set({ actor: e.target.value })}
              spellCheck={false}
            />
          )}
        </Field>
        <Field label="From (UTC)">
          {(props) => <input {...props} type="date" value={from} onChange={(e) => set({ from: e.target.value })} />}
        </Field>
        <Field label="To (UTC)" error={rangeOk ? undefined : 'To must not be before From'}>
          {(props) => <input {...props} type="date" value={to} onChange={(e) => set({ to: e.target.value })} />}
        </Field>
      </form>
      <ErrorNote error={entries.error} />
      {entries.data === undefined ? (
        entries.isPending && actorOk && actionOk && rangeOk ? (
          <Loading what="the audit log" />
        ) : null
      ) : rows.length === 0 ? (
        <p className="muted">No entries.</p>
      ) : (
        <>
          <TableBox label="Audit log">
            <table>
              <caption className="sr-only">Audit log entries, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Who</th>
                  <th scope="col">Action</th>
                  <th scope="col">Resource</th>
                  <th scope="col">Changes</th>
                  <th scope="col">Request</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((entry) => (
                  <tr key={entry.id}>
                    <td>
                      <When at={entry.created_at} />
                    </td>
                    <td>{actorText(entry.actor)}</td>
                    <td>
                      <code>{entry.action}</code>
                    </td>
                    <td>
                      {entry.target.type.replaceAll('_', ' ')} <Id value={entry.target.id} what={entry.target.type} />
                    </td>
                    <td>
                      <ul className="plain-list changes">
                        {changesOf(entry).map((line) => (
                          <li key={line}>{line}</li>
                        ))}
                      </ul>
                    </td>
                    <td>
                      {entry.request_id === null ? (
                        <span className="muted">—</span>
                      ) : (
                        <Id value={entry.request_id} what="request" />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableBox>
          <Pager
            summary={pages.summary(rows.length, 'entries')}
            onPrevious={pages.onPrevious}
            onNext={entries.data.has_more ? pages.onNext(entries.data.last_id) : null}
          />
        </>
      )}
    </section>
  );
}
