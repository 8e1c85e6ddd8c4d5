/**
 * Runs `work`, which writes what holds things made before it (files stored, images fetched); calls `discard`, which
 * deletes them, when it fails or when `wrote` says its result holds none of them (an idempotent replay), so that no
 * request leaves behind what nothing refers to.
 */
export async function discardingUnlessWritten<T>(
  discard: () => Promise<void>,
  work: () => Promise<T>,
  wrote: (result: T) => boolean,
): Promise<T> {
  let result: T;
  try {
    result = await work();
  } catch (error) {
    await discard();
    throw error;
  }
  if (!wrote(result)) await discard();
  return result;
}

/** A discard with nothing to delete. */
export const noDiscard = async (): Promise<void> => undefined;
