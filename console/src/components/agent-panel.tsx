/**
 * The agent beside the playground's chat: its model, instructions, step limit and approval policy, edited in place
 * and saved as a new version (PATCH with If-Match on the version the edit started from, so a change made meanwhile
 * is a 409 version_conflict shown with a way to load the latest, never overwritten); its tools and network policy
 * listed, the agent page linked for the rest. Sessions that follow the latest version run the new one from their
 * next turn.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'react-router';
import { ApiError, api, unwrap } from '../api/client.ts';
import type { Agent, AgentUpdate, ApprovalMode, McpServerEntry } from '../api/types.ts';
import { ErrorNote, errorText, Field } from './ui.tsx';

interface Draft {
  model: string;
  instructions: string;
  maxSteps: string;
  approvals: ApprovalMode;
}

const draftOf = (agent: Agent): Draft => ({
  model: agent.model,
  instructions: agent.instructions,
  maxSteps: String(agent.maxSteps),
  approvals: agent.toolApprovals.default,
});

function serverName(entry: McpServerEntry): string {
  if ('toolkit' in entry) return `${entry.toolkit} (Composio)`;
  if ('serverId' in entry) return entry.name ?? entry.serverId;
  return entry.name;
}

/** The fields of `draft` that differ from `base`, as a PATCH body. */
function changes(agent: Agent, base: Draft, draft: Draft): AgentUpdate {
  const body: AgentUpdate = {};
  if (draft.model !== base.model) body.model = draft.model;
  if (draft.instructions !== base.instructions) body.instructions = draft.instructions;
  if (draft.maxSteps !== base.maxSteps) body.maxSteps = Number(draft.maxSteps);
  if (draft.approvals !== base.approvals) body.toolApprovals = { ...agent.toolApprovals, default: draft.approvals };
  return body;
}

/** The field a validation error names: `toolApprovals.default` → `toolApprovals`. */
const fieldOf = (param: string | null) => (param === null ? null : (param.split(/[.[]/)[0] ?? null));

export function AgentPanel({ agent, canWrite }: { agent: Agent; canWrite: boolean }) {
  const queryClient = useQueryClient();
  // Null while nothing is edited (the panel shows the agent as it is); otherwise the edit and what it started from.
  const [edit, setEdit] = useState<{ version: number; base: Draft; draft: Draft } | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const models = useQuery({ queryKey: ['models'], queryFn: () => unwrap(api.GET('/v1/models')) });
  const shown = edit?.draft ?? draftOf(agent);
  const set = (patch: Partial<Draft>) => {
    setSaved(null);
    const base = edit ?? { version: agent.version, base: draftOf(agent), draft: draftOf(agent) };
    setEdit({ ...base, draft: { ...base.draft, ...patch } });
  };
  const save = useMutation({
    mutationFn: async () => {
      if (edit === null) return null;
      const body = changes(agent, edit.base, edit.draft);
      if (Object.keys(body).length === 0) return null;
      return unwrap(
        api.PATCH('/v1/agents/{id}', {
          params: { path: { id: agent.id }, header: { 'if-match': `"${edit.version}"` } },
          body,
        }),
      );
    },
    onSuccess: async (answer) => {
      setEdit(null);
      if (answer === null) {
        setSaved('Nothing changed.');
        return;
      }
      setSaved(`Saved as version ${answer.agent.version}.`);
      queryClient.setQueryData(['agent', agent.id], answer);
      await queryClient.invalidateQueries({ queryKey: ['agents'] });
      await queryClient.invalidateQueries({ queryKey: ['agent-versions', agent.id] });
    },
  });
  const reload = async () => {
    await queryClient.invalidateQueries({ queryKey: ['agent', agent.id] });
    setEdit(null);
    save.reset();
  };
  const error = save.error;
  const conflict = error instanceof ApiError && error.code === 'version_conflict';
  const invalid = error instanceof ApiError && !conflict ? fieldOf(error.param) : null;
  const errorAt = (field: string) => (invalid === field && error !== null ? error.message : undefined);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  const modelHints = ['scripted', 'scripted/priced'];
  for (const model of models.data?.data ?? []) {
    if (model.kind === 'provider' && model.id !== 'scripted') modelHints.push(model.id.replace(/\*$/, ''));
  }
  const tools = [...agent.mcpServers.map(serverName), ...agent.clientTools.map((tool) => `${tool.name} (client)`)];
  const overrides = Object.keys(agent.toolApprovals.overrides).length;
  const network = agent.networkPolicy;
  return (
    <section className="agent-panel" aria-labelledby="agent-panel-heading">
      <h2 id="agent-panel-heading" className="small-heading">
        Agent · v{agent.version}
      </h2>
      <form onSubmit={submit}>
        <fieldset className="plain" disabled={!canWrite || save.isPending}>
          <Field label="Model" error={errorAt('model')}>
            {(props) => (
              <>
                <input
                  {...props}
                  list="agent-panel-models"
                  value={shown.model}
                  onChange={(e) => set({ model: e.target.value })}
                />
                <datalist id="agent-panel-models">
                  {modelHints.map((hint) => (
                    <option key={hint} value={hint} />
                  ))}
                </datalist>
              </>
            )}
          </Field>
          <Field label="Instructions" error={errorAt('instructions')}>
            {(props) => (
              <textarea
                {...props}
                rows={8}
                value={shown.instructions}
                onChange={(e) => set({ instructions: e.target.value })}
              />
            )}
          </Field>
          <Field label="Max steps" error={errorAt('maxSteps')}>
            {(props) => (
              <input
                {...props}
                type="number"
                min={1}
                max={128}
                value={shown.maxSteps}
                onChange={(e) => set({ maxSteps: e.target.value })}
              />
            )}
          </Field>
          <Field
            label="Tool approvals"
            error={errorAt('toolApprovals')}
            hint={overrides === 0 ? undefined : `${overrides} per-tool overrides kept (edit them on the agent page)`}
          >
            {(props) => (
              <select
                {...props}
                value={shown.approvals}
                onChange={(e) => set({ approvals: e.target.value as ApprovalMode })}
              >
                <option value="auto">Run tools without asking</option>
                <option value="always_ask">Ask before every tool call</option>
              </select>
            )}
          </Field>
        </fieldset>
        {conflict ? (
          <div className="note error" role="alert">
            <p>
              Not saved: the agent changed since you started editing ({errorText(error)}). Load its latest version, then
              make your change again.
            </p>
            <button type="button" onClick={() => void reload()}>
              Load latest version
            </button>
          </div>
        ) : invalid === null ? (
          <ErrorNote error={error} />
        ) : null}
        {canWrite ? (
          <div className="row">
            <button type="submit" className="primary" disabled={save.isPending || edit === null}>
              Save as new version
            </button>
            {edit === null ? null : (
              <button type="button" onClick={() => setEdit(null)} disabled={save.isPending}>
                Discard changes
              </button>
            )}
            {saved === null ? null : <output className="muted small">{saved}</output>}
          </div>
        ) : (
          <p className="muted small">Your key cannot change agents (agents:write).</p>
        )}
      </form>
      <h3 className="small-heading">Tools</h3>
      {tools.length === 0 ? (
        <p className="muted small">None.</p>
      ) : (
        <ul className="agent-panel-tools">
          {tools.map((tool) => (
            <li key={tool}>
              <code>{tool}</code>
            </li>
          ))}
        </ul>
      )}
      <h3 className="small-heading">Network</h3>
      <p className="muted small">
        {network === null
          ? 'No network policy: the default.'
          : `${network.allow_network_egress ? `egress to ${network.domain_allowlist.replaceAll('_', ' ')}` : 'no egress'}${
              (network.additional_allowed_domains ?? []).length > 0
                ? ` and ${(network.additional_allowed_domains ?? []).join(', ')}`
                : ''
            }`}
      </p>
      <p className="small">
        <Link to={`/agents/${agent.id}`}>Tools, skills and versions on the agent page</Link>
      </p>
    </section>
  );
}
