/**
 * Every field of an Agent (spec: name, description, instructions, model, maxSteps, MCP servers, client tools,
 * skills, network policy; the budget and tool approvals extensions), each with its errors (the form's own checks
 * and the API's, in words for people) and the API's warnings shown beside the field they concern. Built-in tools
 * this server cannot run say why before they are chosen.
 */
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { api, unwrap } from '../api/client.ts';
import {
  type AgentForm,
  ALLOWLISTS,
  APPROVAL_MODES,
  BUDGET_PERIODS,
  belongsTo,
  type ClientToolRow,
  EMPTY_PARAMETERS,
  INTERNAL_TOOL_NAMES,
  warningKey,
} from './agent-form-model.ts';
import { Field, type FieldErrors } from './ui.tsx';

export interface AgentWarning {
  code: string;
  message: string;
}

interface Props {
  form: AgentForm;
  onChange: (form: AgentForm) => void;
  /** The errors to show, keyed like the form (see formKeyOf). */
  errors: FieldErrors;
  /** The warnings of the latest answer about the agent, each shown at the field it concerns. */
  warnings: readonly AgentWarning[];
  disabled: boolean;
}

/** Every key a field of this form shows errors for; the longest one that contains the error's key wins. */
function fieldKeys(form: AgentForm): string[] {
  const keys = [
    'name',
    'description',
    'instructions',
    'model',
    'maxSteps',
    'internal',
    'mcpServers',
    'clientTools',
    'skills',
    'networkPolicy',
    'toolApprovals',
    'toolApprovals.overrides',
    'toolApprovals.timeoutSeconds',
    'budget',
    'budget.limitUsd',
    'budget.period',
  ];
  for (let i = 0; i < form.connectors.length; i += 1) keys.push(`connectors[${i}]`);
  for (let i = 0; i < form.urls.length; i += 1) keys.push(`urls[${i}]`, `urls[${i}].name`, `urls[${i}].url`);
  for (let i = 0; i < form.toolkits.length; i += 1) keys.push(`toolkits[${i}]`);
  for (let i = 0; i < form.clientTools.length; i += 1) {
    for (const part of ['', '.name', '.description', '.parameters', '.strict']) keys.push(`clientTools[${i}]${part}`);
  }
  for (let i = 0; i < form.skills.length; i += 1) keys.push(`skills[${i}]`, `skills[${i}].repo`, `skills[${i}].path`);
  return keys;
}

/** The field key an error lands on, or null when no field owns it (shown at the top of the form instead). */
export function errorTarget(form: AgentForm, errorKey: string): string | null {
  let best: string | null = null;
  for (const key of fieldKeys(form)) {
    if (belongsTo(errorKey, key) && (best === null || key.length > best.length)) best = key;
  }
  return best;
}

function Remove({ onClick, label }: { onClick: () => void; label: string }) {
  return (
    <button type="button" className="link danger" onClick={onClick} aria-label={label}>
      Remove
    </button>
  );
}

function Group({ title, children, add }: { title: string; children: ReactNode; add?: ReactNode }) {
  return (
    <fieldset>
      <legend>{title}</legend>
      {children}
      {add}
    </fieldset>
  );
}

/** The errors of a group or row that has no single field of its own. */
function GroupError({ message }: { message: string | undefined }) {
  if (message === undefined) return null;
  return (
    <p className="field-error" role="alert">
      {message}
    </p>
  );
}

/** Warnings beside the field they concern. */
function FieldWarnings({ warnings }: { warnings: readonly AgentWarning[] }) {
  return warnings.map((warning) => (
    <p key={`${warning.code} ${warning.message}`} className="field-warning small" role="status">
      {warning.message}
    </p>
  ));
}

/** The built-in tools and whether this server runs them (GET /v1/tools/builtin). */
function useBuiltinTools() {
  return useQuery({
    queryKey: ['tools', 'builtin'],
    queryFn: () => unwrap(api.GET('/v1/tools/builtin')),
    staleTime: 60_000,
  });
}

export function AgentFormFields({ form, onChange, errors, warnings, disabled }: Props) {
  const byField = new Map<string, string[]>();
  for (const [key, message] of Object.entries(errors)) {
    const target = errorTarget(form, key);
    if (target !== null) byField.set(target, [...(byField.get(target) ?? []), message]);
  }
  const errorOf = (key: string) => byField.get(key)?.join(' ');
  const warningsOf = (key: string) => warnings.filter((warning) => warningKey(form, warning) === key);
  const set = (patch: Partial<AgentForm>) => onChange({ ...form, ...patch });
  const builtin = useBuiltinTools();
  const builtinOf = (name: string) => builtin.data?.data.find((tool) => tool.name === name);
  const connectors = useQuery({
    queryKey: ['mcp_servers', 'all'],
    queryFn: () => unwrap(api.GET('/v1/mcp_servers', { params: { query: { limit: 100 } } })),
  });
  const models = useQuery({ queryKey: ['models'], queryFn: () => unwrap(api.GET('/v1/models')) });
  const modelHints = ['scripted', 'scripted/priced'];
  for (const model of models.data?.data ?? []) {
    if (model.kind === 'provider' && model.id !== 'scripted') modelHints.push(model.id.replace(/\*$/, ''));
  }
  const updateTool = (index: number, patch: Partial<ClientToolRow>) =>
    set({ clientTools: form.clientTools.map((tool, i) => (i === index ? { ...tool, ...patch } : tool)) });

  return (
    <fieldset disabled={disabled} className="plain">
      <div className="grid-2">
        <Field label="Name" error={errorOf('name')}>
          {(props) => (
            <input {...props} value={form.name} onChange={(e) => set({ name: e.target.value })} maxLength={200} />
          )}
        </Field>
        <Field
          label="Model"
          error={errorOf('model')}
          hint="provider/model, e.g. openai/gpt-5.4-mini; empty for the server's default"
        >
          {(props) => (
            <>
              <input
                {...props}
                list="model-hints"
                value={form.model}
                onChange={(e) => set({ model: e.target.value })}
                spellCheck={false}
              />
              <datalist id="model-hints">
                {modelHints.map((hint) => (
                  <option key={hint} value={hint} />
                ))}
              </datalist>
            </>
          )}
        </Field>
        <FieldWarnings warnings={warningsOf('model')} />
      </div>
      <Field label="Description" error={errorOf('description')}>
        {(props) => (
          <input {...props} value={form.description} onChange={(e) => set({ description: e.target.value })} />
        )}
      </Field>
      <Field label="Instructions" error={errorOf('instructions')}>
        {(props) => (
          <textarea
            {...props}
            rows={6}
            value={form.instructions}
            onChange={(e) => set({ instructions: e.target.value })}
          />
        )}
      </Field>
      <Field label="Max steps" error={errorOf('maxSteps')} hint="Model calls per turn, 1-128 (default 32)">
        {(props) => (
          <input
            {...props}
            type="number"
            inputMode="numeric"
            className="narrow"
            value={form.maxSteps}
            onChange={(e) => set({ maxSteps: e.target.value })}
          />
        )}
      </Field>

      <Group title="Built-in tools">
        <GroupError message={errorOf('internal')} />
        <FieldWarnings warnings={warningsOf('internal')} />
        <div className="checks column">
          {INTERNAL_TOOL_NAMES.map((name) => {
            const tool = builtinOf(name);
            const chosen = form.internal.includes(name);
            const unavailable = tool !== undefined && !tool.available;
            const reasonId = `builtin-${name.replace(/[^a-z_]/g, '')}-reason`;
            return (
              <label key={name} className={unavailable ? 'check unavailable' : 'check'}>
                <input
                  type="checkbox"
                  checked={chosen}
                  // One chosen before stays removable; a new one cannot be chosen while this server cannot run it.
                  disabled={unavailable && !chosen}
                  aria-describedby={tool?.reason == null ? undefined : reasonId}
                  onChange={(e) =>
                    set({
                      internal: e.target.checked
                        ? [...form.internal, name]
                        : form.internal.filter((item) => item !== name),
                    })
                  }
                />
                <code>{name}</code>
                {tool === undefined ? null : <span className="muted small">{tool.description}</span>}
                {tool?.reason == null ? null : (
                  <span className={unavailable ? 'tool-reason small' : 'muted small'} id={reasonId}>
                    {unavailable ? 'Cannot run on this server: ' : 'Partly: '}
                    {tool.reason}
                  </span>
                )}
              </label>
            );
          })}
        </div>
      </Group>

      <Group
        title="MCP servers"
        add={
          <div className="row">
            <button type="button" onClick={() => set({ urls: [...form.urls, { name: '', url: '' }] })}>
              Add server by URL
            </button>
            {(connectors.data?.data.length ?? 0) > 0 ? (
              <button
                type="button"
                onClick={() =>
                  set({ connectors: [...form.connectors, { serverId: connectors.data?.data[0]?.id ?? '', name: '' }] })
                }
              >
                Add connector
              </button>
            ) : null}
            <button type="button" onClick={() => set({ toolkits: [...form.toolkits, ''] })}>
              Add toolkit
            </button>
          </div>
        }
      >
        <GroupError message={errorOf('mcpServers')} />
        <FieldWarnings warnings={warningsOf('mcpServers')} />
        {form.urls.map((row, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity before they are saved
          <div className="row-box" key={`url-${i}`}>
            <Field label={`Server ${i + 1} name`} error={errorOf(`urls[${i}].name`) ?? errorOf(`urls[${i}]`)}>
              {(props) => (
                <input
                  {...props}
                  value={row.name}
                  onChange={(e) =>
                    set({ urls: form.urls.map((u, j) => (j === i ? { ...u, name: e.target.value } : u)) })
                  }
                />
              )}
            </Field>
            <Field label={`Server ${i + 1} URL`} error={errorOf(`urls[${i}].url`)}>
              {(props) => (
                <input
                  {...props}
                  type="url"
                  value={row.url}
                  onChange={(e) =>
                    set({ urls: form.urls.map((u, j) => (j === i ? { ...u, url: e.target.value } : u)) })
                  }
                />
              )}
            </Field>
            <FieldWarnings warnings={warningsOf(`urls[${i}]`)} />
            <Remove
              label={`Remove server ${i + 1}`}
              onClick={() => set({ urls: form.urls.filter((_, j) => j !== i) })}
            />
          </div>
        ))}
        {form.connectors.map((row, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity before they are saved
          <div className="row-box" key={`connector-${i}`}>
            <Field label={`Connector ${i + 1}`} error={errorOf(`connectors[${i}]`)}>
              {(props) => (
                <select
                  {...props}
                  value={row.serverId}
                  onChange={(e) =>
                    set({
                      connectors: form.connectors.map((c, j) => (j === i ? { ...c, serverId: e.target.value } : c)),
                    })
                  }
                >
                  {(connectors.data?.data ?? []).map((server) => (
                    <option key={server.id} value={server.id}>
                      {server.name} ({server.url})
                    </option>
                  ))}
                  {connectors.data?.data.some((server) => server.id === row.serverId) ? null : (
                    <option value={row.serverId}>{row.serverId}</option>
                  )}
                </select>
              )}
            </Field>
            <Field label={`Connector ${i + 1} local name (optional)`}>
              {(props) => (
                <input
                  {...props}
                  value={row.name}
                  onChange={(e) =>
                    set({ connectors: form.connectors.map((c, j) => (j === i ? { ...c, name: e.target.value } : c)) })
                  }
                />
              )}
            </Field>
            <FieldWarnings warnings={warningsOf(`connectors[${i}]`)} />
            <Remove
              label={`Remove connector ${i + 1}`}
              onClick={() => set({ connectors: form.connectors.filter((_, j) => j !== i) })}
            />
          </div>
        ))}
        {form.toolkits.map((toolkit, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity before they are saved
          <div className="row-box" key={`toolkit-${i}`}>
            <Field label={`Toolkit ${i + 1}`} error={errorOf(`toolkits[${i}]`)}>
              {(props) => (
                <input
                  {...props}
                  value={toolkit}
                  onChange={(e) => set({ toolkits: form.toolkits.map((t, j) => (j === i ? e.target.value : t)) })}
                />
              )}
            </Field>
            <Remove
              label={`Remove toolkit ${i + 1}`}
              onClick={() => set({ toolkits: form.toolkits.filter((_, j) => j !== i) })}
            />
          </div>
        ))}
      </Group>

      <Group
        title="Client tools"
        add={
          <button
            type="button"
            onClick={() =>
              set({
                clientTools: [
                  ...form.clientTools,
                  { name: '', description: '', parameters: EMPTY_PARAMETERS, strict: true },
                ],
              })
            }
          >
            Add client tool
          </button>
        }
      >
        <GroupError message={errorOf('clientTools')} />
        {form.clientTools.map((tool, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity before they are saved
          <div className="row-box" key={`tool-${i}`}>
            <GroupError message={errorOf(`clientTools[${i}]`)} />
            <div className="grid-2">
              <Field label={`Tool ${i + 1} name`} error={errorOf(`clientTools[${i}].name`)}>
                {(props) => (
                  <input
                    {...props}
                    value={tool.name}
                    onChange={(e) => updateTool(i, { name: e.target.value })}
                    spellCheck={false}
                  />
                )}
              </Field>
              <Field label={`Tool ${i + 1} description`} error={errorOf(`clientTools[${i}].description`)}>
                {(props) => (
                  <input
                    {...props}
                    value={tool.description}
                    onChange={(e) => updateTool(i, { description: e.target.value })}
                  />
                )}
              </Field>
            </div>
            <Field label={`Tool ${i + 1} parameters (JSON Schema)`} error={errorOf(`clientTools[${i}].parameters`)}>
              {(props) => (
                <textarea
                  {...props}
                  className="code"
                  rows={6}
                  value={tool.parameters}
                  onChange={(e) => updateTool(i, { parameters: e.target.value })}
                  spellCheck={false}
                />
              )}
            </Field>
            <label className="check">
              <input
                type="checkbox"
                checked={tool.strict}
                onChange={(e) => updateTool(i, { strict: e.target.checked })}
              />
              Strict (every property required)
            </label>
            <Remove
              label={`Remove tool ${i + 1}`}
              onClick={() => set({ clientTools: form.clientTools.filter((_, j) => j !== i) })}
            />
          </div>
        ))}
      </Group>

      <Group
        title="Skills"
        add={
          <button type="button" onClick={() => set({ skills: [...form.skills, { repo: '', path: '' }] })}>
            Add skill
          </button>
        }
      >
        <GroupError message={errorOf('skills')} />
        <FieldWarnings warnings={warningsOf('skills')} />
        {form.skills.map((skill, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity before they are saved
          <div className="row-box grid-2" key={`skill-${i}`}>
            <Field
              label={`Skill ${i + 1} repository (owner/name)`}
              error={errorOf(`skills[${i}].repo`) ?? errorOf(`skills[${i}]`)}
            >
              {(props) => (
                <input
                  {...props}
                  value={skill.repo}
                  onChange={(e) =>
                    set({ skills: form.skills.map((s, j) => (j === i ? { ...s, repo: e.target.value } : s)) })
                  }
                />
              )}
            </Field>
            <Field label={`Skill ${i + 1} folder`} error={errorOf(`skills[${i}].path`)}>
              {(props) => (
                <input
                  {...props}
                  value={skill.path}
                  onChange={(e) =>
                    set({ skills: form.skills.map((s, j) => (j === i ? { ...s, path: e.target.value } : s)) })
                  }
                />
              )}
            </Field>
            <Remove
              label={`Remove skill ${i + 1}`}
              onClick={() => set({ skills: form.skills.filter((_, j) => j !== i) })}
            />
          </div>
        ))}
      </Group>

      <Group title="Network policy">
        <GroupError message={errorOf('networkPolicy')} />
        <FieldWarnings warnings={warningsOf('networkPolicy')} />
        <label className="check">
          <input
            type="checkbox"
            checked={form.network.enabled}
            onChange={(e) => set({ network: { ...form.network, enabled: e.target.checked } })}
          />
          Set a network policy for the sandbox
        </label>
        {form.network.enabled ? (
          <>
            <label className="check">
              <input
                type="checkbox"
                checked={form.network.egress}
                onChange={(e) => set({ network: { ...form.network, egress: e.target.checked } })}
              />
              Allow network egress
            </label>
            <Field label="Domain allowlist">
              {(props) => (
                <select
                  {...props}
                  value={form.network.allowlist}
                  onChange={(e) =>
                    set({
                      network: {
                        ...form.network,
                        allowlist: ALLOWLISTS.find((value) => value === e.target.value) ?? 'none',
                      },
                    })
                  }
                >
                  {ALLOWLISTS.map((value) => (
                    <option key={value} value={value}>
                      {value.replaceAll('_', ' ')}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field label="Additional allowed domains" hint="One per line">
              {(props) => (
                <textarea
                  {...props}
                  rows={3}
                  value={form.network.domains}
                  onChange={(e) => set({ network: { ...form.network, domains: e.target.value } })}
                />
              )}
            </Field>
          </>
        ) : null}
      </Group>

      <Group title="Tool approvals">
        <GroupError message={errorOf('toolApprovals')} />
        <Field label="Server tool calls" hint="always ask: calls that may change something wait for your approval">
          {(props) => (
            <select
              {...props}
              value={form.approvals.default}
              onChange={(e) =>
                set({
                  approvals: {
                    ...form.approvals,
                    default: APPROVAL_MODES.find((value) => value === e.target.value) ?? 'auto',
                  },
                })
              }
            >
              {APPROVAL_MODES.map((value) => (
                <option key={value} value={value}>
                  {value === 'auto' ? 'run without asking' : 'always ask'}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field
          label="Approval overrides"
          error={errorOf('toolApprovals.overrides')}
          hint="One per line: a tool name or <server>__*, a colon, then auto or always_ask (e.g. sandbox_run: always_ask)"
        >
          {(props) => (
            <textarea
              {...props}
              rows={3}
              value={form.approvals.overrides}
              onChange={(e) => set({ approvals: { ...form.approvals, overrides: e.target.value } })}
            />
          )}
        </Field>
        <Field
          label="Approval timeout (seconds)"
          error={errorOf('toolApprovals.timeoutSeconds')}
          hint="Undecided calls are denied after this long; empty: they wait"
        >
          {(props) => (
            <input
              {...props}
              inputMode="numeric"
              value={form.approvals.timeoutSeconds}
              onChange={(e) => set({ approvals: { ...form.approvals, timeoutSeconds: e.target.value } })}
            />
          )}
        </Field>
      </Group>

      <Group title="Budget">
        <GroupError message={errorOf('budget')} />
        <div className="grid-2">
          <Field
            label="Budget (USD)"
            error={errorOf('budget.limitUsd')}
            hint="The most this agent's turns may spend on model calls; empty: no cap. Changing it keeps the version."
          >
            {(props) => (
              <input
                {...props}
                inputMode="decimal"
                className="narrow"
                value={form.budget.limitUsd}
                onChange={(e) => set({ budget: { ...form.budget, limitUsd: e.target.value } })}
              />
            )}
          </Field>
          <Field label="Budget period" error={errorOf('budget.period')}>
            {(props) => (
              <select
                {...props}
                value={form.budget.period}
                onChange={(e) =>
                  set({
                    budget: {
                      ...form.budget,
                      period: BUDGET_PERIODS.find((value) => value === e.target.value) ?? 'month',
                    },
                  })
                }
              >
                {BUDGET_PERIODS.map((value) => (
                  <option key={value} value={value}>
                    {value === 'month' ? 'each calendar month (UTC)' : 'for the agent’s whole life'}
                  </option>
                ))}
              </select>
            )}
          </Field>
        </div>
      </Group>
    </fieldset>
  );
}
