/** Files attached to Responses input: they must be files of the org that a model can read. */
import { AppError, notFound } from '../../errors/app-error.ts';
import type { Executor } from '../../storage/db.ts';
import type { Attachment } from '../turns/items.ts';
import { classifyForModel } from './file-service.ts';

/** Returns how the file reaches the model: images as image parts, text files as text. */
export async function checkAttachment(
  trx: Executor,
  orgId: string,
  attachment: Attachment,
  param: string,
): Promise<'image' | 'file'> {
  const file = await trx
    .selectFrom('files')
    .select(['media_type'])
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
    throw new AppError('validation_error', `${param}: input_image needs an image file, not ${file.media_type}`, {
      param,
    });
  }
  return use === 'image' ? 'image' : 'file';
}
