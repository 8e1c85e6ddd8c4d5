/**
 * /console/webhooks/{id}: edit an endpoint, rotate its secret, send a test, delete it, and read its event history
 * with each event's delivery (status, attempts, last status code or error) and a redeliver button.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { useNavigate, useParams } from 'react-router';
import { ApiError, api, idempotencyKey, unwrap } from '../api/client.ts';
import type { WebhookEvent } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import {
  Badge,
  ConfirmButton,
  ErrorNote,
  Field,
  FormErrors,
  Loading,
  useFieldErrors,
  When,
} from '../components/ui.tsx';
import {
  checkEndpoint,
  EndpointFields,
  type EndpointForm,
  type EventType,
  endpointLabel,
  SecretOnce,
} from '../components/webhook-form.tsx';

function Delivery({ endpointId, event, canWrite }: { endpointId: string; event: WebhookEvent; canWrite: boolean }) {
  const queryClient = useQueryClient();
  const path = { id: endpointId, event_id: event.id };
  const delivery = useQuery({
    queryKey: ['delivery', endpointId, event.id],
    queryFn: () => unwrap(api.GET('/v1/webhook_endpoints/{id}/events/{event_id}/delivery', { params: { path } })),
    refetchInterval: (query) => (query.state.data?.status === 'pending' ? 1000 : false),
  });
  const redeliver = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/webhook_endpoints/{id}/events/{event_id}/redeliver', {
          params: { path, header: { 'idempotency-key': idempotencyKey() } },
          body: {},
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['delivery', endpointId, event.id] }),
  });
  const data = delivery.data;
  const gone = delivery.error instanceof ApiError && delivery.error.status === 404;
  return (
    <tr data-event-id={event.id}>
      <td>
        <code>{event.type}</code>
        <div className="muted small">
          <code>{event.id}</code>
        </div>
      </td>
      <td>
        <When at={event.created_at} />
      </td>
      <td>
        {data === undefined ? (
          gone ? (
            <span className="muted small">details expired</span>
          ) : (
            <span className="muted small">…</span>
          )
        ) : (
          <>
            <Badge value={data.status} /> <span className="small">{data.kind}</span>
          </>
        )}
      </td>
      <td className="num">{data?.attempts ?? ''}</td>
      <td>
        {data === undefined ? null : data.error !== null ? (
          <span className="small">
            {data.status_code === null ? '' : `${data.status_code} · `}
            {data.error.message}
          </span>
        ) : data.status_code === null ? (
          ''
        ) : (
          <span className="small">HTTP {data.status_code}</span>
        )}
        {data?.next_attempt_at == null ? null : (
          <div className="muted small">
            next <When at={data.next_attempt_at} />
          </div>
        )}
      </td>
      <td>
        {canWrite ? (
          <button
            type="button"
            onClick={() => redeliver.mutate()}
            disabled={redeliver.isPending}
            aria-label={`Redeliver ${event.id}`}
          >
            Redeliver
          </button>
        ) : null}
        {redeliver.error === null ? null : <span className="field-error small">{String(redeliver.error.message)}</span>}
      </td>
    </tr>
  );
}

export default function WebhookPage() {
  const { id = '' } = useParams();
  const canWrite = useCan('webhooks:write');
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const endpoint = useQuery({
    queryKey: ['webhook_endpoint', id],
    queryFn: () => unwrap(api.GET('/v1/webhook_endpoints/{id}', { params: { path: { id } } })),
  });
  usePageTitle(`Webhook ${endpoint.data?.name ?? ''}`.trim());
  const events = useQuery({
    queryKey: ['webhook_events', id],
    queryFn: () =>
      unwrap(api.GET('/v1/webhook_endpoints/{id}/events', { params: { path: { id }, query: { limit: 50 } } })),
    refetchInterval: 3000,
  });
  const [form, setForm] = useState<EndpointForm | null>(null);
  const [testType, setTestType] = useState<EventType | ''>('');
  const current = endpoint.data;
  useEffect(() => {
    if (current !== undefined && form === null)
      setForm({ name: current.name, url: current.url, event_types: [...current.event_types] });
  }, [current, form]);
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: ['webhook_endpoint', id] });
    void queryClient.invalidateQueries({ queryKey: ['webhook_endpoints'] });
    void queryClient.invalidateQueries({ queryKey: ['webhook_events', id] });
  };
  const update = useMutation({
    mutationFn: (value: EndpointForm) =>
      unwrap(api.POST('/v1/webhook_endpoints/{id}', { params: { path: { id } }, body: value })),
    onSuccess: refresh,
  });
  const rotate = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/webhook_endpoints/{id}/rotate_secret', { params: { path: { id } }, body: {} })),
    onSuccess: refresh,
  });
  const test = useMutation({
    mutationFn: (eventType: EventType) =>
      unwrap(
        api.POST('/v1/webhook_endpoints/{id}/test', { params: { path: { id } }, body: { event_type: eventType } }),
      ),
    onSettled: refresh,
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/webhook_endpoints/{id}', { params: { path: { id } } })),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: ['webhook_endpoints'] });
      navigate('/webhooks');
    },
  });
  const fields = useFieldErrors(checkEndpoint, endpointLabel);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (form !== null && fields.ready(form)) update.mutate(form, { onError: fields.failed });
  };
  if (current === undefined)
    return endpoint.isPending ? <Loading what="endpoint" /> : <ErrorNote error={endpoint.error} />;
  const chosenTest = testType === '' ? current.event_types[0] : testType;
  return (
    <section>
      <h1>Webhook {current.name}</h1>
      <p className="muted small">
        <code>{current.id}</code> · secret <code data-secret-hint>{current.signing_secret_hint}</code> · updated{' '}
        <When at={current.updated_at} />
      </p>
      {rotate.data?.signing_secret === undefined ? null : <SecretOnce secret={rotate.data.signing_secret} />}
      {form === null ? null : (
        <form onSubmit={submit} noValidate aria-label="Edit webhook endpoint" className="card">
          <fieldset disabled={!canWrite} className="plain">
            <FormErrors errors={fields.errors} what="The endpoint" />
            <EndpointFields form={form} onChange={setForm} errorOf={fields.errorOf} />
          </fieldset>
          {fields.any ? null : <ErrorNote error={update.error} />}
          {canWrite ? (
            <div className="row">
              <button type="submit" className="primary" disabled={update.isPending}>
                Save endpoint
              </button>
              {update.isSuccess ? <output className="ok">Saved.</output> : null}
            </div>
          ) : null}
        </form>
      )}
      {canWrite ? (
        <div className="card">
          <h2>Test and secret</h2>
          <div className="row">
            <Field label="Test event type">
              {(props) => (
                <select
                  {...props}
                  value={chosenTest ?? ''}
                  onChange={(e) => setTestType(current.event_types.find((type) => type === e.target.value) ?? '')}
                >
                  {current.event_types.map((type) => (
                    <option key={type} value={type}>
                      {type}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <button
              type="button"
              onClick={() => chosenTest !== undefined && test.mutate(chosenTest)}
              disabled={test.isPending || chosenTest === undefined}
            >
              Send test
            </button>
            <ConfirmButton
              label="Rotate secret"
              consequence="A new secret signs every delivery from now on; the current one stops working at once, so update the receiver with the new secret."
              confirm="Confirm rotate"
              onConfirm={() => rotate.mutate()}
              pending={rotate.isPending}
            />
          </div>
          {test.data === undefined ? null : (
            <p className={test.data.success ? 'note ok' : 'note warning'} role="status">
              Test {test.data.event_type}: the receiver answered HTTP {test.data.status_code ?? '—'}.
            </p>
          )}
          <ErrorNote error={test.error ?? rotate.error} />
        </div>
      ) : null}
      <h2 id="events">Events</h2>
      <ErrorNote error={events.error} />
      {events.data === undefined ? (
        events.isPending ? (
          <Loading what="events" />
        ) : null
      ) : events.data.data.length === 0 ? (
        <p className="muted">No events yet. Events appear when sessions change state (or after a test).</p>
      ) : (
        <table aria-labelledby="events">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Created</th>
              <th scope="col">Delivery</th>
              <th scope="col" className="num">
                Attempts
              </th>
              <th scope="col">Last answer</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {events.data.data.map((event) => (
              <Delivery key={event.id} endpointId={id} event={event} canWrite={canWrite} />
            ))}
          </tbody>
        </table>
      )}
      {canWrite ? (
        <div className="danger-zone">
          <ConfirmButton
            label="Delete endpoint"
            consequence="Delete this endpoint? Pending deliveries are skipped and its event history goes with it."
            confirm="Confirm delete"
            onConfirm={() => remove.mutate()}
            pending={remove.isPending}
            danger
          />
          <ErrorNote error={remove.error} />
        </div>
      ) : null}
    </section>
  );
}
