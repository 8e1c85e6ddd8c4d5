/**
 * Files: organization-scoped uploads that Responses (input_file / input_image parts) and legacy Tasks refer to
 * by id. Metadata lives in the `files` table; the bytes live on disk (file-store.ts). This module writes the table
 * (images imported by URL go through `insertFile` and `deleteVisionFiles`); only the retention sweeper's delete
 * (file-retention.ts) is elsewhere. No HTTP here: the route turns multipart parts into UploadParts.
 */
import type { Readable } from 'node:stream';
import { type AppError, notFound, validationError } from '../../errors/app-error.ts';
import { type Clock, unixSeconds } from '../../lib/clock.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import type { FileRow } from '../../storage/schema.ts';
import { type CursorPage, type CursorQuery, newestFirstPage } from '../pagination.ts';
import { createFileStore, type FileStore, type StagedUpload } from './file-store.ts';

export const DEFAULT_PURPOSE = 'user_data';
export const PURPOSE_PATTERN = '^[A-Za-z0-9_.:-]{1,64}$';
export const MAX_FILENAME_LENGTH = 255;

/** The v1 file object (OpenAI-like, snake_case, Unix seconds). */
export interface FileObject {
  id: string;
  object: 'file';
  filename: string;
  bytes: number;
  /** Lower-case `type/subtype`. */
  media_type: string;
  purpose: string;
  /** Lower-case hex SHA-256 of the content. */
  sha256: string;
  created_at: number;
}

export type FileList = CursorPage<FileObject>;

export interface FileDeleted {
  id: string;
  object: 'file';
  deleted: true;
}

export interface FileContent {
  file: FileObject;
  stream: Readable;
  size: number;
}

/** One part of an upload request, in the order the client sent them. */
export type UploadPart =
  | { kind: 'file'; field: string; filename: string; mediaType: string | undefined; stream: Readable }
  | { kind: 'field'; field: string; value: string; truncated: boolean };

export interface FileServiceDeps {
  db: Executor;
  clock: Clock;
  dataDir: string;
  maxUploadBytes: number;
}

export function fileFromRow(row: FileRow): FileObject {
  return {
    id: row.id,
    object: 'file',
    filename: row.filename,
    bytes: Number(row.bytes),
    media_type: row.media_type,
    purpose: row.purpose,
    sha256: row.sha256,
    created_at: unixSeconds(Number(row.created_at)),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Media types

const EXTENSION_TYPES: Readonly<Record<string, string>> = {
  txt: 'text/plain',
  text: 'text/plain',
  log: 'text/plain',
  md: 'text/markdown',
  markdown: 'text/markdown',
  csv: 'text/csv',
  tsv: 'text/tab-separated-values',
  html: 'text/html',
  htm: 'text/html',
  css: 'text/css',
  js: 'text/javascript',
  mjs: 'text/javascript',
  cjs: 'text/javascript',
  ts: 'text/x-typescript',
  py: 'text/x-python',
  rb: 'text/x-ruby',
  go: 'text/x-go',
  rs: 'text/x-rust',
  java: 'text/x-java',
  c: 'text/x-c',
  h: 'text/x-c',
  cpp: 'text/x-c++',
  sh: 'application/x-sh',
  sql: 'application/sql',
  json: 'application/json',
  jsonl: 'application/x-ndjson',
  ndjson: 'application/x-ndjson',
  xml: 'application/xml',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  toml: 'application/toml',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  bmp: 'image/bmp',
  tif: 'image/tiff',
  tiff: 'image/tiff',
  pdf: 'application/pdf',
  zip: 'application/zip',
  gz: 'application/gzip',
  tar: 'application/x-tar',
  doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  mp4: 'video/mp4',
};

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;
const ALIASES: Readonly<Record<string, string>> = { 'image/jpg': 'image/jpeg', 'image/pjpeg': 'image/jpeg' };

/** `Text/Plain; charset=utf-8` → `text/plain`; null when the value is not a media type. */
export function normalizeMediaType(value: string | undefined): string | null {
  const essence = (value ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (!MEDIA_TYPE.test(essence)) return null;
  return ALIASES[essence] ?? essence;
}

/** The media type its extension suggests for a filename, or null. */
export function mediaTypeOfFilename(filename: string): string | null {
  const dot = filename.lastIndexOf('.');
  if (dot < 0 || dot === filename.length - 1) return null;
  return EXTENSION_TYPES[filename.slice(dot + 1).toLowerCase()] ?? null;
}

/**
 * The media type to store for an upload: the part's own Content-Type, else the one the filename's extension
 * suggests, else application/octet-stream. A part sent without a Content-Type is reported as text/plain (the
 * multipart default), so a known non-text extension wins over text/plain.
 */
export function resolveMediaType(declared: string | undefined, filename: string): string {
  const given = normalizeMediaType(declared);
  const guessed = mediaTypeOfFilename(filename);
  if (given === null || given === 'application/octet-stream') return guessed ?? 'application/octet-stream';
  if (given === 'text/plain' && guessed !== null && !guessed.startsWith('text/')) return guessed;
  return given;
}

const MODEL_IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const MODEL_TEXT_APPLICATION_TYPES = new Set([
  'application/json',
  'application/x-ndjson',
  'application/ndjson',
  'application/xml',
  'application/yaml',
  'application/x-yaml',
  'application/csv',
  'application/toml',
  'application/x-toml',
  'application/sql',
  'application/javascript',
  'application/x-javascript',
  'application/ecmascript',
  'application/typescript',
  'application/x-typescript',
  'application/x-sh',
  'application/x-shellscript',
  'application/graphql',
]);

/**
 * How a model can take a file: `image` (PNG, JPEG, GIF, WebP: sent as an image part), `text` (text/*, JSON, XML,
 * YAML, CSV and other textual types: sent as UTF-8 text) or null (not usable by a model, e.g. PDF or ZIP).
 */
export function classifyForModel(mediaType: string): 'image' | 'text' | null {
  const type = normalizeMediaType(mediaType);
  if (type === null) return null;
  if (MODEL_IMAGE_TYPES.has(type)) return 'image';
  if (type.startsWith('text/')) return 'text';
  if (MODEL_TEXT_APPLICATION_TYPES.has(type)) return 'text';
  if (type.startsWith('application/') && /\+(json|xml|yaml)$/.test(type)) return 'text';
  return null;
}

// ---------------------------------------------------------------------------------------------------------------
// Upload input rules

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is stripped.
const CONTROL = /[\u0000-\u001f\u007f]/g;

/** The part's filename without any directory, without control characters, trimmed; 400 when nothing is left. */
export function cleanFilename(raw: string): string {
  const base = raw.split(/[/\\]/).pop() ?? '';
  const name = base.replace(CONTROL, '').trim();
  if (name === '' || name === '.' || name === '..') {
    throw validationError('file', 'file needs a filename (the filename of its multipart part)');
  }
  if ([...name].length > MAX_FILENAME_LENGTH) {
    throw validationError('file', `the filename of file must be at most ${MAX_FILENAME_LENGTH} characters`);
  }
  return name;
}

function checkPurpose(value: string, truncated: boolean): string {
  if (truncated || !new RegExp(PURPOSE_PATTERN).test(value)) {
    throw validationError('purpose', 'purpose must be 1-64 letters, digits or _ . : -');
  }
  return value;
}

function unknownField(field: string): AppError {
  const name = field === '' ? '(unnamed)' : field;
  return validationError(name, `${name} is not a recognised field: send file and, optionally, purpose`);
}

// ---------------------------------------------------------------------------------------------------------------
// Rows

/** Records a file whose bytes are already stored under `row.storage_key`. */
export async function insertFile(db: Executor, row: FileRow): Promise<void> {
  await db.insertInto('files').values(row).execute();
}

/**
 * Deletes the organization's files of purpose `vision` among `ids` (images imported for a request that kept none
 * of them), rows first, then their bytes; other files, and ids of other organizations, are left alone.
 */
export async function deleteVisionFiles(
  db: Executor,
  store: FileStore,
  orgId: string,
  ids: readonly string[],
): Promise<void> {
  if (ids.length === 0) return;
  const rows = await db
    .deleteFrom('files')
    .where('org_id', '=', orgId)
    .where('id', 'in', [...ids])
    .where('purpose', '=', 'vision')
    .returning('storage_key')
    .execute();
  for (const row of rows) await store.remove(row.storage_key);
}

// ---------------------------------------------------------------------------------------------------------------

export function createFileService(deps: FileServiceDeps) {
  const store: FileStore = createFileStore({ dataDir: deps.dataDir });

  async function liveRow(orgId: string, id: string): Promise<FileRow> {
    const row = await deps.db
      .selectFrom('files')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('id', '=', id.toLowerCase())
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (row === undefined) throw notFound('file', id);
    return row;
  }

  return {
    store,

    /**
     * Stores the one `file` part of an upload (and its optional `purpose`). The content streams to disk; it
     * becomes visible, row and bytes, only when the whole request was read and valid.
     */
    async upload(orgId: string, parts: AsyncIterable<UploadPart>): Promise<FileObject> {
      const id = newId();
      let staged: { upload: StagedUpload; filename: string; mediaType: string } | null = null;
      let purpose: string | null = null;
      let storageKey: string | null = null;
      try {
        for await (const part of parts) {
          if (part.kind === 'file') {
            if (part.field !== 'file') throw unknownField(part.field);
            if (staged !== null) throw validationError('file', 'send exactly one file per request');
            const filename = cleanFilename(part.filename);
            const upload = await store.stage(orgId, id, part.stream, deps.maxUploadBytes);
            staged = { upload, filename, mediaType: resolveMediaType(part.mediaType, filename) };
          } else if (part.field === 'purpose') {
            if (purpose !== null) throw validationError('purpose', 'send purpose at most once');
            purpose = checkPurpose(part.value, part.truncated);
          } else if (part.field === 'file') {
            throw validationError('file', 'file must be a file part (with a filename), not a plain form field');
          } else {
            throw unknownField(part.field);
          }
        }
        if (staged === null) {
          throw validationError('file', 'file is required: send the content as a multipart/form-data part named file');
        }
        if (staged.upload.bytes === 0) throw validationError('file', 'file is empty');
        const now = deps.clock.now();
        storageKey = await staged.upload.commit();
        const row: FileRow = {
          id,
          org_id: orgId,
          filename: staged.filename,
          media_type: staged.mediaType,
          bytes: staged.upload.bytes,
          sha256: staged.upload.sha256,
          purpose: purpose ?? DEFAULT_PURPOSE,
          storage_key: storageKey,
          created_at: now,
          deleted_at: null,
        };
        await insertFile(deps.db, row);
        return fileFromRow(row);
      } catch (error) {
        await staged?.upload.discard();
        if (storageKey !== null) await store.remove(storageKey);
        throw error;
      }
    },

    async get(orgId: string, id: string): Promise<FileObject> {
      return fileFromRow(await liveRow(orgId, id));
    },

    /** Newest first; `after` is the id of the last file of the previous page. */
    async list(orgId: string, query: CursorQuery): Promise<FileList> {
      return newestFirstPage(
        deps.db.selectFrom('files').selectAll().where('org_id', '=', orgId).where('deleted_at', 'is', null),
        query,
        {
          createdAt: 'created_at',
          id: 'id',
          // A deleted file still marks its place, so deleting while paging skips nothing.
          anchor: (after) =>
            deps.db
              .selectFrom('files')
              .select(['id', 'created_at'])
              .where('org_id', '=', orgId)
              .where('id', '=', after.toLowerCase())
              .executeTakeFirst(),
          unknownAfter: () => 'after must be the id of a file of this organization',
          view: fileFromRow,
        },
      );
    },

    /** The stored bytes as a stream, with the metadata to serve them. */
    async content(orgId: string, id: string): Promise<FileContent> {
      const row = await liveRow(orgId, id);
      const opened = await store.open(row.storage_key);
      if (opened === null) throw notFound('file', id);
      return { file: fileFromRow(row), stream: opened.stream, size: opened.size };
    },

    /** Marks the file deleted and removes its bytes; afterwards it is 404 everywhere. */
    async delete(orgId: string, id: string): Promise<FileDeleted> {
      const row = await liveRow(orgId, id);
      const result = await deps.db
        .updateTable('files')
        .set({ deleted_at: deps.clock.now() })
        .where('org_id', '=', orgId)
        .where('id', '=', row.id)
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) throw notFound('file', id);
      await store.remove(row.storage_key);
      return { id: row.id, object: 'file', deleted: true };
    },
  };
}

export type FileService = ReturnType<typeof createFileService>;

/** What the engine and the Responses surface read: a file's bytes, for a model. */
export interface FileReader {
  /** The file's content and metadata; null when it does not exist, is deleted or belongs to another org. */
  read(orgId: string, fileId: string): Promise<{ mediaType: string; filename: string; data: Uint8Array } | null>;
}

export function createFileReader(deps: { db: Executor; dataDir: string }): FileReader {
  const store = createFileStore({ dataDir: deps.dataDir });
  return {
    async read(orgId, fileId) {
      const row = await deps.db
        .selectFrom('files')
        .select(['filename', 'media_type', 'storage_key'])
        .where('org_id', '=', orgId)
        .where('id', '=', fileId.toLowerCase())
        .where('deleted_at', 'is', null)
        .executeTakeFirst();
      if (row === undefined) return null;
      const data = await store.read(row.storage_key);
      if (data === null) return null;
      return { mediaType: row.media_type, filename: row.filename, data };
    },
  };
}
