/**
 * /console/agents/new and /console/agents/{id}: create or edit an agent (every change is a new version), see
 * what will not work as configured (the API's warnings), which versions ran, what it remembers, and delete it (a 409 says why it
 * cannot be deleted yet).
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { ApiError, api, idempotencyKey, unwrap } from '../api/client.ts';
import type { Agent } from '../api/types.ts';
import { useCan } from '../auth/session.tsx';
import { AgentFormFields, errorTarget } from '../components/agent-form.tsx';
import {
  type AgentForm,
  buildBody,
  checkForm,
  createBody,
  emptyForm,
  formKeyOf,
  formOf,
  labelOf,
  updateBody,
  warningKey,
} from '../components/agent-form-model.ts';
import { AgentMemories } from '../components/agent-memories.tsx';
import { AgentVersions } from '../components/agent-versions.tsx';
import { usePageTitle } from '../components/title.ts';
import { apiFieldErrors, ConfirmButton, ErrorNote, type FieldErrors, FormErrors, Loading } from '../components/ui.tsx';

/** Where MCP clients reach this agent as a tool (docs/mcp-server.md). */
function AgentMcp({ agent }: { agent: Agent }) {
  const url = `${window.location.origin}/v1/agents/${agent.id}/mcp`;
  return (
    <section aria-labelledby="mcp">
      <h2 id="mcp">MCP</h2>
      <p>
        MCP clients (Claude, VS Code, Cursor…) reach this agent as a <code>message</code> tool at{' '}
        <code data-testid="agent-mcp-url">{url}</code>, with an API key holding sessions:read and sessions:write as{' '}
        <code>Authorization: Bearer</code>. Every agent of the organization:{' '}
        <code>{window.location.origin}/v1/mcp</code>.
      </p>
    </section>
  );
}

function DeleteAgent({ agent }: { agent: Agent }) {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/agents/{id}', { params: { path: { id: agent.id } } })),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: ['agents'] });
      navigate('/agents');
    },
  });
  const error = remove.error;
  const conflict = error instanceof ApiError && error.status === 409 ? error.code : null;
  return (
    <section aria-labelledby="delete" className="danger-zone">
      <h2 id="delete">Delete</h2>
      {agent.isDefault ? (
        <p className="muted">This is the organization's default agent; it cannot be deleted.</p>
      ) : (
        <ConfirmButton
          label="Delete agent"
          consequence={`Delete ${agent.name} for good? Its versions and memories go with it; its runs and traces are kept.`}
          confirm="Confirm delete"
          onConfirm={() => remove.mutate()}
          pending={remove.isPending}
          danger
        />
      )}
      <ErrorNote error={error}>
        {conflict === 'agent_in_use' ? (
          <p>
            Sessions still use this agent, and their transcripts would lose their agent. Delete those sessions first (
            <Link to={`/sessions?agent=${agent.id}`}>its sessions</Link>), then delete the agent. Its runs and traces
            are kept.
          </p>
        ) : conflict === 'default_agent' ? (
          <p>The organization's default agent is created with the organization and stays.</p>
        ) : null}
      </ErrorNote>
    </section>
  );
}

export default function AgentEditorPage() {
  const { id } = useParams();
  const creating = id === undefined;
  const canWrite = useCan('agents:write');
  const canChat = useCan('sessions:write');
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const agent = useQuery({
    queryKey: ['agent', id],
    queryFn: () => unwrap(api.GET('/v1/agents/{id}', { params: { path: { id: id ?? '' } } })),
    enabled: !creating,
  });
  usePageTitle(creating ? 'New agent' : `Agent ${agent.data?.agent.name ?? ''}`.trim());
  const [form, setForm] = useState<AgentForm>(emptyForm);
  const [loadedVersion, setLoadedVersion] = useState<number | null>(null);
  const [fieldErrors, setFieldErrors] = useState<FieldErrors>({});
  const [topError, setTopError] = useState<unknown>(null);
  // Create, update and get all answer with the agent's warnings: the page shows the latest answer's.
  const warnings = agent.data?.warnings ?? [];
  const [saved, setSaved] = useState<string | null>(null);
  const [idemKey] = useState(idempotencyKey);

  const current = agent.data?.agent;
  useEffect(() => {
    if (current !== undefined && current.version !== loadedVersion) {
      setForm(formOf(current));
      setLoadedVersion(current.version);
    }
  }, [current, loadedVersion]);

  /** Errors at their fields; one no field owns goes to the top of the form. */
  const showErrors = (errors: FieldErrors) => {
    const entries = Object.entries(errors);
    const unplaced = entries.filter(([key]) => errorTarget(form, key) === null);
    setTopError(unplaced.length === 0 ? null : new Error(unplaced.map(([, message]) => message).join(' ')));
    setFieldErrors(Object.fromEntries(entries.filter(([key]) => errorTarget(form, key) !== null)));
  };
  const save = useMutation({
    mutationFn: async (value: AgentForm) => {
      const built = buildBody(value);
      try {
        if (current === undefined) {
          const answer = await unwrap(
            api.POST('/v1/agents', { body: createBody(built), params: { header: { 'idempotency-key': idemKey } } }),
          );
          return { answer };
        }
        const body = updateBody(built, current);
        if (Object.keys(body).length === 0) return { unchanged: true };
        const answer = await unwrap(api.PATCH('/v1/agents/{id}', { params: { path: { id: current.id } }, body }));
        return { answer };
      } catch (error) {
        const local = apiFieldErrors(error, (param) => formKeyOf(param, built.mcpKeys), labelOf);
        if (local !== null) return { local };
        throw error;
      }
    },
    onMutate: () => {
      setFieldErrors({});
      setTopError(null);
      setSaved(null);
    },
    onSuccess: async (result) => {
      if ('local' in result && result.local !== undefined) {
        showErrors(result.local);
        return;
      }
      if ('unchanged' in result) {
        setSaved('Nothing changed.');
        return;
      }
      if (!('answer' in result) || result.answer === undefined) return;
      const written = result.answer.agent;
      queryClient.setQueryData(['agent', written.id], result.answer);
      await queryClient.invalidateQueries({ queryKey: ['agents'] });
      if (creating) navigate(`/agents/${written.id}`, { replace: true });
      else setSaved(`Saved as version ${written.version}.`);
    },
    onError: (error) => setTopError(error),
  });

  const submit = (event: FormEvent) => {
    event.preventDefault();
    // Every error the form's own values show, all at once, before anything is sent.
    const checked = checkForm(form);
    if (Object.keys(checked).length === 0) save.mutate(form);
    else {
      setSaved(null);
      showErrors(checked);
    }
  };
  // Keyboard and screen reader users land on the first field in error (once the form is enabled again).
  const pending = save.isPending;
  useEffect(() => {
    if (!pending && Object.keys(fieldErrors).length > 0)
      document.querySelector<HTMLElement>('form [aria-invalid="true"]')?.focus();
  }, [fieldErrors, pending]);

  if (!creating && current === undefined) {
    return agent.error === null ? <Loading what="agent" /> : <ErrorNote error={agent.error} />;
  }
  return (
    <section>
      <div className="page-head">
        <h1>{creating ? 'New agent' : current?.name}</h1>
        {current === undefined ? null : (
          <div className="row">
            {canChat ? (
              <Link className="button primary" to={`/agents/${current.id}/chat`}>
                Open playground
              </Link>
            ) : null}
            <Link className="button" to={`/runs?agent=${current.id}`}>
              Runs
            </Link>
          </div>
        )}
      </div>
      {current === undefined ? null : (
        <>
          <p className="muted small">
            <code>{current.id}</code> · v{current.version}
          </p>
          <p className="muted small">
            A2A Agent Card (send the API key as a bearer token, docs/a2a.md):{' '}
            <code data-testid="agent-card-url">{`${window.location.origin}/v1/agents/${current.id}/.well-known/agent-card.json`}</code>
          </p>
        </>
      )}
      <form onSubmit={submit} noValidate aria-label={creating ? 'New agent' : 'Edit agent'}>
        <ErrorNote error={topError} />
        <FormErrors errors={fieldErrors} what="The agent" />
        {warnings.length === 0 ? null : (
          <div className="note warning" role="status" aria-label="Warnings">
            <p>Not everything will work as configured:</p>
            <ul className="note-list">
              {warnings.map((warning) => (
                <li key={`${warning.code} ${warning.message}`}>
                  {warning.message}
                  {warningKey(form, warning) === null ? ` (${warning.code})` : ' (see below)'}
                </li>
              ))}
            </ul>
          </div>
        )}
        <AgentFormFields
          form={form}
          onChange={setForm}
          errors={fieldErrors}
          warnings={warnings}
          disabled={!canWrite || save.isPending}
        />
        {canWrite ? (
          <div className="row">
            <button type="submit" className="primary" disabled={save.isPending}>
              {creating ? 'Create agent' : 'Save changes'}
            </button>
            {saved === null ? null : (
              <output className="ok" aria-live="polite">
                {saved}
              </output>
            )}
          </div>
        ) : (
          <p className="muted">This key can read agents but not change them (it lacks agents:write).</p>
        )}
      </form>
      {current === undefined ? null : (
        <>
          <AgentVersions agent={current} canWrite={canWrite} />
          <AgentMcp agent={current} />
          <AgentMemories agentId={current.id} canWrite={canWrite} />
          {canWrite ? <DeleteAgent agent={current} /> : null}
        </>
      )}
    </section>
  );
}
