/**
 * Images given by URL in Responses input (`input_image.image_url`, compatibility mode) become files of the
 * organization (purpose `vision`), so they reach the model the same way as an uploaded `file_id` and stay
 * readable when a later turn rebuilds the context. A data: URL is decoded; an https URL is fetched once through
 * the egress guard (public addresses only, the checked address pinned, no redirects, bounded time and size).
 */
import { Readable } from 'node:stream';
import { validationError } from '../../errors/app-error.ts';
import type { Clock } from '../../lib/clock.ts';
import { discardingUnlessWritten } from '../../lib/discarding.ts';
import { EgressError, getPinned, type Resolver } from '../../lib/egress.ts';
import { newId } from '../../lib/ids.ts';
import type { Executor } from '../../storage/db.ts';
import { classifyForModel, deleteVisionFiles, insertFile, normalizeMediaType } from './file-service.ts';
import { createFileStore } from './file-store.ts';

export interface ImageImporter {
  /** Stores the image at `url` as a file of the org and returns its id; 400 on `param` when it is no image. */
  import(orgId: string, url: string, param: string): Promise<string>;
  /**
   * Deletes images imported for a request that then wrote no message holding them (it failed, or an earlier
   * request with its key answered it). Best effort: what cannot be deleted stays a file of the org.
   */
  discard(orgId: string, fileIds: readonly string[]): Promise<void>;
}

/**
 * Runs `work`, which imports images into `imported` and then writes what holds them; when it fails, or `wrote` says
 * its result holds none of them (a replay), the images are deleted again, so that no request leaves files nobody
 * sent.
 */
export function keepingImages<T>(
  images: ImageImporter,
  orgId: string,
  imported: readonly string[],
  work: () => Promise<T>,
  wrote: (result: T) => boolean = () => true,
): Promise<T> {
  return discardingUnlessWritten(() => images.discard(orgId, imported), work, wrote);
}

export interface ImageImporterDeps {
  db: Executor;
  clock: Clock;
  dataDir: string;
  allowInsecureDestinations: boolean;
  /** Largest image accepted (bytes). */
  maxBytes: number;
  timeoutMs?: number;
  resolver?: Resolver;
}

const DATA_URL = /^data:([^;,]+)((?:;[^;,]*)*?);base64,([A-Za-z0-9+/=\s]*)$/;
const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
};

export function createImageImporter(deps: ImageImporterDeps): ImageImporter {
  const store = createFileStore({ dataDir: deps.dataDir });

  async function bytesOf(url: string, param: string): Promise<{ mediaType: string | null; bytes: Buffer }> {
    if (url.startsWith('data:')) {
      const match = DATA_URL.exec(url);
      if (match === null) throw validationError(param, `${param} must be a base64 data: URL (data:image/png;base64,…)`);
      const bytes = Buffer.from(match[3] ?? '', 'base64');
      return { mediaType: normalizeMediaType(match[1]), bytes };
    }
    if (!/^https?:\/\//i.test(url)) throw validationError(param, `${param} must be a data: URL or an https URL`);
    try {
      const response = await getPinned(url, {
        allowInsecure: deps.allowInsecureDestinations,
        timeoutMs: deps.timeoutMs ?? 15_000,
        maxResponseBytes: deps.maxBytes,
        resolver: deps.resolver,
        headers: { accept: 'image/*' },
      });
      if (response.status !== 200) {
        throw validationError(param, `${param}: fetching the image answered HTTP ${response.status}`);
      }
      if (response.truncated) {
        throw validationError(param, `${param}: the image is larger than ${deps.maxBytes} bytes`);
      }
      return { mediaType: normalizeMediaType(response.headers['content-type']), bytes: response.bytes };
    } catch (error) {
      if (error instanceof EgressError)
        throw validationError(param, `${param}: could not fetch the image: ${error.message}`);
      throw error;
    }
  }

  return {
    async import(orgId, url, param) {
      const { mediaType, bytes } = await bytesOf(url, param);
      if (mediaType === null || classifyForModel(mediaType) !== 'image') {
        throw validationError(
          param,
          `${param} must be a PNG, JPEG, GIF or WebP image, not ${mediaType ?? 'unknown data'}`,
        );
      }
      if (bytes.byteLength === 0) throw validationError(param, `${param} holds an empty image`);
      if (bytes.byteLength > deps.maxBytes) {
        throw validationError(param, `${param}: the image is larger than ${deps.maxBytes} bytes`);
      }
      const id = newId();
      const staged = await store.stage(orgId, id, Readable.from([bytes]), deps.maxBytes);
      const storageKey = await staged.commit();
      try {
        await insertFile(deps.db, {
          id,
          org_id: orgId,
          filename: `image.${EXTENSIONS[mediaType] ?? 'bin'}`,
          media_type: mediaType,
          bytes: staged.bytes,
          sha256: staged.sha256,
          purpose: 'vision',
          storage_key: storageKey,
          created_at: deps.clock.now(),
          deleted_at: null,
        });
      } catch (error) {
        await store.remove(storageKey);
        throw error;
      }
      return id;
    },

    async discard(orgId, fileIds) {
      try {
        await deleteVisionFiles(deps.db, store, orgId, fileIds);
      } catch {
        // Left as files of the organization, as they would have been before; the request's own error matters more.
      }
    },
  };
}
