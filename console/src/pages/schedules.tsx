/**
 * /console/schedules: the organization's schedules (name, agent, timing, next run, paused), newest first with
 * cursor paging, and a form to create one with a preview of its next runs.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useNavigate, useSearchParams } from 'react-router';
import { api, idempotencyKey, unwrap } from '../api/client.ts';
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
import { Badge, ErrorNote, FormErrors, Loading, useFieldErrors, When } from '../components/ui.tsx';

export default function SchedulesPage() {
  usePageTitle('Schedules');
  const canWrite = useCan('agents:write');
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [params, setParams] = useSearchParams();
  const cursor = params.get('cursor') ?? '';
  const agents = useQuery({ queryKey: ['agents'], queryFn: () => unwrap(api.GET('/v1/agents')) });
  const schedules = useQuery({
    queryKey: ['schedules', { cursor }],
    queryFn: () =>
      unwrap(api.GET('/v1/schedules', { params: { query: { limit: 50, ...(cursor === '' ? {} : { cursor }) } } })),
  });
  const [creating, setCreating] = useState(false);
  const [form, setForm] = useState<ScheduleFormValue>(() => formOf(null));
  const create = useMutation({
    mutationFn: (value: ScheduleFormValue) =>
      unwrap(
        api.POST('/v1/schedules', { body: bodyOf(value), params: { header: { 'idempotency-key': idempotencyKey() } } }),
      ),
    onSuccess: async (created) => {
      await queryClient.invalidateQueries({ queryKey: ['schedules'] });
      navigate(`/schedules/${created.id}`);
    },
  });
  const fields = useFieldErrors(checkSchedule, scheduleLabel);
  const names = new Map((agents.data?.data ?? []).map((agent) => [agent.id, agent.name]));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (fields.ready(form)) create.mutate(form, { onError: fields.failed });
  };
  return (
    <section>
      <div className="page-head">
        <h1>Schedules</h1>
        {canWrite && !creating ? (
          <button type="button" className="primary" onClick={() => setCreating(true)}>
            New schedule
          </button>
        ) : null}
      </div>
      {creating ? (
        <form onSubmit={submit} noValidate aria-label="New schedule" className="card">
          <h2>New schedule</h2>
          <FormErrors errors={fields.errors} what="The schedule" />
          <ScheduleFields form={form} onChange={setForm} agents={agents.data?.data ?? []} errorOf={fields.errorOf} />
          {fields.any ? null : <ErrorNote error={create.error} />}
          <div className="row">
            <button type="submit" className="primary" disabled={create.isPending}>
              Create schedule
            </button>
            <button type="button" onClick={() => setCreating(false)}>
              Close
            </button>
          </div>
        </form>
      ) : null}
      <ErrorNote error={schedules.error} />
      {schedules.data === undefined ? (
        schedules.isPending ? (
          <Loading what="schedules" />
        ) : null
      ) : schedules.data.data.length === 0 ? (
        <p className="muted">
          No schedules. A schedule sends a message to an agent on a cron expression or an interval.
        </p>
      ) : (
        <>
          <table>
            <caption className="sr-only">Schedules</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Agent</th>
                <th scope="col">Runs</th>
                <th scope="col">Next run</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {schedules.data.data.map((schedule) => (
                <tr key={schedule.id}>
                  <td>
                    <Link to={`/schedules/${schedule.id}`}>{schedule.name}</Link>
                  </td>
                  <td>{names.get(schedule.agent_id) ?? schedule.agent_id}</td>
                  <td>
                    <code>{timingText(schedule)}</code>
                  </td>
                  <td>
                    <When at={schedule.next_run_at} />
                  </td>
                  <td>
                    <Badge value={schedule.enabled ? 'active' : 'paused'} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <nav className="pager" aria-label="Pages">
            <button type="button" disabled={cursor === ''} onClick={() => setParams({})}>
              Newest
            </button>
            <button
              type="button"
              disabled={!schedules.data.has_more}
              onClick={() => setParams({ cursor: schedules.data?.next_cursor ?? '' })}
            >
              Older
            </button>
          </nav>
        </>
      )}
    </section>
  );
}
