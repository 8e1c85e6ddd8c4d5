/**
 * Errors of the sandbox runtime. They know nothing of HTTP: the tool providers turn them into tool results
 * (a refused path is something the model should read and correct, not a server failure).
 */

export const WORKSPACE_PATH_ERROR_CODES = [
  'invalid_path',
  'outside_workspace',
  'not_found',
  'not_a_file',
  'not_a_directory',
  'too_large',
  'symlink_loop',
  'quota_exceeded',
] as const;
export type WorkspacePathErrorCode = (typeof WORKSPACE_PATH_ERROR_CODES)[number];

/** A workspace path that is malformed, leaves the workspace, or names the wrong kind of file; or a write that
 *  does not fit in the workspace's quota. */
export class WorkspacePathError extends Error {
  readonly code: WorkspacePathErrorCode;
  readonly path: string;

  constructor(code: WorkspacePathErrorCode, path: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.path = path;
  }
}

export const SANDBOX_ERROR_CODES = ['unavailable', 'egress_unavailable', 'invalid_workspace', 'setup_failed'] as const;
export type SandboxErrorCode = (typeof SANDBOX_ERROR_CODES)[number];

/** The sandbox could not run a command at all (as opposed to a command that ran and failed). */
export class SandboxError extends Error {
  readonly code: SandboxErrorCode;
  /** What an operator can do about it, when known (e.g. how to install bubblewrap). */
  readonly hint: string | null;

  constructor(code: SandboxErrorCode, message: string, hint: string | null = null, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.hint = hint;
  }
}
