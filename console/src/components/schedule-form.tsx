/**
 * The fields of a schedule (create and edit): name, agent, input, a cron expression in a time zone or an interval,
 * with the next five fire times previewed by the API (GET /v1/schedules/preview) as they are typed, so the console
 * needs no cron library of its own.
 */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api, unwrap } from '../api/client.ts';
import type { Schedule } from '../api/types.ts';
import { ErrorNote, Field, type FieldErrors, formChecks, When } from './ui.tsx';

export interface ScheduleFormValue {
  name: string;
  agent_id: string;
  input: string;
  timing: 'cron' | 'interval';
  cron: string;
  interval_seconds: string;
  timezone: string;
}

export function formOf(schedule: Schedule | null, agentId = ''): ScheduleFormValue {
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return schedule === null
    ? {
        name: '',
        agent_id: agentId,
        input: '',
        timing: 'cron',
        cron: '0 9 * * 1-5',
        interval_seconds: '3600',
        timezone: browserZone,
      }
    : {
        name: schedule.name,
        agent_id: schedule.agent_id,
        input: schedule.input,
        timing: schedule.cron === null ? 'interval' : 'cron',
        cron: schedule.cron ?? '',
        interval_seconds: String(schedule.interval_seconds ?? 3600),
        timezone: schedule.timezone,
      };
}

/** A schedule's timing in a few words. */
export function timingText(schedule: Schedule): string {
  return schedule.cron === null
    ? `every ${schedule.interval_seconds ?? '?'} s`
    : `${schedule.cron} (${schedule.timezone})`;
}

/** The request body of a form: cron or interval, the other cleared. */
export function bodyOf(form: ScheduleFormValue) {
  const timing =
    form.timing === 'cron'
      ? { cron: form.cron, interval_seconds: null, timezone: form.timezone }
      : { interval_seconds: Number(form.interval_seconds), cron: null, timezone: form.timezone };
  return { name: form.name, agent_id: form.agent_id, input: form.input, ...timing };
}

/** `value`, once it has not changed for `ms`. */
function useSettled<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

function Preview({ form }: { form: ScheduleFormValue }) {
  const timing = useSettled(
    form.timing === 'cron'
      ? { cron: form.cron, timezone: form.timezone }
      : { interval_seconds: Number(form.interval_seconds), timezone: form.timezone },
    300,
  );
  const preview = useQuery({
    queryKey: ['schedule_preview', timing],
    queryFn: () => unwrap(api.GET('/v1/schedules/preview', { params: { query: timing } })),
    retry: false,
  });
  return (
    <section aria-live="polite" className="card" aria-label="Next runs">
      <h3 className="small-heading">Next runs</h3>
      {preview.error === null ? null : <ErrorNote error={preview.error} />}
      {preview.data === undefined ? null : (
        <ol>
          {preview.data.next_run_times.map((at) => (
            <li key={at}>
              <When at={at} />
            </li>
          ))}
        </ol>
      )}
      {preview.data === undefined ? null : (
        <p className="muted small">Times in your browser's zone; the schedule runs in {preview.data.timezone}.</p>
      )}
    </section>
  );
}

const LABELS: Record<string, string> = {
  name: 'Schedule name',
  agent_id: 'Agent',
  input: 'Input',
  cron: 'Cron',
  interval_seconds: 'Interval',
  timezone: 'Time zone',
};

/** The label of a schedule field, for the API's errors. */
export const scheduleLabel = (key: string): string | null => LABELS[key] ?? null;

/** The longest interval the API takes: 366 days. */
const MAX_INTERVAL_SECONDS = 366 * 24 * 3600;

/** What the form's values show wrong before sending, every field at once. */
export function checkSchedule(form: ScheduleFormValue): FieldErrors {
  const check = formChecks();
  check.required('name', 'Schedule name', form.name);
  if (form.agent_id === '') check.add('agent_id', 'Choose an agent');
  check.required('input', 'Input', form.input);
  if (form.timing === 'cron') check.required('cron', 'Cron', form.cron);
  else {
    check.required('interval_seconds', 'Interval', form.interval_seconds);
    check.wholeNumber('interval_seconds', 'Interval', form.interval_seconds, 1, MAX_INTERVAL_SECONDS);
  }
  check.required('timezone', 'Time zone', form.timezone);
  return check.errors;
}

interface Props {
  form: ScheduleFormValue;
  onChange: (form: ScheduleFormValue) => void;
  agents: { id: string; name: string }[];
  errorOf: (field: string) => string | undefined;
}

export function ScheduleFields({ form, onChange, agents, errorOf }: Props) {
  const set = (changes: Partial<ScheduleFormValue>) => onChange({ ...form, ...changes });
  return (
    <>
      <div className="grid-2">
        <Field label="Schedule name" error={errorOf('name')}>
          {(props) => <input {...props} value={form.name} onChange={(e) => set({ name: e.target.value })} />}
        </Field>
        <Field label="Agent" error={errorOf('agent_id')}>
          {(props) => (
            <select {...props} value={form.agent_id} onChange={(e) => set({ agent_id: e.target.value })}>
              <option value="">Choose an agent</option>
              {agents.map((agent) => (
                <option key={agent.id} value={agent.id}>
                  {agent.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <Field label="Input" error={errorOf('input')} hint="The message each run sends to the agent">
        {(props) => (
          <textarea {...props} rows={3} value={form.input} onChange={(e) => set({ input: e.target.value })} />
        )}
      </Field>
      <fieldset className="row plain">
        <legend>Runs</legend>
        <label className="row small">
          <input type="radio" name="timing" checked={form.timing === 'cron'} onChange={() => set({ timing: 'cron' })} />{' '}
          On a cron schedule
        </label>
        <label className="row small">
          <input
            type="radio"
            name="timing"
            checked={form.timing === 'interval'}
            onChange={() => set({ timing: 'interval' })}
          />{' '}
          Every so many seconds
        </label>
      </fieldset>
      <div className="grid-2">
        {form.timing === 'cron' ? (
          <Field
            label="Cron"
            error={errorOf('cron')}
            hint="minute hour day-of-month month day-of-week, e.g. 0 9 * * 1-5"
          >
            {(props) => (
              <input {...props} value={form.cron} onChange={(e) => set({ cron: e.target.value })} spellCheck={false} />
            )}
          </Field>
        ) : (
          <Field label="Interval (seconds)" error={errorOf('interval_seconds')}>
            {(props) => (
              <input
                {...props}
                type="number"
                min={1}
                value={form.interval_seconds}
                onChange={(e) => set({ interval_seconds: e.target.value })}
              />
            )}
          </Field>
        )}
        <Field label="Time zone" error={errorOf('timezone')} hint="An IANA zone, e.g. Europe/Berlin">
          {(props) => (
            <input
              {...props}
              value={form.timezone}
              onChange={(e) => set({ timezone: e.target.value })}
              spellCheck={false}
            />
          )}
        </Field>
      </div>
      <Preview form={form} />
    </>
  );
}
