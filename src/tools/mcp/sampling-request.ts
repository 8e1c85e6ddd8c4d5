/**
 * Reads a server's `sampling/createMessage` into what the agent's model is asked (docs/mcp-auth.md "Sampling"):
 * text parts as text, images and audio as media parts (decoded bytes, for the model's own image or audio input),
 * anything else (tool use and results, shapes newer than this client) as a `[non-text content]` line. The media of
 * one request is bounded: more than `MAX_SAMPLING_MEDIA_BASE64` base64 characters in all is refused, before any of
 * it is decoded. The SDK has already parsed the request within the transport's read bound (bounded-response.ts).
 */
import type { McpSamplingPart, McpSamplingRequest } from './client.ts';
import { isRecord } from './content.ts';

/** Base64 characters of images and audio one sampling request may carry in all (about 3 MiB decoded). */
export const MAX_SAMPLING_MEDIA_BASE64 = 4 * 1024 * 1024;

/** A sampling request this client will not serve, with the reason the server is told. */
export class SamplingRequestRefused extends Error {}

interface SamplingParams {
  messages: { role: 'user' | 'assistant'; content: unknown }[];
  systemPrompt?: string | undefined;
  maxTokens: number;
}

const NON_TEXT = '[non-text content]';

const partsOf = (content: unknown): unknown[] => (Array.isArray(content) ? content : [content]);

function partOf(part: unknown): McpSamplingPart {
  if (!isRecord(part)) return { type: 'text', text: NON_TEXT };
  if (part.type === 'text' && typeof part.text === 'string') return { type: 'text', text: part.text };
  if ((part.type === 'image' || part.type === 'audio') && typeof part.data === 'string') {
    const mediaType = typeof part.mimeType === 'string' ? part.mimeType.toLowerCase() : '';
    if (!mediaType.startsWith(`${part.type}/`)) {
      throw new SamplingRequestRefused(
        `sampling refused: ${part.type} content with media type "${mediaType}" (expected ${part.type}/…)`,
      );
    }
    return { type: part.type, mediaType, data: new Uint8Array(Buffer.from(part.data, 'base64')) };
  }
  return { type: 'text', text: NON_TEXT };
}

/** The request as the model is asked it; throws SamplingRequestRefused when its media are too large. */
export function samplingOf(params: SamplingParams): McpSamplingRequest {
  // Sizes are checked before anything is decoded: a request whose media are too large decodes nothing.
  let chars = 0;
  for (const message of params.messages) {
    for (const part of partsOf(message.content)) {
      if (isRecord(part) && typeof part.data === 'string') chars += part.data.length;
    }
  }
  if (chars > MAX_SAMPLING_MEDIA_BASE64) {
    throw new SamplingRequestRefused(
      `sampling refused: the request's images and audio take ${chars} base64 characters, at most ${MAX_SAMPLING_MEDIA_BASE64}`,
    );
  }
  return {
    messages: params.messages.map((message) => ({ role: message.role, content: partsOf(message.content).map(partOf) })),
    systemPrompt: params.systemPrompt ?? null,
    maxTokens: params.maxTokens,
  };
}
