/** The fields of a webhook endpoint (name, URL, subscribed event types), with the API's errors beside them. */
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client.ts';
import type { WebhookEndpoint } from '../api/types.ts';
import { Field } from './ui.tsx';

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

export function EndpointFields({
  form,
  onChange,
  error,
}: {
  form: EndpointForm;
  onChange: (form: EndpointForm) => void;
  error: { param: string | null; message: string } | null;
}) {
  const types = useQuery(eventTypesQuery);
  const errorOf = (param: string) => (error?.param?.startsWith(param) ? error.message : undefined);
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
