/**
 * The built-in `scripted` model (DESIGN section 9): deterministic, free, for demos and tests. The newest user
 * message is a script; its sections (separated by lines that are exactly `---`) are played one per model step,
 * the step number being the count of assistant entries after that user message, so a turn resumed by a client
 * tool's output plays the next section. A request for structured output is answered with the smallest valid
 * instance of its schema unless the script has directives (structuredPlan). See docs/models.md for the
 * user-facing reference.
 */
import { randomBytes } from 'node:crypto';
import { ASK_USER_QUESTION } from '../events/session-values.ts';
import { abortableSleep } from '../lib/retry.ts';
import { schemaInstance } from './schema-instance.ts';
import {
  type ContextMessage,
  type ModelAdapter,
  ModelError,
  type ModelEvent,
  type ModelRequest,
  type ResponseFormat,
  type ToolCall,
} from './types.ts';

type Op =
  | { kind: 'text'; text: string }
  | { kind: 'call'; name: string; arguments: string }
  | { kind: 'sleep'; ms: number }
  | { kind: 'fail'; message: string };

type Section = Op[];

const SECTION_SEPARATOR = '---';
/** Upper bound on deltas per reply: enough to look streamed, few enough to keep long echoes cheap. */
const MAX_DELTAS = 16;

/** Splits the script into sections of directives; a script without any directive is one verbatim reply. */
export function parseScript(text: string): Section[] {
  const lines = text.split(/\r?\n/);
  const sections: Section[] = [[]];
  let sawDirective = false;
  for (const [index, line] of lines.entries()) {
    if (line === SECTION_SEPARATOR) {
      sections.push([]);
      continue;
    }
    const op = parseLine(line, index + 1);
    if (op === null) continue;
    if (op.kind !== 'text') sawDirective = true;
    sections[sections.length - 1]?.push(op);
  }
  if (!sawDirective) return [[{ kind: 'text', text }]];
  return sections;
}

function parseLine(line: string, lineNumber: number): Op | null {
  const trimmed = line.trim();
  if (trimmed === '') return null;
  const call = /^call\s+(\S+)(?:\s+(.*))?$/.exec(trimmed);
  if (call) {
    const name = call[1] ?? '';
    const json = call[2]?.trim() ?? '{}';
    try {
      JSON.parse(json);
    } catch {
      throw new ModelError(
        'model_bad_request',
        `scripted model: line ${lineNumber} ("${trimmed}") has arguments that are not valid JSON`,
      );
    }
    return { kind: 'call', name, arguments: json };
  }
  const ask = /^ask\s+(.+)$/.exec(trimmed);
  if (ask) return { kind: 'call', name: ASK_USER_QUESTION, arguments: JSON.stringify({ question: ask[1] }) };
  const sleep = /^sleep\s+(\d+)$/.exec(trimmed);
  if (sleep) return { kind: 'sleep', ms: Number(sleep[1]) };
  const fail = /^fail(?:\s+(.*))?$/.exec(trimmed);
  if (fail) return { kind: 'fail', message: fail[1] ?? 'scripted failure' };
  return { kind: 'text', text: line };
}

function userText(message: Extract<ContextMessage, { role: 'user' }>): string {
  return message.content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n');
}

/** Characters of a user message's text parts joined by newlines (as userText), without building the text. */
function userTextLength(message: Extract<ContextMessage, { role: 'user' }>): number {
  let chars = 0;
  let parts = 0;
  for (const part of message.content) {
    if (part.type !== 'text') continue;
    chars += part.text.length;
    parts += 1;
  }
  return parts === 0 ? 0 : chars + parts - 1;
}

/** Characters the model "reads": instructions plus every text, tool argument and tool output in the context. */
function contextChars(request: ModelRequest): number {
  let chars = request.instructions.length;
  for (const message of request.context) {
    if (message.role === 'user') chars += userTextLength(message);
    else if (message.role === 'assistant') {
      chars += message.text.length;
      for (const call of message.toolCalls) chars += call.arguments.length;
    } else for (const result of message.results) chars += result.output.length;
  }
  return chars;
}

/** Word-aligned chunks whose concatenation is exactly `text`; ≥2 for multi-word text. */
export function chunkText(text: string): string[] {
  const words = text.split(/(?<=\s)(?=\S)/);
  const size = Math.ceil(words.length / MAX_DELTAS);
  const chunks: string[] = [];
  for (let i = 0; i < words.length; i += size) chunks.push(words.slice(i, i + size).join(''));
  return chunks.filter((chunk) => chunk !== '');
}

function newCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

interface Plan {
  section: Section;
  /** Reply with `<tool>: <output>` lines when the section yields neither text nor calls. */
  fallback: string | null;
  /** The script has no directives: its one section is the whole text. */
  verbatim: boolean;
}

/** The smallest reply of the requested structure: `{}` for any JSON object, else the schema's smallest instance. */
function structuredReply(format: ResponseFormat): string {
  return JSON.stringify(format.type === 'json_object' ? {} : schemaInstance(format.schema));
}

/**
 * The step's plan when the request asks for structured output: a script without directives (a plain question) is
 * not echoed, and a step that would end with neither text nor calls answers the smallest valid reply instead of
 * summarising tool results. A script with directives says what to answer, invalid replies included.
 */
function structuredPlan(context: ContextMessage[], format: ResponseFormat): Plan {
  const { section, verbatim } = plan(context);
  return { section: verbatim ? [] : section, fallback: structuredReply(format), verbatim };
}

/** Decides which section this step plays, per the contract in the file header. */
function plan(context: ContextMessage[]): Plan {
  let userIndex = -1;
  for (let i = context.length - 1; i >= 0; i--) {
    if (context[i]?.role === 'user') {
      userIndex = i;
      break;
    }
  }
  const user = context[userIndex];
  const script = user?.role === 'user' ? userText(user) : null;
  const sections = script === null ? [] : parseScript(script);
  const first = sections[0]?.[0];
  const verbatim = sections.length === 1 && first?.kind === 'text' && first.text === script;
  const played = context.slice(userIndex + 1).filter((message) => message.role === 'assistant').length;
  const last = context[context.length - 1];
  const fallback =
    last?.role === 'tool' ? last.results.map((result) => `${result.name}: ${result.output}`).join('\n') : null;
  return { section: sections[played] ?? [], fallback, verbatim };
}

/**
 * Creates the scripted model. `priced` only marks the `scripted/priced` variant: behaviour is identical and the
 * price comes from the pricing table.
 */
export function createScriptedModel(_options: { priced: boolean }): ModelAdapter {
  return {
    async *stream(request: ModelRequest): AsyncGenerator<ModelEvent> {
      const { signal } = request;
      signal.throwIfAborted();
      const inputTokens = Math.ceil(contextChars(request) / 4);
      const { responseFormat } = request;
      const { section, fallback } =
        responseFormat === undefined ? plan(request.context) : structuredPlan(request.context, responseFormat);
      let outputChars = 0;
      let wroteText = false;
      let madeCalls = false;
      // Four characters a token, as counted below: a reply longer than the request's output limit is cut there.
      const maxOutputTokens = request.settings?.maxOutputTokens;
      const outputLimit = maxOutputTokens === undefined ? Number.POSITIVE_INFINITY : maxOutputTokens * 4;
      let cut = false;

      async function* text(value: string): AsyncGenerator<ModelEvent> {
        let full = wroteText ? `\n${value}` : value;
        if (outputChars + full.length > outputLimit) {
          full = full.slice(0, Math.max(0, outputLimit - outputChars));
          // Never half of a surrogate pair.
          if (/[\uD800-\uDBFF]$/.test(full)) full = full.slice(0, -1);
          cut = true;
        }
        wroteText = true;
        outputChars += full.length;
        for (const chunk of chunkText(full)) {
          signal.throwIfAborted();
          yield { type: 'text-delta', text: chunk };
        }
      }

      for (const op of section) {
        if (cut) break;
        signal.throwIfAborted();
        if (op.kind === 'sleep') await abortableSleep(op.ms, signal);
        else if (op.kind === 'fail') throw new ModelError('model_error', op.message);
        else if (op.kind === 'text') yield* text(op.text);
        else {
          madeCalls = true;
          outputChars += op.arguments.length;
          const call: ToolCall = { callId: newCallId(), name: op.name, arguments: op.arguments };
          yield { type: 'tool-call', call };
        }
      }
      // After tool results, a section without calls or text (or no section at all) summarises the results.
      if (!wroteText && !madeCalls && fallback !== null && fallback !== '') yield* text(fallback);
      signal.throwIfAborted();
      const usage = { inputTokens, outputTokens: Math.ceil(outputChars / 4) };
      yield cut ? { type: 'finish', usage, incomplete: 'max_output_tokens' } : { type: 'finish', usage };
    },
  };
}
