import type { ErrorCode } from './catalog.ts';

export interface AppErrorOptions {
  param?: string;
  cause?: unknown;
  /** True when the same call may succeed later (used by retry policies of callers). */
  retriable?: boolean;
  /** Facts a client acts on, sent as `error.details` (e.g. the current version of a version_conflict). */
  details?: Record<string, unknown>;
}

/**
 * The error every layer throws for a known condition. It knows its stable code and an optional parameter
 * name, not HTTP: the HTTP layer maps the code through the catalog.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly retriable: boolean;
  readonly details: Record<string, unknown> | null;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.param = options.param ?? null;
    this.retriable = options.retriable ?? false;
    this.details = options.details ?? null;
  }
}

export function validationError(param: string, message: string): AppError {
  return new AppError('validation_error', message, { param });
}

export function notFound(what: string, id: string): AppError {
  return new AppError('not_found', `${what} ${id} not found`);
}
