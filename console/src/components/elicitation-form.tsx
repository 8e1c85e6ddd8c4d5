/**
 * The answer to an MCP server's elicitation (a required action `mcp_elicitation`): a form built from the requested
 * schema's flat properties (string, number, integer, boolean, enum) in form mode, the link to open in URL mode,
 * and Accept, Decline and Cancel, answered on the answer route. The API checks the content against the schema;
 * its validation error is shown at the field it names (`answer.content.<property>`).
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiError, api, unwrap } from '../api/client.ts';
import type { Message, RequiredAction, Session } from '../api/types.ts';
import { ErrorNote, Field } from './ui.tsx';

type Elicitation = Extract<RequiredAction, { type: 'mcp_elicitation' }>;
type Decision = 'accept' | 'decline' | 'cancel';

interface Property {
  name: string;
  type: 'string' | 'number' | 'integer' | 'boolean';
  title: string;
  description: string | null;
  /** Choices of an enum: the value sent and what is shown. */
  choices: { value: string; label: string }[] | null;
  required: boolean;
  initial: string | boolean;
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** The choices of an enum property: `enum` (with `enumNames`), or `oneOf`/`anyOf` of `{const, title}`. */
function choicesOf(schema: Record<string, unknown>): Property['choices'] {
  if (Array.isArray(schema.enum)) {
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((value, i) => ({ value: String(value), label: text(names[i]) ?? String(value) }));
  }
  const options = Array.isArray(schema.oneOf) ? schema.oneOf : Array.isArray(schema.anyOf) ? schema.anyOf : null;
  if (options === null) return null;
  const choices = options.map(record).filter((option) => option.const !== undefined);
  return choices.length === 0
    ? null
    : choices.map((option) => ({ value: String(option.const), label: text(option.title) ?? String(option.const) }));
}

/** The flat properties of a requested schema, in their order. */
function propertiesOf(requested: unknown): Property[] {
  const schema = record(requested);
  const required = new Set(
    Array.isArray(schema.required) ? schema.required.filter((name) => typeof name === 'string') : [],
  );
  return Object.entries(record(schema.properties)).map(([name, raw]) => {
    const property = record(raw);
    const type =
      property.type === 'number' || property.type === 'integer' || property.type === 'boolean'
        ? property.type
        : 'string';
    const fallback = property.default;
    return {
      name,
      type,
      title: text(property.title) ?? name,
      description: text(property.description),
      choices: choicesOf(property),
      required: required.has(name),
      initial: type === 'boolean' ? fallback === true : fallback === undefined ? '' : String(fallback),
    };
  });
}

/** The content to send: numbers as numbers, empty optional fields left out (an empty required one is sent empty). */
function contentOf(properties: Property[], values: Record<string, string | boolean>): Record<string, unknown> {
  const content: Record<string, unknown> = {};
  for (const property of properties) {
    const value = values[property.name] ?? property.initial;
    if (typeof value === 'boolean') {
      content[property.name] = value;
      continue;
    }
    if (value === '' && !property.required) continue;
    if (property.type === 'number' || property.type === 'integer') {
      const number = Number(value);
      content[property.name] = value.trim() === '' || Number.isNaN(number) ? value : number;
    } else content[property.name] = value;
  }
  return content;
}

function PropertyField({
  property,
  value,
  error,
  onChange,
}: {
  property: Property;
  value: string | boolean;
  error: string | undefined;
  onChange: (value: string | boolean) => void;
}) {
  const label = `${property.title}${property.required ? ' (required)' : ''}`;
  const hint = property.description ?? undefined;
  return (
    <Field label={label} hint={hint} error={error}>
      {(props) =>
        property.type === 'boolean' ? (
          <input {...props} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} />
        ) : property.choices !== null ? (
          <select {...props} value={String(value)} onChange={(e) => onChange(e.target.value)}>
            {property.required ? null : <option value="">(none)</option>}
            {property.required && value === '' ? <option value="">Choose…</option> : null}
            {property.choices.map((choice) => (
              <option key={choice.value} value={choice.value}>
                {choice.label}
              </option>
            ))}
          </select>
        ) : (
          <input
            {...props}
            type={property.type === 'string' ? 'text' : 'number'}
            step={property.type === 'integer' ? 1 : 'any'}
            value={String(value)}
            onChange={(e) => onChange(e.target.value)}
          />
        )
      }
    </Field>
  );
}

export function ElicitationForm({
  session,
  message,
  action,
}: {
  session: Session;
  message: Message;
  action: Elicitation;
}) {
  const properties = action.mode === 'form' ? propertiesOf(action.requestedSchema) : [];
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const queryClient = useQueryClient();
  const answer = useMutation({
    mutationFn: (decision: Decision) =>
      unwrap(
        api.POST('/v1/sessions/{id}/messages/{messageId}/answer', {
          params: { path: { id: session.id, messageId: message.id } },
          body: {
            actionId: action.actionId,
            answer:
              decision === 'accept' && action.mode === 'form'
                ? { action: decision, content: contentOf(properties, values) }
                : { action: decision },
          },
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['messages', session.id] }),
  });
  const error = answer.error;
  const param = error instanceof ApiError ? error.param : null;
  const fieldOf = (name: string) =>
    param === `answer.content.${name}` || param?.startsWith(`answer.content.${name}.`) ? error?.message : undefined;
  const atField = properties.some((property) => fieldOf(property.name) !== undefined);
  return (
    <form
      className="action-form elicitation"
      aria-label={`Input for ${action.tool}`}
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        answer.mutate('accept');
      }}
    >
      <p>
        <strong>{action.server}</strong> asks, for <code>{action.tool}</code>: {action.message}
      </p>
      {action.mode === 'url' && action.url !== null ? (
        <p>
          <a href={action.url} target="_blank" rel="noreferrer noopener">
            Open {action.url}
          </a>{' '}
          <span className="muted small">then accept once done there, or decline.</span>
        </p>
      ) : null}
      {properties.map((property) => (
        <PropertyField
          key={property.name}
          property={property}
          value={values[property.name] ?? property.initial}
          error={fieldOf(property.name)}
          onChange={(value) => setValues((previous) => ({ ...previous, [property.name]: value }))}
        />
      ))}
      {atField ? null : <ErrorNote error={error} />}
      <div className="actions">
        <button type="submit" className="primary" disabled={answer.isPending}>
          Accept
        </button>
        <button type="button" disabled={answer.isPending} onClick={() => answer.mutate('decline')}>
          Decline
        </button>
        <button type="button" disabled={answer.isPending} onClick={() => answer.mutate('cancel')}>
          Cancel
        </button>
      </div>
    </form>
  );
}
