/** /console/webhooks: the organization's webhook endpoints, and a form to create one (its secret shown once). */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client.ts';
import { useCan } from '../auth/session.tsx';
import { usePageTitle } from '../components/title.ts';
import {
  ErrorNote,
  FormErrors,
  Id,
  Loading,
  Pager,
  TableBox,
  useCursorPages,
  useFieldErrors,
  When,
} from '../components/ui.tsx';
import {
  checkEndpoint,
  EndpointFields,
  type EndpointForm,
  endpointLabel,
  SecretOnce,
} from '../components/webhook-form.tsx';

const PAGE = 25;

export default function WebhooksPage() {
  usePageTitle('Webhooks');
  const canWrite = useCan('webhooks:write');
  const queryClient = useQueryClient();
  const [params, setParams] = useSearchParams();
  const after = params.get('after') ?? '';
  const pages = useCursorPages(after, (next) => setParams(next === '' ? {} : { after: next }));
  const endpoints = useQuery({
    queryKey: ['webhook_endpoints', after],
    queryFn: () =>
      unwrap(
        api.GET('/v1/webhook_endpoints', { params: { query: { limit: PAGE, ...(after === '' ? {} : { after }) } } }),
      ),
  });
  const [form, setForm] = useState<EndpointForm>({ name: '', url: '', event_types: [] });
  const [creating, setCreating] = useState(false);
  const create = useMutation({
    mutationFn: (value: EndpointForm) => unwrap(api.POST('/v1/webhook_endpoints', { body: value })),
    onSuccess: async () => {
      setForm({ name: '', url: '', event_types: [] });
      await queryClient.invalidateQueries({ queryKey: ['webhook_endpoints'] });
    },
  });
  const fields = useFieldErrors(checkEndpoint, endpointLabel);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (fields.ready(form)) create.mutate(form, { onError: fields.failed });
  };
  return (
    <section>
      <div className="page-head">
        <h1>Webhooks</h1>
        {canWrite && !creating ? (
          <button type="button" className="primary" onClick={() => setCreating(true)}>
            New endpoint
          </button>
        ) : null}
      </div>
      {create.data?.signing_secret === undefined ? null : (
        <>
          <p>
            Created <Link to={`/webhooks/${create.data.id}`}>{create.data.name}</Link>.
          </p>
          <SecretOnce secret={create.data.signing_secret} />
        </>
      )}
      {creating ? (
        <form onSubmit={submit} noValidate aria-label="New webhook endpoint" className="card">
          <h2>New endpoint</h2>
          <FormErrors errors={fields.errors} what="The endpoint" />
          <EndpointFields form={form} onChange={setForm} errorOf={fields.errorOf} />
          {fields.any ? null : <ErrorNote error={create.error} />}
          <div className="row">
            <button type="submit" className="primary" disabled={create.isPending}>
              Create endpoint
            </button>
            <button type="button" onClick={() => setCreating(false)}>
              Close
            </button>
          </div>
        </form>
      ) : null}
      <ErrorNote error={endpoints.error} />
      {endpoints.data === undefined ? (
        endpoints.isPending ? (
          <Loading what="endpoints" />
        ) : null
      ) : endpoints.data.data.length === 0 ? (
        <p className="muted">
          No endpoints. Webhooks notify your application of session events, signed with Standard Webhooks.
        </p>
      ) : (
        <>
          <TableBox label="Webhook endpoints">
            <table>
              <caption className="sr-only">Webhook endpoints</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">URL</th>
                  <th scope="col">Events</th>
                  <th scope="col">Secret</th>
                  <th scope="col">Created</th>
                  <th scope="col">Id</th>
                </tr>
              </thead>
              <tbody>
                {endpoints.data.data.map((endpoint) => (
                  <tr key={endpoint.id}>
                    <td>
                      <Link to={`/webhooks/${endpoint.id}`}>{endpoint.name}</Link>
                    </td>
                    <td className="preview">
                      <code>{endpoint.url}</code>
                    </td>
                    <td>{endpoint.event_types.length}</td>
                    <td>
                      <code>{endpoint.signing_secret_hint}</code>
                    </td>
                    <td>
                      <When at={endpoint.created_at} />
                    </td>
                    <td>
                      <Id value={endpoint.id} what="endpoint" />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableBox>
          <Pager
            summary={pages.summary(endpoints.data.data.length, 'endpoints')}
            onPrevious={pages.onPrevious}
            onNext={endpoints.data.has_more ? pages.onNext(endpoints.data.last_id) : null}
          />
        </>
      )}
    </section>
  );
}
