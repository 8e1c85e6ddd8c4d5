/** Files attached to user input (Responses, Sessions messages, …): they must be files of the org that a model can read. */
import { AppError, notFound } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import type { Attachment } from '../turns/items.ts';
import { classifyForModel } from './file-service.ts';

/** An attached file as the model will read it, with the name it had when it was attached. */
export interface ResolvedAttachment {
  kind: 'image' | 'file';
  filename: string;
}

/**
 * Checks an attachment (org's file, not deleted, readable by a model; an `image` attachment an image) and returns how
 * the file reaches the model (images as image parts, text files as text) and its filename. `param` names the field
 * in errors; an unknown, deleted or another organization's file is 404 not_found.
 */
export async function resolveAttachment(
  trx: Executor,
  orgId: string,
  attachment: Attachment,
  param: string,
): Promise<ResolvedAttachment> {
  const file = await trx
    .selectFrom('files')
    .select(['media_type', 'filename'])
    .where('org_id', '=', orgId)
    .where('id', '=', attachment.fileId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst();
  if (file === undefined) throw notFound('file', attachment.fileId);
  const use = classifyForModel(file.media_type);
  if (use === null) {
    throw new AppError(
      'validation_error',
      `${param}: files of type ${file.media_type} cannot be given to a model (images and text only)`,
      {
        param,
      },
    );
  }
  if (attachment.kind === 'image' && use !== 'image') {
    throw new AppError('validation_error', `${param}: an image part needs an image file, not ${file.media_type}`, {
      param,
    });
  }
  return { kind: use === 'image' ? 'image' : 'file', filename: file.filename };
}

/** Returns how the file reaches the model: images as image parts, text files as text. */
export async function checkAttachment(
  trx: Executor,
  orgId: string,
  attachment: Attachment,
  param: string,
): Promise<'image' | 'file'> {
  return (await resolveAttachment(trx, orgId, attachment, param)).kind;
}
