/**
 * Request validation. Bodies are validated strictly (no type coercion, unknown properties rejected); path,
 * query and header values are coerced from their string form. Errors name the field the way a user writes it:
 * `clientTools[0].name`, `limit`, `Idempotency-Key`.
 *
 * Two rules hold for every request part whatever its schema says, so both storage dialects give the same answer:
 * no string (value or key) may contain U+0000 or a lone UTF-16 surrogate (PostgreSQL text cannot hold the first,
 * and UTF-8 cannot encode the second), and integers stay within JavaScript's safe range (larger ones would be
 * silently rounded, then overflow a bigint column).
 */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

type AddFormats = (ajv: Ajv) => Ajv;
// ajv-formats is CommonJS; under Node's ESM loader the callable sits on `default`.
const addFormats: AddFormats =
  typeof addFormatsModule === 'function' ? addFormatsModule : Reflect.get(addFormatsModule, 'default');

// `discriminator`: a union told apart by a field (a document's `kind`) reports the failures of the branch it names.
const common: Options = {
  allErrors: false,
  strict: false,
  useDefaults: true,
  removeAdditional: false,
  messages: true,
  discriminator: true,
};

/** RFC 9562 text form only; ajv-formats would also accept a `urn:uuid:` prefix, which no id here carries. */
const UUID_FORMAT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function createAjv(options: Options): Ajv {
  const ajv = new Ajv({ ...common, ...options });
  addFormats(ajv);
  ajv.addFormat('uuid', UUID_FORMAT);
  return ajv;
}

/** A validation failure in Ajv's shape, so the error handler words it like any other. */
interface PartProblem {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  params: Record<string, unknown>;
  message: string;
}

interface PartValidator {
  (data: unknown): boolean | { value: unknown };
  errors?: PartProblem[] | ErrorObject[] | null;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strictAjv = createAjv({ coerceTypes: false });
  const coercingAjv = createAjv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strictAjv : coercingAjv;
    // Compiled on the route's first request, not when the server starts: compiling every schema of the API took
    // most of the time before a server was ready, and a process serves few of its routes soon after it starts.
    let compiled: ValidateFunction | null = null;
    const compile = (): ValidateFunction => {
      compiled ??= ajv.compile(schema as object);
      return compiled;
    };
    const validate: PartValidator = (data) => {
      const check = compile();
      // Fastify hands a missing body over as null (a body of JSON null is no better).
      if (httpPart === 'body' && (data === undefined || data === null)) {
        // No body (or an empty one) is an empty object: accepted where every field is optional, and otherwise
        // answered with the first missing field ("name is required").
        const empty = {};
        const valid = check(empty);
        validate.errors = check.errors ?? null;
        return valid ? { value: empty } : false;
      }
      const unstorable = findUnstorableString(data);
      if (unstorable !== null) {
        validate.errors = [
          {
            keyword: 'unicode',
            instancePath: unstorable.pointer,
            schemaPath: '#',
            params: {},
            message: unstorable.problem,
          },
        ];
        return false;
      }
      const valid = check(data);
      validate.errors = check.errors ?? null;
      return valid;
    };
    return validate;
  };
}

/** Where a string that no storage dialect can hold unchanged sits (a JSON Pointer), and why. */
export interface UnstorableString {
  pointer: string;
  problem: string;
}

const escapePointer = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');

/** What in the text no dialect stores unchanged, or null. */
function unstorablePart(text: string): string | null {
  if (text.includes('\u0000')) return 'the NUL character (U+0000)';
  if (!text.isWellFormed()) return 'a lone UTF-16 surrogate (invalid Unicode)';
  return null;
}

/**
 * The first string value or object key containing U+0000 or a lone surrogate, or null. Iterative, so it is safe
 * on any depth the JSON parser let through.
 */
export function findUnstorableString(value: unknown): UnstorableString | null {
  const stack: { value: unknown; pointer: string }[] = [{ value, pointer: '' }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const current = next.value;
    if (typeof current === 'string') {
      const part = unstorablePart(current);
      if (part !== null) return { pointer: next.pointer, problem: `must not contain ${part}` };
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) {
        stack.push({ value: current[index], pointer: `${next.pointer}/${index}` });
      }
    } else if (typeof current === 'object' && current !== null) {
      const entries = Object.entries(current);
      for (let index = entries.length - 1; index >= 0; index--) {
        const [key, child] = entries[index] ?? ['', undefined];
        const part = unstorablePart(key);
        if (part !== null)
          return { pointer: next.pointer, problem: `must not have a property name containing ${part}` };
        stack.push({ value: child, pointer: `${next.pointer}/${escapePointer(key)}` });
      }
    }
  }
  return null;
}

/** `/clientTools/0/name` → `clientTools[0].name` (JSON Pointer to the dotted form users write). */
export function pointerToParam(pointer: string): string {
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const segment = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    out += /^\d+$/.test(segment) ? `[${segment}]` : out === '' ? segment : `.${segment}`;
  }
  return out;
}

const FRIENDLY_PATTERNS: Record<string, string> = {
  '\\S': 'must contain a non-whitespace character',
  '^\\S(?:[\\s\\S]*\\S)?$': 'must not have leading or trailing whitespace',
  '^[\\x21-\\x7E]+$': 'must be visible ASCII characters (0x21-0x7E)',
  '^[A-Za-z0-9_-]+$': 'must contain only letters, digits, underscores and hyphens',
};

const HEADER_NAMES: Record<string, string> = { 'idempotency-key': 'Idempotency-Key' };

export interface FieldProblem {
  param: string;
  message: string;
}

/** OpenAI's wording for a top-level body field it does not know (param: the field). */
export const unknownParameter = (field: string) => `Unknown parameter: '${field}'.`;

/** Whether an Ajv error is a top-level field the schema does not declare. */
export const isUnknownTopLevelField = (error: { keyword: string; instancePath: string }) =>
  error.keyword === 'additionalProperties' && error.instancePath === '';

/** Turns the first Ajv error into a param name and a sentence that starts with it. */
export function describeValidationError(error: ErrorObject, context: string | undefined): FieldProblem {
  const base = pointerToParam(error.instancePath);
  const params = error.params as Record<string, unknown>;
  const join = (child: string) => (base === '' ? child : `${base}.${child}`);
  const headerName = (name: string) => (context === 'headers' ? (HEADER_NAMES[name] ?? name) : name);
  const whole = base === '' ? (context === 'querystring' ? 'query' : (context ?? 'body')) : headerName(base);
  switch (error.keyword) {
    case 'required': {
      const field = headerName(join(String(params.missingProperty)));
      return { param: field, message: `${field} is required` };
    }
    case 'additionalProperties': {
      const field = join(String(params.additionalProperty));
      return { param: field, message: `${field} is not a recognised field${base === '' ? '' : ` of ${base}`}` };
    }
    case 'pattern': {
      const friendly = FRIENDLY_PATTERNS[String(params.pattern)];
      return { param: whole, message: `${whole} ${friendly ?? `must match the pattern ${String(params.pattern)}`}` };
    }
    case 'maxLength':
      return { param: whole, message: `${whole} must be at most ${String(params.limit)} characters` };
    case 'minLength':
      return { param: whole, message: `${whole} must be at least ${String(params.limit)} characters` };
    case 'maxItems':
      return { param: whole, message: `${whole} must have at most ${String(params.limit)} items` };
    case 'minItems':
      return { param: whole, message: `${whole} must have at least ${String(params.limit)} items` };
    case 'enum':
      return {
        param: whole,
        message: `${whole} must be one of ${(params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(', ')}`,
      };
    case 'const':
      return { param: whole, message: `${whole} must be ${JSON.stringify(params.allowedValue)}` };
    case 'uniqueItems':
      return {
        param: whole,
        message: `${whole} must not contain duplicate items (items ${String(params.j)} and ${String(params.i)} are equal)`,
      };
    case 'format':
      return { param: whole, message: `${whole} must be a valid ${String(params.format)}` };
    case 'discriminator': {
      const field = join(String(params.tag));
      return params.error === 'tag'
        ? { param: field, message: `${field} is required and must be a string` }
        : { param: field, message: `${field} names no kind this field accepts: ${JSON.stringify(params.tagValue)}` };
    }
    default:
      return { param: whole, message: `${whole} ${error.message ?? 'is invalid'}` };
  }
}

export type RequestPart = 'body' | 'querystring' | 'params' | 'headers';

const isSchemaObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Keywords whose values are data, not schemas: copied as they are. */
const DATA_KEYWORDS = new Set(['default', 'const', 'enum', 'examples', 'example']);

function boundedCopy(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(boundedCopy);
  if (!isSchemaObject(node)) return node;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) copy[key] = DATA_KEYWORDS.has(key) ? value : boundedCopy(value);
  const type = copy.type;
  if (type === 'integer' || (Array.isArray(type) && type.includes('integer'))) {
    const { maximum, minimum } = copy;
    copy.maximum = typeof maximum === 'number' ? Math.min(maximum, Number.MAX_SAFE_INTEGER) : Number.MAX_SAFE_INTEGER;
    copy.minimum = typeof minimum === 'number' ? Math.max(minimum, Number.MIN_SAFE_INTEGER) : Number.MIN_SAFE_INTEGER;
  }
  return copy;
}

/**
 * A request part's schema as the API enforces and documents it (validation and the OpenAPI document both read
 * the result): every integer bounded to the safe range, and in a query, path or header part, a property with a
 * default is not required (the default fills it in). Returns a copy; route schemas are shared between routes.
 */
export function requestPartSchema(schema: unknown, part: RequestPart): unknown {
  const copy = boundedCopy(schema);
  if (part === 'body' || !isSchemaObject(copy) || !Array.isArray(copy.required)) return copy;
  const properties = isSchemaObject(copy.properties) ? copy.properties : {};
  const required = copy.required.filter((name) => {
    const property = typeof name === 'string' ? properties[name] : undefined;
    return !(isSchemaObject(property) && 'default' in property);
  });
  if (required.length > 0) copy.required = required;
  else delete copy.required;
  return copy;
}
