/**
 * /console/settings: the organization's settings as a tenant key sees them. Data retention (GET and PATCH
 * /v1/organization/retention, accounts:write) is edited here; shortening it says first what the next sweep deletes.
 * The credit balance and the rate and concurrency limits (GET /v1/organization) are the operator's: shown read-only,
 * with where they are set. Budgets live on each agent, session and schedule.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import type { Retention } from '../api/types.ts';
import { organizationQuery, useCan, useOrganization } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  type FieldErrors,
  FormErrors,
  formChecks,
  Loading,
  TableBox,
  usd,
  useFieldErrors,
} from '../components/ui.tsx';

type Kind = 'sessions_days' | 'runs_days' | 'session_events_days' | 'files_days' | 'webhooks_days';

/** Each kind of data with what its retention deletes, as the API documents it (docs/retention.md). */
const KINDS: { kind: Kind; label: string; what: string }[] = [
  {
    kind: 'sessions_days',
    label: 'Sessions',
    what: 'sessions (and conversations, responses) with their messages, events and approvals, by their last change',
  },
  { kind: 'runs_days', label: 'Runs', what: 'ended runs with their traces, by creation' },
  {
    kind: 'session_events_days',
    label: 'Session events',
    what: "session events (each session's newest event stays), by creation",
  },
  { kind: 'files_days', label: 'Files', what: 'uploaded files, rows and bytes, by upload' },
  { kind: 'webhooks_days', label: 'Webhook deliveries', what: 'webhook delivery attempts, by when they were made' },
];
const MAX_DAYS = 36_500;

type RetentionForm = Record<Kind, string>;

const days = (value: number | null) => (value === null ? 'forever' : `${value} day${value === 1 ? '' : 's'}`);

function formOf(retention: Retention): RetentionForm {
  const own = retention.organization;
  return Object.fromEntries(
    KINDS.map(({ kind }) => [kind, own[kind] === null ? '' : String(own[kind])]),
  ) as RetentionForm;
}

/** What applies once saved: empty follows the default, 0 keeps forever. */
function effectiveOf(value: string, fallback: number | null): number | null {
  if (value.trim() === '') return fallback;
  const number = Number(value);
  return number === 0 ? null : number;
}

function checkRetention(form: RetentionForm): FieldErrors {
  const check = formChecks();
  for (const { kind, label } of KINDS) check.wholeNumber(kind, label, form[kind], 0, MAX_DAYS);
  return check.errors;
}

const retentionLabel = (key: string) => KINDS.find((item) => item.kind === key)?.label ?? null;

function RetentionSettings({ canWrite }: { canWrite: boolean }) {
  const queryClient = useQueryClient();
  const retention = useQuery({
    queryKey: ['retention'],
    queryFn: () => unwrap(api.GET('/v1/organization/retention')),
  });
  const [form, setForm] = useState<RetentionForm | null>(null);
  useEffect(() => {
    if (retention.data !== undefined && form === null) setForm(formOf(retention.data));
  }, [retention.data, form]);
  const fields = useFieldErrors(checkRetention, retentionLabel);
  const save = useMutation({
    mutationFn: (value: RetentionForm) =>
      unwrap(
        api.PATCH('/v1/organization/retention', {
          body: Object.fromEntries(
            KINDS.map(({ kind }) => [kind, value[kind].trim() === '' ? null : Number(value[kind])]),
          ),
        }),
      ),
    onSuccess: (saved) => {
      queryClient.setQueryData(['retention'], saved);
      setForm(formOf(saved));
    },
    onError: fields.failed,
  });
  if (retention.data === undefined || form === null) {
    return retention.error === null ? <Loading what="retention" /> : <ErrorNote error={retention.error} />;
  }
  const current = retention.data;
  // The kinds this change shortens: the next sweep deletes what is older than the new retention.
  const shortened = KINDS.flatMap(({ kind, label, what }) => {
    const now = current[kind];
    const next = effectiveOf(form[kind], current.defaults[kind]);
    return next !== null && Number.isInteger(next) && next >= 1 && (now === null || next < now)
      ? [`${label}: ${what}, older than ${days(next)} (kept ${days(now)} now)`]
      : [];
  });
  const submit = (event?: FormEvent) => {
    event?.preventDefault();
    if (fields.ready(form)) save.mutate(form);
  };
  return (
    <form onSubmit={submit} noValidate aria-label="Data retention" className="card">
      <h2>Data retention</h2>
      <p className="muted small">
        How long each kind of data is kept before the retention sweep deletes it. Empty: the deployment's default; 0:
        forever.
      </p>
      <FormErrors errors={fields.errors} what="Retention" />
      <fieldset disabled={!canWrite || save.isPending} className="plain">
        <div className="grid-2">
          {KINDS.map(({ kind, label }) => (
            <Field
              key={kind}
              label={`${label} (days)`}
              error={fields.errorOf(kind)}
              hint={`Now ${days(current[kind])}; default ${days(current.defaults[kind])}`}
            >
              {(props) => (
                <input
                  {...props}
                  inputMode="numeric"
                  className="narrow"
                  value={form[kind]}
                  placeholder="default"
                  onChange={(e) => setForm({ ...form, [kind]: e.target.value })}
                />
              )}
            </Field>
          ))}
        </div>
      </fieldset>
      {fields.any ? null : <ErrorNote error={save.error} />}
      {canWrite ? (
        <div className="row">
          {shortened.length === 0 ? (
            <button type="button" className="primary" onClick={() => submit()} disabled={save.isPending}>
              Save retention
            </button>
          ) : (
            <ConfirmButton
              label="Save retention"
              consequence={`Shorter retention: the next sweep deletes for good ${shortened.join('; ')}.`}
              confirm="Delete older data and save"
              onConfirm={() => submit()}
              pending={save.isPending}
              danger
            />
          )}
          {save.isSuccess ? <output className="ok">Saved.</output> : null}
        </div>
      ) : (
        <p className="muted">Changing retention needs a key with accounts:write.</p>
      )}
    </form>
  );
}

function limitText(value: number | null, unit: string): string {
  return value === null ? 'unlimited' : `${value} ${unit}`;
}

export default function SettingsPage() {
  usePageTitle('Settings');
  const organization = useOrganization();
  const canAccounts = useCan('accounts:write');
  const org = useQuery(organizationQuery);
  if (organization === undefined) {
    return org.error === null ? <Loading what="settings" /> : <ErrorNote error={org.error} />;
  }
  const { limits } = organization;
  return (
    <section>
      <h1>Settings</h1>
      <section className="card" aria-labelledby="org">
        <h2 id="org">Organization</h2>
        <dl className="facts">
          <dt>Name</dt>
          <dd>{organization.name}</dd>
          <dt>Id</dt>
          <dd>
            <code>{organization.id}</code>
          </dd>
          <dt>Credit balance</dt>
          <dd>
            {organization.credit_balance_usd === null ? 'not limited' : usd(organization.credit_balance_usd)}{' '}
            <span className="muted small">
              (set by the operator: <code>agentry credits set --org {organization.name} USD</code>)
            </span>
          </dd>
        </dl>
      </section>
      <section className="card" aria-labelledby="limits">
        <h2 id="limits">Rate and concurrency limits</h2>
        <p className="muted small">
          Read only: the operator sets them with <code>agentry limits set</code> or{' '}
          <code>PUT /v1/admin/organizations/{'{id}'}/limits</code> (docs/operations.md, "Limits").
        </p>
        <TableBox label="Limits">
          <table>
            <caption className="sr-only">Limits that apply</caption>
            <thead>
              <tr>
                <th scope="col">Applies to</th>
                <th scope="col">Requests per minute</th>
                <th scope="col">Concurrent turns</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <th scope="row">The organization</th>
                <td>{limitText(limits.organization.requests_per_minute, 'per minute')}</td>
                <td>{limitText(limits.organization.concurrent_turns, 'at once')}</td>
              </tr>
              <tr>
                <th scope="row">This API key</th>
                <td>{limitText(limits.api_key.requests_per_minute, 'per minute')}</td>
                <td>{limitText(limits.api_key.concurrent_turns, 'at once')}</td>
              </tr>
            </tbody>
          </table>
        </TableBox>
      </section>
      {canAccounts ? (
        <RetentionSettings canWrite={canAccounts} />
      ) : (
        <p className="muted">Data retention is shown to keys with accounts:write.</p>
      )}
      <section className="card" aria-labelledby="budgets">
        <h2 id="budgets">Budgets</h2>
        <p className="muted small">
          Spending caps are set on each <Link to="/agents">agent</Link> (its Budget fields), each session and each
          schedule, below the organization's credits (docs/budgets.md).
        </p>
      </section>
    </section>
  );
}
