/**
 * Validates the body of POST /v1/responses with the schema of the request's mode (schemas/responses.ts), and words
 * the first failure the way this route always has: the field as `param`, and for a strict-mode refusal of something
 * compatibility mode accepts, the header that would have it accepted.
 */
import type { FastifySchemaCompiler } from 'fastify';
import { AGENTS_LISTED, quoted } from '../domain/responses/response-request.ts';
import { validationError } from '../errors/app-error.ts';
import type { CompatMode } from './client-mode.ts';
import {
  ResponseCompactCompat,
  ResponseCompactStrict,
  ResponseCreateCompat,
  ResponseCreateStrict,
} from './schemas/responses.ts';
import {
  createValidatorCompiler,
  describeValidationError,
  isUnknownTopLevelField,
  requestPartSchema,
  unknownParameter,
} from './validation.ts';

const COMPAT_HINT = 'send the header `Agentry-Compat: openai` (OpenAI compatibility mode) to have it accepted';

const compiler = createValidatorCompiler();

/** What a refused value or field is, where its name alone does not say it (or where else it can be done). */
const REPLAYED = 'replayed history';
const NOTES: Record<string, string> = {
  '"mcp_approval_response"': 'or decide on POST /v1/sessions/{id}/messages/{messageId}/answer',
  '"output_text"': 'assistant history',
  '"function_call"': REPLAYED,
  '"mcp_call"': REPLAYED,
  '"mcp_list_tools"': REPLAYED,
  '"mcp_approval_request"': REPLAYED,
  '"mcp_elicitation_request"': REPLAYED,
  '"reasoning"': REPLAYED,
  '"item_reference"': REPLAYED,
  image_url: 'an image by URL',
};

/**
 * The route's validator compiler: the other request parts as every route has them; the body is left to
 * validateResponseBody, which needs the request's mode to pick its schema.
 */
export const responsesValidatorCompiler: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body' ? () => true : compiler(route);

/** The two bodies: POST /v1/responses, and POST /v1/responses/compact (the same with `input` optional). */
export type ResponseBodyKind = 'create' | 'compact';

/** The schema each mode validates with: the branches of the body the route declares (and the OpenAPI document shows). */
export const responseBodySchemas: Record<CompatMode, unknown> = {
  strict: requestPartSchema(ResponseCreateStrict, 'body'),
  openai: requestPartSchema(ResponseCreateCompat, 'body'),
};
const compactBodySchemas: Record<CompatMode, unknown> = {
  strict: requestPartSchema(ResponseCompactStrict, 'body'),
  openai: requestPartSchema(ResponseCompactCompat, 'body'),
};
const compile = (schema: unknown) => compiler({ schema, httpPart: 'body', method: 'POST', url: '/v1/responses' });
type Validator = ReturnType<typeof compile>;
/** Compiled on first use, so a server starts without paying for them. */
const compiled: Partial<Record<`${ResponseBodyKind}:${CompatMode}`, Validator>> = {};
const validator = (mode: CompatMode, kind: ResponseBodyKind = 'create'): Validator => {
  compiled[`${kind}:${mode}`] ??= compile((kind === 'create' ? responseBodySchemas : compactBodySchemas)[mode]);
  return compiled[`${kind}:${mode}`] as Validator;
};

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The value at a JSON Pointer of the body. */
function at(body: unknown, pointer: string): unknown {
  let value = body;
  for (const segment of pointer.split('/').slice(1)) {
    const key = segment.replaceAll('~1', '/').replaceAll('~0', '~');
    value = isRecord(value) || Array.isArray(value) ? Reflect.get(value, key) : undefined;
  }
  return value;
}

/** `model` names an agent: a failure says what it means here. */
function modelProblem(model: unknown): string {
  const what = `the id or the name of one of your agents, or agent:<name> (${AGENTS_LISTED})`;
  if (typeof model !== 'string') return `model is required: ${what}`;
  return `model must be ${what}; ${quoted(model)} is not`;
}

/** Throws a 400 naming the first field of `body` that the mode's schema refuses. */
export function validateResponseBody(body: unknown, mode: CompatMode, kind: ResponseBodyKind = 'create'): void {
  const validate = validator(mode, kind);
  if (validate(body) !== false) return;
  const [error] = validate.errors ?? [];
  if (error === undefined) throw validationError('body', 'body is invalid');
  const problem = describeValidationError(
    { ...error, params: error.params ?? {}, message: error.message ?? 'is invalid' },
    'body',
  );
  const { param } = problem;
  if (param === 'model' && error.keyword !== 'unicode')
    throw validationError('model', modelProblem(at(body, '/model')));
  const value =
    error.keyword === 'enum' || error.keyword === 'const' ? JSON.stringify(at(body, error.instancePath)) : null;
  const refused = error.keyword === 'additionalProperties' || error.keyword === 'false schema' || value !== null;
  if (mode === 'strict' && refused && acceptedInCompatMode(body, error.instancePath, param, kind)) {
    const note = NOTES[value ?? param.split('.').at(-1) ?? ''];
    const what = `${param}${value === null ? '' : ` ${value}`}${note === undefined ? '' : ` (${note})`}`;
    throw validationError(param, `${what} is not part of the strict Responses body; ${COMPAT_HINT}`);
  }
  if (mode === 'openai' && isUnknownTopLevelField(error)) throw validationError(param, unknownParameter(param));
  if (error.keyword === 'false schema') throw validationError(param, `${param} is not a recognised field`);
  throw validationError(param, problem.message);
}

/**
 * Whether compatibility mode takes what strict mode refused: a top-level field it declares, or anything else in a
 * body it accepts as a whole.
 */
function acceptedInCompatMode(body: unknown, pointer: string, param: string, kind: ResponseBodyKind): boolean {
  if (pointer === '' && !param.includes('.') && !param.includes('[')) {
    return Object.hasOwn(ResponseCreateCompat.properties, param);
  }
  return validator('openai', kind)(body) !== false;
}
