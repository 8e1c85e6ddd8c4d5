/**
 * What the model reads back from the sandbox tools. A command's result says first how it ended (exit code, or
 * which limit stopped it and what that means), then its output; files come back as text with a note when they
 * were cut or are binary. Plain text rather than JSON: it is what a person at a terminal would read, and a model
 * reads it the same way.
 */
import type { SandboxLimits } from '../../config/sandbox-limits.ts';
import type { SandboxRunResult, WorkspaceDisk } from '../sandbox/run-sandbox.ts';
import type { WorkspaceEntry, WorkspaceFile } from '../sandbox/workspace-files.ts';

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;

/** Where the workspace stands against its quota, in a clause. */
function diskState(disk: WorkspaceDisk): string {
  if (disk.unmeasured === 'entries')
    return `it holds more than ${disk.entries} files and folders, which counts as full`;
  if (disk.unmeasured === 'depth') return 'its folders nest too deep to measure, which counts as full';
  return `${mib(disk.usedBytes)} in use of ${mib(disk.quotaBytes)}`;
}

/** Why the command did not end by itself, in a sentence, or null when it did. */
function killNote(result: SandboxRunResult, limits: SandboxLimits, timeoutMs: number): string | null {
  switch (result.killed) {
    case 'timeout':
      return `timed out: the command ran longer than ${timeoutMs} ms and was killed with every process it started`;
    case 'aborted':
      return 'stopped: the command was killed with every process it started (interrupt, end of turn or shutdown)';
    case 'output_limit':
      return `killed: the command wrote more than ${limits.outputKillBytes} bytes of output`;
    case 'cpu_time':
      return `killed: a process used up its CPU time limit (${limits.cpuSeconds} s per process)`;
    case 'file_size':
      return `killed: a file grew past the file size limit (${limits.fileSizeBytes} bytes)`;
    case 'disk_quota':
      return `killed: the workspace reached its disk quota${result.disk === null ? '' : ` (${diskState(result.disk)})`}; the command was stopped with every process it started. Delete files to make room`;
    case 'memory':
      return `out of memory: an allocation failed at the memory limit (${limits.memoryBytes} bytes per process)`;
    default:
      return null;
  }
}

/** The model-facing text of one `sandbox_run`. */
export function describeRun(result: SandboxRunResult, limits: SandboxLimits, timeoutMs: number): string {
  const lines: string[] = [];
  const note = killNote(result, limits, timeoutMs);
  if (note !== null) lines.push(note);
  if (result.exitCode !== null) {
    const signal = result.signal === null ? '' : ` (${result.signal})`;
    lines.push(`exit code: ${result.exitCode}${signal}`);
  }
  lines.push(`duration: ${seconds(result.durationMs)}`);
  if (result.disk?.full && result.killed !== 'disk_quota') {
    lines.push(
      `the workspace is full (${diskState(result.disk)}): commands cannot grow it and files cannot be written until some are deleted`,
    );
  }
  if (result.egress !== null && result.egress.refused.length > 0) {
    lines.push(`network refused: ${[...new Set(result.egress.refused)].join(', ')} (see the agent's network policy)`);
  }
  if (result.stdout === '' && result.stderr === '') lines.push('(no output)');
  if (result.stdout !== '') lines.push('--- stdout ---', result.stdout.replace(/\n$/, ''));
  if (result.stderr !== '') lines.push('--- stderr ---', result.stderr.replace(/\n$/, ''));
  return lines.join('\n');
}

/** A failed command is an error result: it did not end with status 0 on its own. */
export const runFailed = (result: SandboxRunResult): boolean => result.killed !== null || result.exitCode !== 0;

/** Bytes that are most likely not text: a NUL in the first 8 KiB, as git and grep decide. */
function looksBinary(content: Buffer): boolean {
  return content.subarray(0, 8192).includes(0);
}

/** The model-facing text of one `sandbox_read_file`. */
export function describeFile(file: WorkspaceFile): string {
  if (looksBinary(file.content)) {
    return `[${file.path} is a binary file of ${file.size} bytes; it is not shown as text. Use sandbox_run (e.g. xxd, file) to inspect it.]`;
  }
  const text = file.content.toString('utf8');
  if (!file.truncated) return text;
  return `${text}\n[truncated: the first ${file.content.byteLength} of ${file.size} bytes of ${file.path} are shown; read the rest with sandbox_run (e.g. tail -c, sed -n)]`;
}

function entryLine(entry: WorkspaceEntry): string {
  if (entry.type === 'directory') return `${entry.path}/`;
  if (entry.type === 'symlink') return `${entry.path} -> ${entry.target ?? '?'}`;
  if (entry.type === 'other') return `${entry.path} (special file)`;
  return `${entry.path} (${entry.size} bytes)`;
}

/** The model-facing text of one `sandbox_list_files`. */
export function describeListing(listing: { path: string; entries: WorkspaceEntry[]; truncated: boolean }): string {
  const where = listing.path === '' ? 'the workspace' : listing.path;
  if (listing.entries.length === 0) return `${where} is empty`;
  const lines = [`${where}:`, ...listing.entries.map(entryLine)];
  if (listing.truncated) lines.push(`[listing truncated at ${listing.entries.length} entries; list a subdirectory]`);
  return lines.join('\n');
}
