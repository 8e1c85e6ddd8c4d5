/**
 * The files attached to user input in a turn's context, read once per turn: the compaction check, the summary and
 * the step's call all show the model the same files, and a file's bytes never change under its id.
 */
import type { AttachedFile } from '../domain/turns/context-builder.ts';
import type { Turn } from './turn-context.ts';

/** Per turn, the files read so far (null: gone when it was read). */
const read = new WeakMap<Turn, Map<string, AttachedFile | null>>();

/** Loads the files attached to user input in the context (missing ones are left out). */
export async function attachedFiles(turn: Turn, fileIds: string[]): Promise<Map<string, AttachedFile>> {
  const files = new Map<string, AttachedFile>();
  const reader = turn.deps.files;
  if (reader === undefined || fileIds.length === 0) return files;
  let known = read.get(turn);
  if (known === undefined) {
    known = new Map();
    read.set(turn, known);
  }
  for (const fileId of fileIds) {
    let file = known.get(fileId);
    if (file === undefined) {
      file = await reader.read(turn.message.org_id, fileId);
      known.set(fileId, file);
    }
    if (file !== null) files.set(fileId, file);
  }
  return files;
}
