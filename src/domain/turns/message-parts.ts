/**
 * The parts of a Sessions message as a client sends them: text, prompts (expanded before, message-service.ts), and
 * files attached by id. Attachments are checked in the accepting transaction (the org's file, readable by a model)
 * and stored with the message's parts, under the name the file had then, so the transcript shows them after the
 * file is gone.
 */

import { AppError } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import type { Attachment } from './items.ts';
import type { AttachmentPart, ExpandedPart, McpPromptPart, MessagePart, TextPart } from './message-types.ts';

/** At most this many image and file parts in one message. */
export const MAX_MESSAGE_ATTACHMENTS = 16;

/** Checks an attachment and returns how the model reads it and the file's name (domain/files/attachments.ts). */
export type ResolveAttachment = (
  trx: Executor,
  orgId: string,
  attachment: Attachment,
  param: string,
) => Promise<{ kind: 'image' | 'file'; filename: string }>;

/** What a submission becomes: the parts the Message shows, the prompt text and the attachments the model reads. */
export interface ResolvedParts {
  parts: MessagePart[];
  text: string;
  attachments: Attachment[];
}

/** Resolves the attachments of `parts` (400 on `parts[i].fileId` for a file no model can read, 404 for no file). */
export async function resolveParts(
  trx: Executor,
  orgId: string,
  parts: ExpandedPart[],
  resolve: ResolveAttachment,
): Promise<ResolvedParts> {
  if (parts.filter((part) => part.type !== 'text').length > MAX_MESSAGE_ATTACHMENTS) {
    throw new AppError(
      'validation_error',
      `parts: a message takes at most ${MAX_MESSAGE_ATTACHMENTS} image and file parts`,
      {
        param: 'parts',
      },
    );
  }
  const texts: (TextPart | McpPromptPart)[] = [];
  const attached: AttachmentPart[] = [];
  const attachments: Attachment[] = [];
  for (const [index, part] of parts.entries()) {
    if (part.type === 'text' || part.type === 'mcp_prompt') {
      texts.push(part);
      continue;
    }
    const attachment: Attachment = { kind: part.type, fileId: part.fileId.toLowerCase() };
    if (part.type === 'image' && part.detail !== undefined) attachment.detail = part.detail;
    const { kind, filename } = await resolve(trx, orgId, attachment, `parts[${index}].fileId`);
    attachment.kind = kind;
    attachments.push(attachment);
    attached.push({ type: kind, fileId: attachment.fileId, filename, ...detailOf(attachment) });
  }
  return { parts: [...texts, ...attached], text: texts.map((part) => part.text).join('\n'), attachments };
}

const detailOf = (attachment: Attachment) => (attachment.detail === undefined ? {} : { detail: attachment.detail });
