/**
 * Turns an MCP tool result's content parts into the one text a model reads: text parts as they are, embedded
 * text resources with a header line and their text, and binary parts (images, audio, blobs) and resource links
 * as one-line summaries, since their bytes mean nothing to a text model. When a tool returned only structured
 * content, its JSON is the text. Parts are read defensively: servers send shapes newer than the SDK knows.
 * It runs on the event loop on purpose: every step here is one linear pass over what the SDK already parsed;
 * nothing recurses over the result's shape except JSON.stringify of `structuredContent`, which throws a RangeError
 * (a tool error) at absurd depth instead of running long. (The SDK's own JSON.parse of each message is linear too;
 * the transport reads a message only up to a size and a nesting depth: bounded-response.ts.)
 */

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringField(value: Record<string, unknown>, name: string): string | undefined {
  const field = value[name];
  return typeof field === 'string' ? field : undefined;
}

/** Decoded size of a base64 payload, without decoding it. */
export function base64Bytes(data: string): number {
  const clean = data.replace(/\s/g, '');
  const padding = clean.endsWith('==') ? 2 : clean.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - padding);
}

function resourceLabel(uri: string, mimeType: string | undefined): string {
  return mimeType === undefined ? uri : `${uri} (${mimeType})`;
}

function summarizePart(part: unknown): string {
  if (!isRecord(part)) return '';
  const value = part;
  const type = stringField(value, 'type') ?? 'unknown';
  switch (type) {
    case 'text':
      return stringField(value, 'text') ?? '';
    case 'image':
    case 'audio': {
      const data = stringField(value, 'data') ?? '';
      return `[${type}: ${stringField(value, 'mimeType') ?? 'unknown type'}, ${base64Bytes(data)} bytes]`;
    }
    case 'resource_link': {
      const uri = stringField(value, 'uri') ?? '';
      return `[resource: ${resourceLabel(uri, stringField(value, 'mimeType'))}]`;
    }
    case 'resource': {
      const resource = isRecord(value.resource) ? value.resource : {};
      const label = resourceLabel(stringField(resource, 'uri') ?? '', stringField(resource, 'mimeType'));
      const text = stringField(resource, 'text');
      if (text !== undefined) return `[resource: ${label}]\n${text}`;
      return `[resource: ${label}, ${base64Bytes(stringField(resource, 'blob') ?? '')} bytes]`;
    }
    default:
      return `[${type} content]`;
  }
}

/** The model-facing text of a tool result; see the file header. */
export function resultText(content: readonly unknown[], structuredContent: unknown): string {
  const text = content
    .map(summarizePart)
    .filter((part) => part !== '')
    .join('\n');
  if (text !== '' || structuredContent === undefined) return text;
  return JSON.stringify(structuredContent);
}
