/**
 * Renders the served OpenAPI document to Markdown for `GET /v1/openapi.md`, so the human-readable reference is
 * always generated from the same route schemas as `openapi.json` and cannot drift from it.
 */

type Obj = Readonly<Record<string, unknown>>;

/** Schema refs followed while walking fields, so a self-referencing schema stops instead of recursing forever. */
interface Resolved {
  schema: Obj;
  refs: ReadonlySet<string>;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'trace'] as const;
const SCHEMA_REF_PREFIX = '#/components/schemas/';
/** Body tables show top-level fields plus one nested level; deeper structure is reachable via the named schema. */
const NESTED_LEVELS = 1;
/** Bounds recursion over inline schemas, which only matters for a cyclic in-memory object (never parsed JSON). */
const MAX_DEPTH = 16;
const UNTAGGED = 'Other';
const COMBINATORS = Object.entries({ anyOf: ' | ', oneOf: ' | ', allOf: ' & ' });

const isObj = (value: unknown): value is Obj => typeof value === 'object' && value !== null && !Array.isArray(value);
const obj = (value: unknown): Obj => (isObj(value) ? value : {});
const list = (value: unknown): readonly unknown[] => (Array.isArray(value) ? value : []);
const isString = (value: unknown): value is string => typeof value === 'string';
const text = (value: unknown): string | undefined => (isString(value) && value.trim() !== '' ? value : undefined);
const num = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isFinite(value) ? value : undefined;
const unique = (values: readonly string[]): string[] => [...new Set(values)];

/** A code span whose fence is longer than any backtick run inside, so arbitrary values cannot break out of it. */
function code(value: string): string {
  const longest = (value.match(/`+/g) ?? []).reduce((max, run) => Math.max(max, run.length), 0);
  const fence = '`'.repeat(longest + 1);
  const pad = value.startsWith('`') || value.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${value}${pad}${fence}`;
}

const literal = (value: unknown): string => code(isString(value) ? value : String(JSON.stringify(value)));

/** GFM splits rows on unescaped `|` (even inside code spans) and ends a row at a newline. */
const cell = (value: string): string => value.replace(/\s*(?:\r\n|\r|\n)\s*/g, ' ').replace(/\|/g, '\\|');

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.map(cell).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** JSON-pointer segment decoding; a malformed `%` escape is kept verbatim rather than throwing on untrusted input. */
function decodeSegment(raw: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    decoded = raw;
  }
  return decoded.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** Resolves a local JSON pointer (`#/a/b`); anything else (remote refs) is not ours to fetch. */
function resolvePointer(doc: Obj, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let current: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    current = isObj(current) ? current[decodeSegment(raw)] : undefined;
  }
  return current;
}

function refName(ref: string): string {
  const tail = ref.startsWith(SCHEMA_REF_PREFIX) ? ref.slice(SCHEMA_REF_PREFIX.length) : (ref.split('/').pop() ?? ref);
  return decodeSegment(tail);
}

/** Follows a `$ref` chain (parameters, request bodies, responses); a cycle or dangling ref yields `{}`. */
function deref(doc: Obj, value: unknown): Obj {
  const seen = new Set<string>();
  let current = obj(value);
  for (let ref = text(current.$ref); ref !== undefined; ref = text(current.$ref)) {
    if (seen.has(ref)) return {};
    seen.add(ref);
    current = obj(resolvePointer(doc, ref));
  }
  return current;
}

const isNullSchema = (value: unknown): boolean => isObj(value) && value.type === 'null';

/** The single non-null member of `anyOf`/`oneOf`, i.e. what a nullable wrapper is wrapping. */
function nullableInner(schema: Obj): unknown {
  const members = [...list(schema.anyOf), ...list(schema.oneOf)];
  const nonNull = members.filter((member) => !isNullSchema(member));
  return nonNull.length === 1 && nonNull.length < members.length ? nonNull[0] : undefined;
}

function typeLabel(schema: unknown, depth = 0): string {
  if (!isObj(schema) || depth > MAX_DEPTH) return 'any';
  const ref = text(schema.$ref);
  if (ref !== undefined) return refName(ref);
  if ('const' in schema) return String(JSON.stringify(schema.const));
  // @fastify/swagger rewrites `const` to a one-value `enum` (convertConstToEnum), so treat that as a literal too.
  const values = list(schema.enum);
  if (values.length === 1) return String(JSON.stringify(values[0]));
  for (const [key, separator] of COMBINATORS) {
    const members = list(schema[key]);
    if (members.length > 0) return unique(members.map((member) => typeLabel(member, depth + 1))).join(separator);
  }
  const declared = isString(schema.type) ? [schema.type] : list(schema.type).filter(isString);
  const types = declared.length > 0 ? declared : unique(list(schema.enum).map((value) => typeof value));
  if (types.length === 0) return 'any';
  const labels = types.map((type) => {
    if (type !== 'array') return type;
    const inner = typeLabel(schema.items, depth + 1);
    return inner.includes(' ') ? `(${inner})[]` : `${inner}[]`;
  });
  // OpenAPI 3.0 spelling, accepted so a 3.0 document still renders sensibly.
  if (schema.nullable === true && !labels.includes('null')) labels.push('null');
  return labels.join(' | ');
}

function bounds(label: string, schema: Obj, min: string, max: string, exclusive: boolean): string | undefined {
  const [lo, hi] = [num(schema[min]), num(schema[max])];
  const parts = [
    lo !== undefined && hi !== undefined ? `${lo}..${hi}` : undefined,
    lo !== undefined && hi === undefined ? `>= ${lo}` : undefined,
    hi !== undefined && lo === undefined ? `<= ${hi}` : undefined,
    exclusive && num(schema.exclusiveMinimum) !== undefined ? `> ${num(schema.exclusiveMinimum)}` : undefined,
    exclusive && num(schema.exclusiveMaximum) !== undefined ? `< ${num(schema.exclusiveMaximum)}` : undefined,
  ].filter(isString);
  return parts.length > 0 ? `${label} ${parts.join(', ')}` : undefined;
}

function constraints(schema: Obj, depth = 0): string[] {
  const out: string[] = [];
  const format = text(schema.format);
  if (format !== undefined) out.push(`format: ${format}`);
  const length = bounds('length', schema, 'minLength', 'maxLength', false);
  const range = bounds('range', schema, 'minimum', 'maximum', true);
  out.push(...[length, range, bounds('items', schema, 'minItems', 'maxItems', false)].filter(isString));
  const pattern = text(schema.pattern);
  if (pattern !== undefined) out.push(`pattern: ${code(pattern)}`);
  const values = list(schema.enum);
  if (values.length > 1) out.push(`one of: ${values.map(literal).join(', ')}`);
  if ('default' in schema) out.push(`default: ${literal(schema.default)}`);
  if (schema.deprecated === true) out.push('deprecated');
  // A nullable wrapper carries its constraints on the wrapped member.
  const inner = nullableInner(schema);
  if (isObj(inner) && depth < MAX_DEPTH) out.push(...constraints(inner, depth + 1));
  // Item constraints (e.g. an enum of allowed values) are what callers of a list parameter most need to know.
  if (isObj(schema.items) && depth < MAX_DEPTH)
    out.push(...constraints(schema.items, depth + 1).map((c) => `each ${c}`));
  return out;
}

function describe(schema: unknown, description?: string): string {
  const own = obj(schema);
  const lead = text(description) ?? text(own.description) ?? text(obj(nullableInner(own)).description);
  const rules = constraints(own).join('; ');
  if (lead === undefined) return rules;
  return rules === '' ? lead : `${lead} (${rules})`;
}

/** Follows `$ref`s and nullable wrappers down to the schema that carries structure; undefined on a cycle. */
function unwrap(doc: Obj, value: unknown, seen: ReadonlySet<string>): Resolved | undefined {
  const refs = new Set(seen);
  let current = obj(value);
  for (let hops = 0; hops < MAX_DEPTH; hops++) {
    const ref = text(current.$ref);
    const inner = nullableInner(current);
    if (ref !== undefined) {
      if (refs.has(ref)) return undefined;
      refs.add(ref);
      current = obj(resolvePointer(doc, ref));
    } else if (inner !== undefined && !('properties' in current)) {
      current = obj(inner);
    } else {
      return { schema: current, refs };
    }
  }
  return undefined;
}

/** Own properties plus those of `allOf` members (how TypeBox intersections reach the document). */
function properties(doc: Obj, resolved: Resolved): { entries: [string, unknown][]; required: Set<string> } {
  const entries = Object.entries(obj(resolved.schema.properties));
  const required = new Set(list(resolved.schema.required).filter(isString));
  for (const member of list(resolved.schema.allOf)) {
    const part = unwrap(doc, member, resolved.refs);
    if (part === undefined) continue;
    entries.push(...Object.entries(obj(part.schema.properties)));
    for (const name of list(part.schema.required).filter(isString)) required.add(name);
  }
  return { entries, required };
}

function fieldRows(doc: Obj, resolved: Resolved, prefix: string, level: number, out: string[][]): string[][] {
  const { entries, required } = properties(doc, resolved);
  for (const [key, schema] of entries) {
    const name = `${prefix}${key}`;
    out.push([code(name), typeLabel(schema), required.has(key) ? 'yes' : 'no', describe(schema)]);
    if (level >= NESTED_LEVELS) continue;
    const child = unwrap(doc, schema, resolved.refs);
    if (child === undefined) continue;
    const isArray = child.schema.type === 'array' || list(child.schema.type).includes('array');
    const target = isArray ? unwrap(doc, child.schema.items, child.refs) : child;
    if (target !== undefined) fieldRows(doc, target, isArray ? `${name}[].` : `${name}.`, level + 1, out);
  }
  return out;
}

function securityText(requirements: readonly unknown[]): string {
  const alternatives = requirements.map((requirement) =>
    Object.entries(obj(requirement))
      .map(([name, scopes]) => {
        const names = list(scopes).filter(isString);
        return names.length > 0 ? `${code(name)} (${names.join(', ')})` : code(name);
      })
      .join(' + '),
  );
  const named = alternatives.filter((alternative) => alternative !== '');
  if (named.length === 0) return 'No authentication';
  // An empty requirement object among others makes authentication optional.
  return named.join(' or ') + (named.length < alternatives.length ? ' or no authentication' : '');
}

function renderAuthentication(doc: Obj): string[] {
  const schemes = Object.entries(obj(obj(doc.components).securitySchemes));
  if (schemes.length === 0) return [];
  const rows = schemes.map(([name, value]) => {
    const scheme = deref(doc, value);
    const type = text(scheme.type) ?? '';
    const format = text(scheme.bearerFormat);
    const details: Record<string, string> = {
      http: `${text(scheme.scheme) ?? ''}${format === undefined ? '' : ` (${format})`}`,
      apiKey: `${text(scheme.in) ?? ''} ${code(text(scheme.name) ?? '')}`,
      openIdConnect: text(scheme.openIdConnectUrl) ?? '',
      oauth2: Object.keys(obj(scheme.flows)).join(', '),
    };
    return [code(name), type, details[type] ?? '', text(scheme.description) ?? ''];
  });
  return ['## Authentication', table(['name', 'type', 'scheme', 'description'], rows)];
}

function renderParameters(doc: Obj, pathItem: Obj, operation: Obj): string[] {
  // Operation-level parameters override path-level ones with the same name and location.
  const byKey = new Map<string, Obj>();
  for (const raw of [...list(pathItem.parameters), ...list(operation.parameters)]) {
    const parameter = deref(doc, raw);
    const name = text(parameter.name);
    if (name !== undefined) byKey.set(`${String(parameter.in)}:${name}`, parameter);
  }
  if (byKey.size === 0) return [];
  const rows = [...byKey.values()].map((parameter) => {
    const where = text(parameter.in) ?? '';
    const required = parameter.required === true || where === 'path';
    const description = describe(parameter.schema, text(parameter.description));
    return [code(text(parameter.name) ?? ''), where, typeLabel(parameter.schema), required ? 'yes' : 'no', description];
  });
  return ['**Parameters**', table(['name', 'in', 'type', 'required', 'description'], rows)];
}

const mediaLabel = (mediaType: string, schema: unknown): string =>
  isObj(schema) && Object.keys(schema).length > 0 ? `${code(mediaType)} (${typeLabel(schema)})` : code(mediaType);

function renderRequestBody(doc: Obj, operation: Obj): string[] {
  if (operation.requestBody === undefined) return [];
  const body = deref(doc, operation.requestBody);
  const out = [
    `**Request body**${body.required === true ? ' (required)' : ''}`,
    ...[text(body.description)].filter(isString),
  ];
  for (const [mediaType, media] of Object.entries(obj(body.content))) {
    const schema = obj(media).schema;
    out.push(`Content type: ${mediaLabel(mediaType, schema)}`);
    const resolved = unwrap(doc, schema, new Set());
    const rows = resolved === undefined ? [] : fieldRows(doc, resolved, '', 0, []);
    if (rows.length > 0) out.push(table(['field', 'type', 'required', 'description'], rows));
  }
  return out;
}

function renderResponses(doc: Obj, operation: Obj): string[] {
  const rows = Object.entries(obj(operation.responses)).map(([status, value]) => {
    const response = deref(doc, value);
    const content = Object.entries(obj(response.content)).map(([type, media]) => mediaLabel(type, obj(media).schema));
    return [status, text(response.description) ?? '', content.join(', ')];
  });
  return rows.length === 0 ? [] : ['**Responses**', table(['status', 'description', 'content type'], rows)];
}

function renderOperation(doc: Obj, path: string, method: string, pathItem: Obj, operation: Obj): string[] {
  const out = [`### ${method.toUpperCase()} ${path}`];
  out.push(...[operation.summary, operation.description].map(text).filter(isString));
  if (operation.deprecated === true) out.push('**Deprecated.**');
  // An operation's own `security` (even `[]`) replaces the document default.
  const security = Array.isArray(operation.security) ? list(operation.security) : list(doc.security);
  out.push(
    `**Security:** ${securityText(security)}`,
    ...renderParameters(doc, pathItem, operation),
    ...renderRequestBody(doc, operation),
    ...renderResponses(doc, operation),
  );
  return out;
}

/** Renders an OpenAPI 3.1 document (as produced by @fastify/swagger) to Markdown. Pure; deterministic. */
export function renderOpenApiMarkdown(document: unknown): string {
  const doc = obj(document);
  const info = obj(doc.info);
  const title = [text(info.title) ?? 'API', text(info.version)].filter(isString).join(' ');
  const blocks = [`# ${title}`, ...[text(info.description)].filter(isString), ...renderAuthentication(doc)];

  const groups = new Map<string, string[][]>();
  for (const [path, value] of Object.entries(obj(doc.paths))) {
    const pathItem = obj(value);
    for (const method of METHODS) {
      const operation = pathItem[method];
      if (!isObj(operation)) continue;
      const tag = text(list(operation.tags)[0]) ?? UNTAGGED;
      const group = groups.get(tag) ?? [];
      group.push(renderOperation(doc, path, method, pathItem, operation));
      groups.set(tag, group);
    }
  }
  const tagDescriptions = new Map(list(doc.tags).map((tag) => [text(obj(tag).name), text(obj(tag).description)]));
  // Untagged operations go last so the named groups lead, whatever order the routes were registered in.
  const order = [...groups.keys()].filter((tag) => tag !== UNTAGGED);
  if (groups.has(UNTAGGED)) order.push(UNTAGGED);
  for (const tag of order) {
    blocks.push(`## ${tag}`, ...[tagDescriptions.get(tag)].filter(isString));
    for (const operation of groups.get(tag) ?? []) blocks.push(...operation);
  }
  return `${blocks.join('\n\n')}\n`;
}
