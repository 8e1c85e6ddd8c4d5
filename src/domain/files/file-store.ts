/**
 * The bytes of uploaded files, on disk under `<dataDir>/files/<org id>/<file id>`. An upload is streamed into a
 * temporary file in the same directory, counted and hashed on the way, and renamed into place only once it is
 * complete, so a file is either wholly there or not at all. No database here: file-service.ts keeps the rows.
 */
import { createHash, randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, validationError } from '../../errors/app-error.ts';
import { ensurePrivateDir, PRIVATE_FILE_MODE } from '../../lib/private-files.ts';

/** An upload written to its temporary file, waiting to be committed or discarded. */
export interface StagedUpload {
  bytes: number;
  /** Lower-case hex SHA-256 of the content. */
  sha256: string;
  /** Renames the temporary file into its final place; returns the storage key. */
  commit(): Promise<string>;
  /** Removes the temporary file (a no-op once committed or discarded). */
  discard(): Promise<void>;
}

export interface OpenedFile {
  stream: Readable;
  size: number;
}

export interface FileStore {
  /** `<dataDir>/files`. */
  readonly root: string;
  /**
   * Streams `source` into a temporary file beside the final place of (orgId, fileId), never holding it whole in
   * memory. More than `maxBytes` bytes abort the write: the temporary file is removed and the call rejects with
   * 413 payload_too_large. A source that fails mid-way (client gone, malformed multipart) rejects with 400.
   */
  stage(orgId: string, fileId: string, source: Readable, maxBytes: number): Promise<StagedUpload>;
  /** A read stream over stored content, or null when the bytes are gone. */
  open(storageKey: string): Promise<OpenedFile | null>;
  /** The whole stored content, or null when the bytes are gone. */
  read(storageKey: string): Promise<Uint8Array | null>;
  /** Removes stored content; missing content is not an error. */
  remove(storageKey: string): Promise<void>;
  /** The absolute path of a storage key (it must name a place below `root`). */
  pathOf(storageKey: string): string;
}

const KEY_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9-]{0,127}$/;

/** The storage key of a file: `<org id>/<file id>`, relative to the files root. */
export function storageKeyOf(orgId: string, fileId: string): string {
  if (!KEY_SEGMENT.test(orgId) || !KEY_SEGMENT.test(fileId)) {
    throw new Error(`invalid storage key segments ${JSON.stringify([orgId, fileId])}`);
  }
  return `${orgId}/${fileId}`;
}

const isMissing = (error: unknown): boolean =>
  error instanceof Error && 'code' in error && (error.code === 'ENOENT' || error.code === 'ENOTDIR');

/** Marks an error of the upload's source (as opposed to the disk), so that it becomes a 400, not a 500. */
class SourceFailure extends Error {}

export function createFileStore(options: { dataDir: string }): FileStore {
  const root = resolve(options.dataDir, 'files');

  function pathOf(storageKey: string): string {
    const path = resolve(root, storageKey);
    const inside = relative(root, path);
    if (inside === '' || inside.startsWith('..') || inside.split(sep).length !== 2) {
      throw new Error(`storage key ${JSON.stringify(storageKey)} is outside the files directory`);
    }
    return path;
  }

  return {
    root,
    pathOf,

    async stage(orgId, fileId, source, maxBytes) {
      const key = storageKeyOf(orgId, fileId);
      const finalPath = pathOf(key);
      const directory = join(root, orgId);
      // Owner-only (lib/private-files.ts): the folders 0700, the content 0600 (a rename keeps the mode).
      await ensurePrivateDir(directory);
      const tempPath = join(directory, `.${fileId}.${randomBytes(6).toString('hex')}.part`);
      const hash = createHash('sha256');
      let bytes = 0;
      async function* countAndHash(chunks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
        const iterator = chunks[Symbol.asyncIterator]();
        while (true) {
          let next: IteratorResult<Buffer>;
          try {
            next = await iterator.next();
          } catch (error) {
            throw new SourceFailure('the upload stream failed', { cause: error });
          }
          if (next.done === true) return;
          const chunk = next.value;
          bytes += chunk.length;
          if (bytes > maxBytes) {
            throw new AppError('payload_too_large', `file is larger than the upload limit of ${maxBytes} bytes`, {
              param: 'file',
            });
          }
          hash.update(chunk);
          yield chunk;
        }
      }
      // Opened before streaming, so the file exists when a failure removes it: a stream that opens its file
      // lazily could create it after the removal and leave it behind.
      const handle = await open(tempPath, 'wx', PRIVATE_FILE_MODE);
      try {
        await handle.chmod(PRIVATE_FILE_MODE);
        // flush: the data reaches the disk before the rename makes it visible.
        await pipeline(source, countAndHash, handle.createWriteStream({ flush: true }));
      } catch (error) {
        await handle.close().catch(() => undefined);
        await rm(tempPath, { force: true });
        if (error instanceof SourceFailure) {
          const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
          throw validationError('file', `the upload ended before the file was complete${cause}`);
        }
        throw error;
      }
      let settled = false;
      return {
        bytes,
        sha256: hash.digest('hex'),
        async commit() {
          if (settled) throw new Error('staged upload already committed or discarded');
          settled = true;
          try {
            await rename(tempPath, finalPath);
          } catch (error) {
            await rm(tempPath, { force: true });
            throw error;
          }
          return key;
        },
        async discard() {
          if (settled) return;
          settled = true;
          await rm(tempPath, { force: true });
        },
      };
    },

    async open(storageKey) {
      let handle: Awaited<ReturnType<typeof open>>;
      try {
        handle = await open(pathOf(storageKey), 'r');
      } catch (error) {
        if (isMissing(error)) return null;
        throw error;
      }
      try {
        const { size } = await handle.stat();
        return { stream: handle.createReadStream(), size };
      } catch (error) {
        await handle.close();
        throw error;
      }
    },

    async read(storageKey) {
      try {
        return await readFile(pathOf(storageKey));
      } catch (error) {
        if (isMissing(error)) return null;
        throw error;
      }
    },

    async remove(storageKey) {
      await rm(pathOf(storageKey), { force: true });
    },
  };
}
