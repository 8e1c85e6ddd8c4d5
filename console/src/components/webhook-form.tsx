/**
 * The fields of a webhook endpoint (name, URL, subscribed event types), with their errors (checked before sending,
 * or the API's) beside them in words for people.
 */
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client.ts';
import type { WebhookEndpoint } from '../api/types.ts';
import { Field, type FieldErrors, formChecks } from './ui.tsx';

export type EventType = WebhookEndpoint['event_types'][number];

export interface EndpointForm {
  name: string;
  url: string;
  event_types: EventType[];
}

export const eventTypesQuery = {
  queryKey: ['webhook_event_types'] as const,
  queryFn: () => unwrap(api.GET('/v1/webhook_event_types')),
  staleTime: Number.POSITIVE_INFINITY,
};

const LABELS: Record<string, string> = { name: 'Endpoint name', url: 'Endpoint URL', event_types: 'Events' };

/** The label of an endpoint field, for the API's errors. */
export const endpointLabel = (key: string): string | null => LABELS[key.replace(/\[\d+\]$/, '')] ?? null;

/** What the form's values show wrong before sending, every field at once. */
export function checkEndpoint(form: EndpointForm): FieldErrors {
  const check = formChecks();
  check.required('name', 'Endpoint name', form.name);
  check.url('url', 'Endpoint URL', form.url);
  if (form.event_types.length === 0) check.add('event_types', 'Choose at least one event type');
  return check.errors;
}

export function EndpointFields({
  form,
  onChange,
  errorOf,
}: {
  form: EndpointForm;
  onChange: (form: EndpointForm) => void;
  errorOf: (field: string) => string | undefined;
}) {
  const types = useQuery(eventTypesQuery);
  return (
    <>
      <div className="grid-2">
        <Field label="Endpoint name" error={errorOf('name')}>
          {(props) => (
            <input {...props} value={form.name} onChange={(e) => onChange({ ...form, name: e.target.value })} />
          )}
        </Field>
        <Field label="Endpoint URL" error={errorOf('url')} hint="Public HTTPS; the server refuses private destinations">
          {(props) => (
            <input
              {...props}
              type="url"
              value={form.url}
              onChange={(e) => onChange({ ...form, url: e.target.value })}
              spellCheck={false}
            />
          )}
        </Field>
      </div>
      <fieldset>
        <legend>Events</legend>
        {errorOf('event_types') === undefined ? null : (
          <p className="field-error" role="alert">
            {errorOf('event_types')}
          </p>
        )}
        <div className="checks column">
          {(types.data?.data ?? []).map((type) => (
            <label key={type.type} className="check">
              <input
                type="checkbox"
                checked={form.event_types.includes(type.type)}
                onChange={(e) =>
                  onChange({
                    ...form,
                    event_types: e.target.checked
                      ? [...form.event_types, type.type]
                      : form.event_types.filter((item) => item !== type.type),
                  })
                }
              />
              <code>{type.type}</code> <span className="muted small">{type.description}</span>
            </label>
          ))}
        </div>
      </fieldset>
    </>
  );
}

/** A signing secret, shown once after create or rotate. */
export function SecretOnce({ secret }: { secret: string }) {
  return (
    <div className="note ok" role="status">
      <p>
        <strong>Signing secret</strong> (shown only now; store it with your receiver):
      </p>
      <p>
        <code className="secret" data-secret>
          {secret}
        </code>{' '}
        <button type="button" onClick={() => void navigator.clipboard?.writeText(secret)}>
          Copy
        </button>
      </p>
    </div>
  );
}
