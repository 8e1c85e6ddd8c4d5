/**
 * /console/schedules/{id}: one schedule: its timing and next runs, edit, pause and resume, run now, delete, and its
 * runs (newest first, cursor paging) with links to each run's trace and session.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, idempotencyKey, unwrap } from '../api/client.ts';
import type { Schedule } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import {
  bodyOf,
  checkSchedule,
  formOf,
  ScheduleFields,
  type ScheduleFormValue,
  scheduleLabel,
  timingText,
} from '../components/schedule-form.tsx';
import { usePageTitle } from '../components/title.ts';
import {
  Badge,
  ConfirmButton,
  ErrorNote,
  FormErrors,
  Loading,
  shortId,
  useFieldErrors,
  When,
} from '../components/ui.tsx';

function Runs({ scheduleId }: { scheduleId: string }) {
  const [cursor, setCursor] = useState('');
  const runs = useQuery({
    queryKey: ['schedule_runs', scheduleId, cursor],
    queryFn: () =>
      unwrap(
        api.GET('/v1/schedules/{schedule_id}/runs', {
          params: { path: { schedule_id: scheduleId }, query: { limit: 20, ...(cursor === '' ? {} : { cursor }) } },
        }),
      ),
    // A run goes from preparing to running to its end on its own: keep the list current while one is unfinished.
    refetchInterval: (query) =>
      query.state.data?.data.some((run) => run.status === 'preparing' || run.status === 'running') ? 2000 : false,
  });
  return (
    <>
      <h2>Runs</h2>
      <ErrorNote error={runs.error} />
      {runs.data === undefined ? (
        runs.isPending ? (
          <Loading what="runs" />
        ) : null
      ) : runs.data.data.length === 0 ? (
        <p className="muted">No runs yet.</p>
      ) : (
        <>
          <table>
            <caption className="sr-only">Runs of the schedule</caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Trigger</th>
                <th scope="col">Status</th>
                <th scope="col">Result</th>
                <th scope="col">Session</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {runs.data.data.map((run) => (
                <tr key={run.id}>
                  <td>
                    {run.run_id === null ? (
                      <code>{shortId(run.id)}</code>
                    ) : (
                      <Link to={`/runs/${run.run_id}`} aria-label={`Trace of run ${run.run_id}`}>
                        <code>{shortId(run.run_id)}</code>
                      </Link>
                    )}
                  </td>
                  <td>{run.trigger}</td>
                  <td>
                    <Badge value={run.status} />
                  </td>
                  <td className="preview">
                    {run.error === null ? (run.result ?? '') : `${run.error.message} (${run.error.code})`}
                  </td>
                  <td>
                    {run.session_id === null ? (
                      '—'
                    ) : (
                      <Link to={`/sessions/${run.session_id}`}>{shortId(run.session_id)}</Link>
                    )}
                  </td>
                  <td>
                    <When at={run.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <nav className="pager" aria-label="Pages of runs">
            <button type="button" disabled={cursor === ''} onClick={() => setCursor('')}>
              Newest
            </button>
            <button
              type="button"
              disabled={!runs.data.has_more}
              onClick={() => setCursor(runs.data?.next_cursor ?? '')}
            >
              Older
            </button>
          </nav>
        </>
      )}
    </>
  );
}

function Editor({ schedule, onDone }: { schedule: Schedule; onDone: () => void }) {
  const queryClient = useQueryClient();
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const [form, setForm] = useState<ScheduleFormValue>(() => formOf(schedule));
  const save = useMutation({
    mutationFn: (value: ScheduleFormValue) =>
      unwrap(api.POST('/v1/schedules/{id}', { params: { path: { id: schedule.id } }, body: bodyOf(value) })),
    onSuccess: async (saved) => {
      queryClient.setQueryData(['schedule', schedule.id], saved);
      await queryClient.invalidateQueries({ queryKey: ['schedules'] });
      onDone();
    },
  });
  const fields = useFieldErrors(checkSchedule, scheduleLabel);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (fields.ready(form)) save.mutate(form, { onError: fields.failed });
  };
  return (
    <form onSubmit={submit} noValidate aria-label="Edit schedule" className="card">
      <h2>Edit schedule</h2>
      <FormErrors errors={fields.errors} what="The schedule" />
      <ScheduleFields form={form} onChange={setForm} agents={agents.data?.data ?? []} errorOf={fields.errorOf} />
      {fields.any ? null : <ErrorNote error={save.error} />}
      <div className="row">
        <button type="submit" className="primary" disabled={save.isPending}>
          Save schedule
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export default function SchedulePage() {
  const { id = '' } = useParams();
  const canWrite = useCan('agents:write');
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [editing, setEditing] = useState(false);
  const schedule = useQuery({
    queryKey: ['schedule', id],
    queryFn: () => unwrap(api.GET('/v1/schedules/{id}', { params: { path: { id } } })),
  });
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  usePageTitle(schedule.data?.name ?? 'Schedule');
  const path = { id };
  const setEnabled = useMutation({
    mutationFn: (enabled: boolean) => unwrap(api.POST('/v1/schedules/{id}', { params: { path }, body: { enabled } })),
    onSuccess: (saved) => {
      queryClient.setQueryData(['schedule', id], saved);
      return queryClient.invalidateQueries({ queryKey: ['schedules'] });
    },
  });
  const runNow = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/schedules/{id}/run', {
          params: { path, header: { 'idempotency-key': idempotencyKey() } },
          body: {},
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['schedule_runs', id] }),
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/schedules/{id}', { params: { path } })),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: ['schedules'] });
      navigate('/schedules');
    },
  });
  if (schedule.data === undefined) {
    return (
      <section>
        <h1>Schedule</h1>
        {schedule.isPending ? <Loading what="schedule" /> : <ErrorNote error={schedule.error} />}
      </section>
    );
  }
  const data = schedule.data;
  const agentName = agents.data?.data.find((agent) => agent.id === data.agent_id)?.name ?? data.agent_id;
  return (
    <section>
      <p>
        <Link to="/schedules">Schedules</Link>
      </p>
      <div className="page-head">
        <h1>{data.name}</h1>
        {canWrite ? (
          <div className="row">
            <button type="button" onClick={() => runNow.mutate()} disabled={runNow.isPending}>
              Run now
            </button>
            {data.enabled ? (
              <ConfirmButton
                label="Pause"
                consequence="Pause this schedule? It stops running on its timing until it is resumed; runs already started finish."
                confirm="Confirm pause"
                onConfirm={() => setEnabled.mutate(false)}
                pending={setEnabled.isPending}
              />
            ) : (
              <button type="button" onClick={() => setEnabled.mutate(true)} disabled={setEnabled.isPending}>
                Resume
              </button>
            )}
            {editing ? null : (
              <button type="button" onClick={() => setEditing(true)}>
                Edit
              </button>
            )}
            <ConfirmButton
              label="Delete"
              consequence={`Delete ${data.name} and its run history? It never runs again; turns already submitted finish in their sessions.`}
              confirm="Confirm delete"
              onConfirm={() => remove.mutate()}
              pending={remove.isPending}
              danger
            />
          </div>
        ) : null}
      </div>
      <ErrorNote error={setEnabled.error ?? runNow.error ?? remove.error} />
      {runNow.data === undefined ? null : (
        <p className="note" role="status">
          Run started ({runNow.data.status.replaceAll('_', ' ')}).
        </p>
      )}
      {editing ? <Editor schedule={data} onDone={() => setEditing(false)} /> : null}
      <dl className="facts">
        <dt>State</dt>
        <dd>
          <Badge value={data.enabled ? 'active' : 'paused'} />
        </dd>
        <dt>Agent</dt>
        <dd>
          <Link to={`/agents/${data.agent_id}`}>{agentName}</Link>
        </dd>
        <dt>Runs</dt>
        <dd>
          <code>{timingText(data)}</code>
        </dd>
        <dt>Input</dt>
        <dd className="preview">{data.input}</dd>
        <dt>Next runs</dt>
        <dd>
          {data.next_run_times.length === 0 ? (
            <span className="muted">none while paused</span>
          ) : (
            <ol className="plain-list">
              {data.next_run_times.map((at) => (
                <li key={at}>
                  <When at={at} />
                </li>
              ))}
            </ol>
          )}
        </dd>
      </dl>
      <Runs scheduleId={id} />
    </section>
  );
}
