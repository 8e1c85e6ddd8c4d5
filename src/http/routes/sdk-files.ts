/**
 * Files of the older API (`/api/sdk/files`; spec 4.7 and 2; docs/legacy.md): the same storage and rows as v1
 * Files (a file uploaded here is a v1 file too, usable by Tasks, Responses and tool runs), with the older
 * record fields {uuid, name, mimeType, size, projectId, createdAt}.
 */
import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import type { FileObject } from '../../domain/files/file-service.ts';
import { AppError } from '../../errors/app-error.ts';
import { iso } from '../../lib/clock.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, Uuid } from '../schemas/common.ts';
import { SdkFileRecord } from '../schemas/sdk.ts';
import type { App } from '../types.ts';
import { contentDisposition, discardRest, uploadParts } from './files.ts';

const tags = ['Older API'];
const DISCARD_AT_LEAST = 8 * 1024 * 1024;
/** Enough for any organization's older-API file list in one answer (the older route has no paging). */
const LIST_LIMIT = 100;

const FileParams = Type.Object({ fileId: Uuid });

function record(file: FileObject, projectId: number) {
  return {
    uuid: file.id,
    name: file.filename,
    mimeType: file.media_type,
    size: file.bytes,
    projectId,
    createdAt: iso(file.created_at * 1000),
  };
}

export function sdkFileRoutes(app: App, deps: Deps): void {
  const files = deps.files;
  const maxUploadBytes = deps.config.maxUploadBytes;
  const projectOf = async (orgId: string) => (await deps.orgs.list()).find((org) => org.id === orgId)?.projectId ?? 0;

  void app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    scope.removeAllContentTypeParsers();
    await scope.register(multipart, {
      throwFileSizeLimit: false,
      limits: { fileSize: maxUploadBytes + 1, fieldSize: 1024, fields: 16, files: 4, parts: 32 },
    });
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

    scope.route({
      method: 'POST',
      url: '/api/sdk/files',
      config: { scopes: ['files:write'] },
      schema: {
        summary: 'Upload a file (older API)',
        description:
          'multipart/form-data with one file part named file (1 byte to AGENTRY_MAX_UPLOAD_BYTES). Stored like POST /v1/files.',
        tags,
        consumes: ['multipart/form-data'],
        body: Type.Object(
          { file: Type.String({ format: 'binary', minLength: 1, maxLength: maxUploadBytes }) },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object(
            { message: Type.String(), fileId: Uuid, path: Type.String() },
            { additionalProperties: false },
          ),
          ...errorResponses(400, 401, 403, 413),
        },
      },
      validatorCompiler: () => () => true,
      handler: async (request, reply) => {
        const orgId = orgOf(request);
        try {
          if (!request.isMultipart()) {
            throw new AppError(
              'unsupported_content_type',
              'Content-Type must be multipart/form-data with a file part named file',
              { param: 'Content-Type' },
            );
          }
          const file = await files.upload(orgId, uploadParts(request));
          return { message: 'upload file success', fileId: file.id, path: `files/${file.id}/${file.filename}` };
        } catch (error) {
          discardRest(request, reply, Math.max(maxUploadBytes, DISCARD_AT_LEAST));
          throw error;
        }
      },
    });

    scope.route({
      method: 'GET',
      url: '/api/sdk/files',
      config: { scopes: ['files:read'] },
      schema: {
        summary: 'List files (older API)',
        description: `Newest first, at most ${LIST_LIMIT}.`,
        tags,
        response: { 200: Type.Object({ files: Type.Array(SdkFileRecord) }), ...errorResponses(401, 403) },
      },
      handler: async (request) => {
        const orgId = orgOf(request);
        const [page, projectId] = await Promise.all([files.list(orgId, { limit: LIST_LIMIT }), projectOf(orgId)]);
        return { files: page.data.map((file) => record(file, projectId)) };
      },
    });

    scope.route({
      method: 'GET',
      url: '/api/sdk/files/:fileId',
      config: { scopes: ['files:read'] },
      schema: {
        summary: 'Get a file record (older API)',
        tags,
        params: FileParams,
        response: { 200: Type.Object({ file: SdkFileRecord }), ...errorResponses(400, 401, 403, 404) },
      },
      handler: async (request) => {
        const orgId = orgOf(request);
        return { file: record(await files.get(orgId, request.params.fileId), await projectOf(orgId)) };
      },
    });

    scope.route({
      method: 'GET',
      url: '/api/sdk/files/:fileId/content',
      config: { scopes: ['files:read'] },
      schema: {
        summary: 'Download a file (older API)',
        tags,
        params: FileParams,
        response: {
          200: Type.Unsafe<unknown>({
            description: 'The bytes as uploaded',
            content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
          }),
          ...errorResponses(400, 401, 403, 404),
        },
      },
      handler: async (request, reply) => {
        const { file, stream, size } = await files.content(orgOf(request), request.params.fileId);
        return reply
          .header('content-type', file.media_type)
          .header('content-length', size)
          .header('content-disposition', contentDisposition(file.filename))
          .header('x-content-type-options', 'nosniff')
          .send(stream);
      },
    });

    scope.route({
      method: 'DELETE',
      url: '/api/sdk/files/:fileId',
      config: { scopes: ['files:write'] },
      schema: {
        summary: 'Delete a file (older API)',
        tags,
        params: FileParams,
        response: {
          200: Type.Object({ message: Type.String(), fileId: Uuid }, { additionalProperties: false }),
          ...errorResponses(400, 401, 403, 404),
        },
      },
      handler: async (request) => {
        const deleted = await files.delete(orgOf(request), request.params.fileId);
        return { message: 'deleted', fileId: deleted.id };
      },
    });
  });
}
