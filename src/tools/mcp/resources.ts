/**
 * A server's resources and prompts as Agentry reads them: the SDK's shapes mapped to ours (`client.ts`), and what
 * the model reads back from the resource tools. Nothing a server sends is shown whole: a page of the resource list
 * is cut to MAX_LISTING_CHARS, a resource's text to MAX_RESOURCE_CHARS per read (the model asks for the rest with
 * `offset`), binary contents are summarised (type and size), never pasted as base64, and a page of the prompt
 * list keeps at most MAX_PROMPTS_PER_PAGE prompts with bounded descriptions and arguments. The transport already
 * bounds each message (bounded-response.ts), so these steps are linear passes over at most that much.
 */
import type { McpPage, McpPromptContent, McpPromptInfo, McpResourceContent, McpResourceInfo } from './client.ts';
import { base64Bytes, isRecord } from './content.ts';

/** Characters of one resource's text a read returns. */
export const MAX_RESOURCE_CHARS = 50_000;
/** Characters of a page of the resource list a call returns. */
export const MAX_LISTING_CHARS = 20_000;
/** Prompts of one page of a server's prompt list the API shows (the rest of that page is left out). */
export const MAX_PROMPTS_PER_PAGE = 500;
/** Arguments of one prompt kept, and characters of a prompt's or argument's description. */
export const MAX_PROMPT_ARGUMENTS = 64;
export const MAX_PROMPT_DESCRIPTION_CHARS = 2_000;

interface ResourceLike {
  uri: string;
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  mimeType?: string | undefined;
  size?: number | undefined;
}

export function resourceInfo(resource: ResourceLike): McpResourceInfo {
  const info: McpResourceInfo = { uri: resource.uri, name: resource.name };
  if (resource.title !== undefined) info.title = resource.title;
  if (resource.description !== undefined) info.description = resource.description;
  if (resource.mimeType !== undefined) info.mimeType = resource.mimeType;
  if (resource.size !== undefined) info.size = resource.size;
  return info;
}

export function resourceContent(content: {
  uri: string;
  mimeType?: string | undefined;
  text?: string;
  blob?: string;
}): McpResourceContent {
  const part: McpResourceContent = { uri: content.uri };
  if (content.mimeType !== undefined) part.mimeType = content.mimeType;
  if (typeof content.text === 'string') part.text = content.text;
  if (typeof content.blob === 'string') part.blob = content.blob;
  return part;
}

const cut = (text: string) => text.slice(0, MAX_PROMPT_DESCRIPTION_CHARS);

/** A listed prompt, its descriptions and arguments bounded (a server's list is external input). */
export function promptInfo(prompt: {
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  arguments?: { name: string; description?: string | undefined; required?: boolean | undefined }[] | undefined;
}): McpPromptInfo {
  const info: McpPromptInfo = {
    name: prompt.name,
    arguments: (prompt.arguments ?? []).slice(0, MAX_PROMPT_ARGUMENTS).map((argument) => ({
      name: argument.name,
      ...(argument.description === undefined ? {} : { description: cut(argument.description) }),
      required: argument.required === true,
    })),
  };
  if (prompt.title !== undefined) info.title = cut(prompt.title);
  if (prompt.description !== undefined) info.description = cut(prompt.description);
  return info;
}

const textOf = (value: Record<string, unknown>, name: string) =>
  typeof value[name] === 'string' ? value[name] : undefined;

/**
 * One content of a `prompts/get` message as a user message can carry it: text, an image, or an embedded resource's
 * text; anything else (audio, binary resources, resource links, types newer than the SDK) is named as unusable.
 */
export function promptContent(content: unknown): McpPromptContent {
  if (!isRecord(content)) return { type: 'unusable', what: 'content that is not an object' };
  const type = textOf(content, 'type') ?? 'unknown';
  const text = textOf(content, 'text');
  if (type === 'text' && text !== undefined) return { type: 'text', text };
  const data = textOf(content, 'data');
  const mimeType = textOf(content, 'mimeType');
  if (type === 'image' && data !== undefined && mimeType !== undefined) return { type: 'image', data, mimeType };
  if (type === 'resource' && isRecord(content.resource)) {
    const embedded = textOf(content.resource, 'text');
    if (embedded !== undefined) return { type: 'text', text: embedded };
    return { type: 'unusable', what: 'a binary embedded resource' };
  }
  return { type: 'unusable', what: `${type} content` };
}

/** The model-facing text of a page of resources: one line each, then how to ask for the next page. */
export function listingText(page: McpPage<McpResourceInfo>): string {
  if (page.items.length === 0 && page.nextCursor === null) return 'The server lists no resources.';
  const lines: string[] = [];
  let chars = 0;
  let shown = 0;
  for (const resource of page.items) {
    const facts = [resource.mimeType, resource.size === undefined ? undefined : `${resource.size} bytes`]
      .filter((fact) => fact !== undefined)
      .join(', ');
    const about = resource.description ?? resource.title;
    const line = `${resource.uri} — ${resource.name}${facts === '' ? '' : ` (${facts})`}${about === undefined ? '' : `: ${about}`}`;
    if (chars + line.length > MAX_LISTING_CHARS) break;
    lines.push(line);
    chars += line.length + 1;
    shown++;
  }
  if (shown < page.items.length) lines.push(`[${page.items.length - shown} more resources of this page not shown]`);
  if (page.nextCursor !== null)
    lines.push(`[more resources: call again with cursor ${JSON.stringify(page.nextCursor)}]`);
  return lines.join('\n');
}

const label = (part: McpResourceContent) => (part.mimeType === undefined ? part.uri : `${part.uri} (${part.mimeType})`);

/**
 * The model-facing text of a read resource: each text part from `offset` up to MAX_RESOURCE_CHARS characters with a
 * line saying how to read on, each binary part as its type and size.
 */
export function contentText(contents: McpResourceContent[], offset: number): string {
  if (contents.length === 0) return 'The resource has no contents.';
  return contents
    .map((part) => {
      if (part.text === undefined) {
        return `[resource: ${label(part)}, binary, ${base64Bytes(part.blob ?? '')} bytes; not shown as text]`;
      }
      const total = part.text.length;
      const start = Math.min(offset, total);
      const end = Math.min(total, start + MAX_RESOURCE_CHARS);
      const header = `[resource: ${label(part)}, ${total} characters]`;
      const body = part.text.slice(start, end);
      const more =
        end < total ? `\n[characters ${start}-${end} of ${total} shown; call again with offset ${end} to read on]` : '';
      return `${header}\n${body}${more}`;
    })
    .join('\n');
}
