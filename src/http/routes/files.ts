import multipart, { type Multipart } from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../../deps.ts';
import { DEFAULT_PURPOSE, PURPOSE_PATTERN, type UploadPart } from '../../domain/files/file-service.ts';
import { AppError, validationError } from '../../errors/app-error.ts';
import { orgOf } from '../auth.ts';
import { errorResponses, IdParams, Uuid } from '../schemas/common.ts';
import type { App } from '../types.ts';

const tags = ['Files'];
/** How much of a rejected upload is still read (and dropped) before the connection is closed instead. */
const DISCARD_AT_LEAST = 8 * 1024 * 1024;

const FileObject = Type.Object(
  {
    id: Uuid,
    object: Type.Literal('file'),
    filename: Type.String({ description: 'The filename of the uploaded part, without any directory' }),
    bytes: Type.Integer({ minimum: 1, description: 'Size of the content in bytes' }),
    media_type: Type.String({
      description: "The part's Content-Type, else one guessed from the filename extension (type/subtype)",
    }),
    purpose: Type.String({ description: `Free-form label given at upload; default ${DEFAULT_PURPOSE}` }),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'Hex SHA-256 of the content' }),
    created_at: Type.Integer({ description: 'Unix time in seconds' }),
  },
  { additionalProperties: false, description: 'An uploaded file' },
);

const FileList = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(FileObject),
    first_id: Type.Union([Uuid, Type.Null()]),
    last_id: Type.Union([Uuid, Type.Null()], { description: 'Pass as after to get the next page' }),
    has_more: Type.Boolean(),
  },
  { additionalProperties: false, description: 'A page of files, newest first' },
);

const FileListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    after: Type.Optional(Type.String({ format: 'uuid', description: 'The last_id of the previous page' })),
  },
  { additionalProperties: false },
);

const FileDeleted = Type.Object(
  { id: Uuid, object: Type.Literal('file'), deleted: Type.Literal(true) },
  { additionalProperties: false, description: 'The file was deleted' },
);

/** Documents the multipart body; the handler reads and checks it while streaming (see upload below). */
const uploadBody = (maxUploadBytes: number) =>
  Type.Object(
    {
      file: Type.String({
        format: 'binary',
        minLength: 1,
        maxLength: maxUploadBytes,
        description:
          "The content (1 byte to AGENTRY_MAX_UPLOAD_BYTES). The part's filename becomes the file's filename; its Content-Type (or the filename extension) the media_type.",
      }),
      purpose: Type.Optional(
        Type.String({
          minLength: 1,
          maxLength: 64,
          pattern: PURPOSE_PATTERN,
          default: DEFAULT_PURPOSE,
          description: 'A label for the file',
        }),
      ),
    },
    {
      additionalProperties: false,
      description:
        'multipart/form-data with one file part named file and an optional purpose field; no other fields. The size limit is AGENTRY_MAX_UPLOAD_BYTES (default 50 MiB); the JSON body limit does not apply.',
    },
  );

const FileBytes = Type.Unsafe<unknown>({
  description: 'The stored bytes, with the stored media type as Content-Type',
  content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
});

/** `attachment` with the RFC 5987 UTF-8 filename, and a plain ASCII fallback for old clients. */
export function contentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

/** The multipart parts of the request as the service's UploadParts; parser failures become 400/413. */
export async function* uploadParts(request: FastifyRequest): AsyncGenerator<UploadPart> {
  const iterator = request.parts()[Symbol.asyncIterator]();
  while (true) {
    let next: IteratorResult<Multipart>;
    try {
      next = await iterator.next();
    } catch (error) {
      throw multipartProblem(error);
    }
    if (next.done === true) return;
    const part = next.value;
    if (part.type === 'file') {
      yield {
        kind: 'file',
        field: part.fieldname,
        filename: part.filename,
        mediaType: part.mimetype,
        stream: part.file,
      };
    } else {
      const value = typeof part.value === 'string' ? part.value : JSON.stringify(part.value);
      yield { kind: 'field', field: part.fieldname, value, truncated: part.valueTruncated };
    }
  }
}

function multipartProblem(error: unknown): AppError {
  if (error instanceof AppError) return error;
  const status = error instanceof Error && 'statusCode' in error ? error.statusCode : undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (status === 413) return new AppError('payload_too_large', `multipart body: ${message}`, { param: 'body' });
  return validationError('body', `malformed multipart/form-data body: ${message}`);
}

/**
 * After a failed upload, reads and drops what the client still sends, so that it receives the error instead of
 * a reset connection; beyond `limit` more bytes the connection is closed instead.
 */
export function discardRest(request: FastifyRequest, reply: FastifyReply, limit: number): void {
  const raw = request.raw;
  if (raw.readableEnded || raw.destroyed) return;
  raw.unpipe();
  let dropped = 0;
  raw.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > limit) raw.destroy();
  });
  raw.resume();
  reply.header('connection', 'close');
}

export function fileRoutes(app: App, deps: Deps): void {
  const files = deps.files;
  const maxUploadBytes = deps.config.maxUploadBytes;

  // Uploads are parsed only in this scope: other routes keep answering multipart with unsupported_content_type.
  void app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    scope.removeAllContentTypeParsers();
    await scope.register(multipart, {
      // The service counts the bytes (and answers 413); busboy's own limit, one byte higher, never cuts first.
      throwFileSizeLimit: false,
      limits: { fileSize: maxUploadBytes + 1, fieldSize: 1024, fields: 16, files: 4, parts: 32 },
    });
    // Any other body reaches the handler unread, which answers unsupported_content_type.
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

    scope.route({
      method: 'POST',
      url: '/v1/files',
      config: { scopes: ['files:write'] },
      schema: {
        summary: 'Upload a file',
        description:
          'Uploads one file as multipart/form-data (field file, optional purpose). The content is streamed to storage; it must not be empty and may be at most AGENTRY_MAX_UPLOAD_BYTES (413 payload_too_large). Files can be referenced by Responses input_file / input_image parts.',
        tags,
        consumes: ['multipart/form-data'],
        body: uploadBody(maxUploadBytes),
        response: { 201: FileObject, ...errorResponses(400, 401, 403, 413) },
      },
      // The body is a stream that the handler checks part by part; there is nothing to validate up front.
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
          return reply.code(201).send(file);
        } catch (error) {
          discardRest(request, reply, Math.max(maxUploadBytes, DISCARD_AT_LEAST));
          throw error;
        }
      },
    });

    scope.route({
      method: 'GET',
      url: '/v1/files',
      config: { scopes: ['files:read'] },
      schema: {
        summary: 'List files',
        description: 'Files of the organization, newest first. Pass last_id as after while has_more is true.',
        tags,
        querystring: FileListQuery,
        response: { 200: FileList, ...errorResponses(400, 401, 403) },
      },
      handler: async (request) => {
        const { limit, after } = request.query;
        return files.list(orgOf(request), after === undefined ? { limit } : { limit, after });
      },
    });

    scope.route({
      method: 'GET',
      url: '/v1/files/:id',
      config: { scopes: ['files:read'] },
      schema: {
        summary: 'Get a file',
        tags,
        params: IdParams,
        response: { 200: FileObject, ...errorResponses(400, 401, 403, 404) },
      },
      handler: async (request) => files.get(orgOf(request), request.params.id),
    });

    scope.route({
      method: 'GET',
      url: '/v1/files/:id/content',
      config: { scopes: ['files:read'] },
      schema: {
        summary: 'Download the content of a file',
        description: 'The bytes exactly as uploaded, with the stored media type, as an attachment.',
        tags,
        params: IdParams,
        response: { 200: FileBytes, ...errorResponses(400, 401, 403, 404) },
      },
      handler: async (request, reply) => {
        const { file, stream, size } = await files.content(orgOf(request), request.params.id);
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
      url: '/v1/files/:id',
      config: { scopes: ['files:write'] },
      schema: {
        summary: 'Delete a file',
        description: 'Removes the content from storage; the file is 404 afterwards.',
        tags,
        params: IdParams,
        response: { 200: FileDeleted, ...errorResponses(400, 401, 403, 404) },
      },
      handler: async (request) => files.delete(orgOf(request), request.params.id),
    });
  });
}
