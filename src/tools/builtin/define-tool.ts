/**
 * How a built-in tool is declared: its arguments as one TypeBox schema, which is both the JSON Schema the model
 * is offered and the check its arguments pass before `run` sees them, typed. Arguments that do not match are a
 * tool error the model can read and correct ("path: must be string"), never an exception of ours.
 */
import { createRequire } from 'node:module';
import type { Static, TSchema } from 'typebox';
import type { Value as ValueModule } from 'typebox/value';
import { builtinOrigin } from '../registry.ts';
import type { McpServer } from '../tool-config.ts';
import type { ResolvedTool, ToolCallContext, ToolOutput } from '../types.ts';

export interface BuiltinToolSpec<S extends TSchema> {
  name: string;
  description: string;
  parameters: S;
  /** The tool's own call timeout (see ResolvedTool.timeoutMs). */
  timeoutMs?: number;
  /** The internal entry the tool belongs to (`sandbox`): see ResolvedTool.builtinEntry. */
  server: string;
  /** Whether a call can change anything (see ResolvedTool.changes); absent: it may. */
  changes?: (args: Static<S>) => boolean;
  run(args: Static<S>, context: ToolCallContext): Promise<ToolOutput>;
}

/**
 * TypeBox's value checker, loaded by the first check of a tool's arguments: it is as large as the rest of TypeBox,
 * and a process that serves no turn (or a CLI command) never needs it. Loaded synchronously, as `changes` is.
 */
let valueModule: typeof ValueModule | null = null;
function value(): typeof ValueModule {
  valueModule ??= (createRequire(import.meta.url)('typebox/value') as { Value: typeof ValueModule }).Value;
  return valueModule;
}

/** `/headers/x` → `headers.x`, the way the model wrote the argument. */
function argumentName(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'))
    .join('.');
}

/** The first useful complaint about `args` that do not match `schema`. */
export function argumentProblem(schema: TSchema, args: unknown): string {
  const errors = value().Errors(schema, args);
  // `additionalProperties: false` reports twice; the "schema is false" form says less.
  const error = errors.find((candidate) => candidate.keyword !== 'boolean') ?? errors[0];
  if (error === undefined) return 'the arguments do not match the tool schema';
  const name = argumentName(error.instancePath);
  if (error.keyword === 'required') {
    const missing = Reflect.get(error.params, 'requiredProperties');
    const names = Array.isArray(missing) ? missing.map((part) => (name === '' ? part : `${name}.${part}`)) : [];
    return `missing ${names.length > 1 ? 'arguments' : 'argument'} ${names.join(', ')}`.trim();
  }
  if (error.keyword === 'additionalProperties') {
    const extra = Reflect.get(error.params, 'additionalProperties');
    const names = Array.isArray(extra) ? extra.join(', ') : '';
    return `unknown argument${names.includes(',') ? 's' : ''} ${names}`.trim();
  }
  return name === '' ? `the arguments ${error.message}` : `${name} ${error.message}`;
}

export function builtinTool<S extends TSchema>(spec: BuiltinToolSpec<S>): ResolvedTool {
  return {
    name: spec.name,
    description: spec.description,
    // A plain JSON Schema object (TypeBox's own symbol-keyed markers stay behind).
    parameters: Object.fromEntries(Object.entries(spec.parameters)),
    strict: false,
    kind: 'server',
    origin: builtinOrigin(spec.name),
    ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs }),
    builtinEntry: spec.server,
    ...(spec.changes === undefined
      ? {}
      : {
          // Arguments that do not match are refused before running: nothing can change.
          changes: (args: unknown) => value().Check(spec.parameters, args) && (spec.changes?.(args) ?? true),
        }),
    async execute(args, context) {
      if (!value().Check(spec.parameters, args)) {
        return { output: `Error: invalid arguments: ${argumentProblem(spec.parameters, args)}`, isError: true };
      }
      return spec.run(args, context);
    },
  };
}

/** Claims the `{kind:"internal", name}` entry of that name. */
export const internalEntry =
  (name: string) =>
  (entry: McpServer): boolean =>
    !('type' in entry) && entry.kind === 'internal' && entry.name === name;

/** A tool result that is an error the model should read. */
export const toolError = (message: string): ToolOutput => ({ output: `Error: ${message}`, isError: true });
