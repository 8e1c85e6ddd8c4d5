/**
 * The HTTP side of running out of space (storage/storage-space.ts). A request that fails for lack of space tells
 * the process so, which then refuses every later write up front with 507 insufficient_storage (nothing is
 * attempted: an upload is not read into a disk that cannot hold it) and serves reads, until its probe finds
 * space again. Both answers carry Retry-After: the probe interval.
 */
import { AppError } from '../errors/app-error.ts';
import type { StorageSpace } from '../storage/storage-space.ts';
import { STORAGE_FULL_MESSAGE } from './error-handler.ts';
import type { App } from './types.ts';

/** Methods that only read: served while the process is read-only. */
const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export function registerStorageGate(app: App, space: StorageSpace): void {
  app.addHook('onError', async (_request, reply, error) => {
    if (space.observe(error)) reply.header('retry-after', String(space.retryAfterS));
  });
  // After authentication and validation: a client's own mistakes are still answered as such.
  app.addHook('preHandler', async (request, reply) => {
    if (space.writable || READ_METHODS.has(request.method)) return;
    space.refused();
    reply.header('retry-after', String(space.retryAfterS));
    throw new AppError('insufficient_storage', STORAGE_FULL_MESSAGE);
  });
}
