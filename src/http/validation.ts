/**
 * Request validation. Bodies are validated strictly (no type coercion, unknown properties rejected); path,
 * query and header values are coerced from their string form. Errors name the field the way a user writes it:
 * `clientTools[0].name`, `limit`, `Idempotency-Key`.
 */
import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

type AddFormats = (ajv: Ajv) => Ajv;
// ajv-formats is CommonJS; under Node's ESM loader the callable sits on `default`.
const addFormats: AddFormats =
  typeof addFormatsModule === 'function' ? addFormatsModule : Reflect.get(addFormatsModule, 'default');

const common: Options = { allErrors: false, strict: false, useDefaults: true, removeAdditional: false, messages: true };

function createAjv(options: Options): Ajv {
  const ajv = new Ajv({ ...common, ...options });
  addFormats(ajv);
  return ajv;
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strictAjv = createAjv({ coerceTypes: false });
  const coercingAjv = createAjv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strictAjv : coercingAjv;
    return ajv.compile(schema as object);
  };
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
    case 'minLength':
      return {
        param: whole,
        message: `${whole} ${error.message?.replace('NOT have', 'have') ?? 'has an invalid length'}`,
      };
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
    default:
      return { param: whole, message: `${whole} ${error.message ?? 'is invalid'}` };
  }
}
