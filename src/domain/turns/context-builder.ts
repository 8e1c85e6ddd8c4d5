/**
 * The model context of a conversation log (items.ts), built item by item so that a step adds only what is new, and
 * fitted to the model's window (models/context-fit.ts). The context cache keeps one builder per session log.
 */
import { type FitResult, fitContext, fittedContext, messageTokens, withKnownTokens } from '../../models/context-fit.ts';
import type { ContextMessage, ToolCall, ToolResult, UserPart } from '../../models/types.ts';
import type { Attachment, Item } from './items.ts';

export interface AttachedFile {
  mediaType: string;
  filename: string;
  data: Uint8Array;
}

/** User content with its attachments: images as image parts, text files as text (what models read best). */
function userContent(
  text: string,
  attachments: Attachment[] | undefined,
  files: ReadonlyMap<string, AttachedFile>,
): UserPart[] {
  const parts: UserPart[] = text === '' ? [] : [{ type: 'text', text }];
  for (const attachment of attachments ?? []) {
    const file = files.get(attachment.fileId);
    if (file === undefined) {
      parts.push({ type: 'text', text: `[file ${attachment.fileId} is no longer available]` });
    } else if (attachment.kind === 'image') {
      const { detail } = attachment;
      parts.push({
        type: 'image',
        mediaType: file.mediaType,
        data: file.data,
        ...(detail === undefined ? {} : { detail }),
      });
    } else {
      parts.push({ type: 'text', text: `--- ${file.filename} ---\n${new TextDecoder().decode(file.data)}` });
    }
  }
  return parts.length === 0 ? [{ type: 'text', text: '' }] : parts;
}

const NO_FILES: ReadonlyMap<string, AttachedFile> = new Map();

const sameStep = (a: Item, b: Item) => a.messageId === b.messageId && a.step === b.step;

/** How the model reads a compaction's summary: a user entry opening the context. */
export const SUMMARY_HEADER = '[Summary of the earlier conversation, written when it no longer fitted the context]';

export const summaryMessage = (summary: string): ContextMessage => ({
  role: 'user',
  content: [{ type: 'text', text: `${SUMMARY_HEADER}\n${summary}` }],
});

/**
 * The model context of a log, built item by item so that a session's next step only adds what is new: one user
 * entry per input, one assistant entry per step (its text and tool calls), one tool entry per step's outputs. The
 * entries of the last step stay open (a later item of the same step joins them) until an item of another step
 * arrives. User entries with attachments are rendered again by each `build`, with the files of that moment.
 */
export class ContextBuilder {
  #count = 0;
  #closed: ContextMessage[] = [];
  /** The id of the first item of each entry of `#closed`. */
  #closedIds: string[] = [];
  /** The estimated tokens of `#closed` (models/context-fit.ts), kept as it grows so a fit need not sum them. */
  #closedTokens = 0;
  #assistant: { item: Item; text: string; toolCalls: ToolCall[] } | null = null;
  #results: { item: Item; results: ToolResult[] } | null = null;
  #attachments = new Set<string>();
  /** Entries of `#closed` that show files: rendered by `build`. */
  #withFiles: { index: number; text: string; attachments: Attachment[] }[] = [];

  /** Items appended so far. */
  get count(): number {
    return this.#count;
  }

  append(item: Item): void {
    this.#count += 1;
    const content = item.content;
    if (
      content.type === 'tool_list' ||
      content.type === 'approval_decision' ||
      content.type === 'item_removed' ||
      content.type === 'elicitation' ||
      content.type === 'elicitation_response'
    )
      return;
    if (content.type === 'compaction') {
      this.#compact(item.id, content.summary, content.keptFrom);
      return;
    }
    if (content.type === 'user_message') {
      this.#close();
      const attachments = content.attachments ?? [];
      if (attachments.length > 0) {
        for (const attachment of attachments) this.#attachments.add(attachment.fileId);
        this.#withFiles.push({ index: this.#closed.length, text: content.text, attachments });
      }
      this.#push({ role: 'user', content: userContent(content.text, undefined, NO_FILES) }, item.id);
      return;
    }
    if (content.type === 'function_call_output') {
      let results = this.#results;
      if (results === null || !sameStep(results.item, item)) {
        if (results !== null || (this.#assistant !== null && !sameStep(this.#assistant.item, item))) this.#close();
        results = { item, results: [] };
        this.#results = results;
      }
      results.results.push({
        callId: item.callId ?? '',
        name: content.name,
        output: content.output,
        isError: content.isError,
      });
      return;
    }
    if (this.#assistant === null || !sameStep(this.#assistant.item, item) || this.#results !== null) {
      this.#close();
      this.#assistant = { item, text: '', toolCalls: [] };
    }
    const assistant = this.#assistant;
    if (content.type === 'assistant_message') assistant.text += content.text;
    else assistant.toolCalls.push({ callId: item.callId ?? '', name: content.name, arguments: content.arguments });
  }

  /**
   * A compaction: the entries before the one that starts with the item `keptFrom` (all of them when null or gone)
   * give way to the summary.
   */
  #compact(itemId: string, summary: string, keptFrom: string | null): void {
    this.#close();
    const found = keptFrom === null ? -1 : this.#closedIds.indexOf(keptFrom);
    const from = found === -1 ? this.#closed.length : found;
    this.#closed = [summaryMessage(summary), ...this.#closed.slice(from)];
    this.#closedIds = [itemId, ...this.#closedIds.slice(from)];
    this.#closedTokens = this.#closed.reduce((sum, message) => sum + messageTokens(message), 0);
    this.#withFiles = this.#withFiles
      .filter((entry) => entry.index >= from)
      .map((entry) => ({ ...entry, index: entry.index - from + 1 }));
    this.#attachments = new Set(this.#withFiles.flatMap((entry) => entry.attachments.map((file) => file.fileId)));
  }

  /** The id of the first item of each entry `build` returns (a summary's: its compaction item). */
  entryItemIds(): string[] {
    const ids = this.#closedIds.slice();
    if (this.#assistant !== null) ids.push(this.#assistant.item.id);
    if (this.#results !== null) ids.push(this.#results.item.id);
    return ids;
  }

  /** File ids attached to user input in the items appended. */
  attachmentIds(): string[] {
    return [...this.#attachments];
  }

  /** The context of the items appended so far; later appends do not change it. */
  build(files: ReadonlyMap<string, AttachedFile> = NO_FILES): ContextMessage[] {
    const context = this.#closed.slice();
    for (const entry of this.#withFiles)
      context[entry.index] = { role: 'user', content: userContent(entry.text, entry.attachments, files) };
    const tokens = this.#appendOpen(context);
    // Inputs shown with their files weigh what the files do: those contexts are summed when fitted.
    return this.#withFiles.length === 0 ? withKnownTokens(context, tokens) : context;
  }

  /**
   * The context of the items appended so far fitted to `room` estimated tokens (models/context-fit.ts; all of it when
   * `room` is null). Where the fit keeps only the newest part, the log's older messages are not copied: what a
   * truncated turn costs follows what it sends, not the session's length.
   */
  fit(room: number | null, files: ReadonlyMap<string, AttachedFile> = NO_FILES): FitResult {
    if (room === null || this.#withFiles.length > 0) return fittedContext(this.build(files), room);
    const closed = this.#closed;
    const before = closed.length;
    try {
      const fitted = fitContext(withKnownTokens(closed, this.#appendOpen(closed)), room);
      // All of it fits: the context sent is a copy, which later appends leave as it is.
      return fitted.context === closed ? { ...fitted, context: closed.slice() } : fitted;
    } finally {
      closed.length = before;
    }
  }

  /** Appends the step still open (its text and calls, its outputs) to `context`; the estimated tokens of the whole. */
  #appendOpen(context: ContextMessage[]): number {
    let tokens = this.#closedTokens;
    const open: ContextMessage[] = [];
    if (this.#assistant !== null) {
      const { text, toolCalls } = this.#assistant;
      open.push({ role: 'assistant', text, toolCalls: toolCalls.slice() });
    }
    if (this.#results !== null) open.push({ role: 'tool', results: this.#results.results.slice() });
    for (const message of open) {
      context.push(message);
      tokens += messageTokens(message);
    }
    return tokens;
  }

  #push(message: ContextMessage, itemId: string): void {
    this.#closed.push(message);
    this.#closedIds.push(itemId);
    this.#closedTokens += messageTokens(message);
  }

  #close(): void {
    if (this.#assistant !== null) {
      const { item, text, toolCalls } = this.#assistant;
      this.#push({ role: 'assistant', text, toolCalls }, item.id);
    }
    if (this.#results !== null) this.#push({ role: 'tool', results: this.#results.results }, this.#results.item.id);
    this.#assistant = null;
    this.#results = null;
  }
}
