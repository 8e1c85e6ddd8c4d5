/**
 * A server's resources and prompts as Agentry reads them: the SDK's shapes mapped to ours (`client.ts`), and what
 * the model reads back from the resource tools. Nothing a server sends is shown whole: a page of the resource list
 * is cut to MAX_LISTING_CHARS, a resource's text to MAX_RESOURCE_CHARS per read (the model asks for the rest with
 * `offset`), and binary contents are summarised (type and size), never pasted as base64. The transport already
 * bounds each message (bounded-response.ts), so these steps are linear passes over at most that much.
 */
import type { McpPage, McpPromptInfo, McpResourceContent, McpResourceInfo } from './client.ts';
import { base64Bytes } from './content.ts';

/** Characters of one resource's text a read returns. */
export const MAX_RESOURCE_CHARS = 50_000;
/** Characters of a page of the resource list a call returns. */
export const MAX_LISTING_CHARS = 20_000;

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

export function promptInfo(prompt: {
  name: string;
  title?: string | undefined;
  description?: string | undefined;
  arguments?: { name: string; description?: string | undefined; required?: boolean | undefined }[] | undefined;
}): McpPromptInfo {
  const info: McpPromptInfo = {
    name: prompt.name,
    arguments: (prompt.arguments ?? []).map((argument) => ({
      name: argument.name,
      ...(argument.description === undefined ? {} : { description: argument.description }),
      required: argument.required === true,
    })),
  };
  if (prompt.title !== undefined) info.title = prompt.title;
  if (prompt.description !== undefined) info.description = prompt.description;
  return info;
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
