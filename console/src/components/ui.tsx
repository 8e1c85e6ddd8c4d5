/**
 * Small shared pieces: error notes, form fields with their errors in words for people, badges, times and money,
 * confirmations.
 */
import { type ReactNode, useId, useState } from 'react';
import { ApiError } from '../api/client.ts';

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return `${error.message} (${error.code})`;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** An error the user should read; announced to screen readers. */
export function ErrorNote({ error, children }: { error: unknown; children?: ReactNode }) {
  if (error === null || error === undefined) return null;
  return (
    <div className="note error" role="alert">
      <p>{errorText(error)}</p>
      {children}
    </div>
  );
}

/** A form's errors, keyed by the field they belong to ("name", "urls[1].url"). */
export type FieldErrors = Record<string, string>;

/** The schema's wording, made plain; the field's label comes before it. */
const PLAIN: [RegExp, string][] = [
  [/^must be <= (\S+)$/, 'must be at most $1'],
  [/^must be >= (\S+)$/, 'must be at least $1'],
  [/^must be < (\S+)$/, 'must be less than $1'],
  [/^must be > (\S+)$/, 'must be more than $1'],
  [/^must be integer$/, 'must be a whole number'],
  [/^must be number$/, 'must be a number'],
  [/^must be string$/, 'must be text'],
  [/^must be at least 1 characters$/, 'is required'],
  [/^must contain a non-whitespace character$/, 'is required'],
  [/^must have at least 1 items$/, 'needs at least one'],
  [/^must have at most (\d+) items$/, 'can have at most $1'],
  [/^must be a valid uri$/, 'must be a URL (https://…)'],
  [/^must match the pattern .*$/, 'is not in the form it takes'],
];

/** An API path in a message: `maxSteps`, `mcpServers[1].url`, `clientTools[0].parameters`. */
const PATH = /\b[a-zA-Z_]+(?:\[\d+\])?(?:\.[a-zA-Z_]+(?:\[\d+\])?)*/g;

/**
 * The API's validation message (a 400 whose `param` names the field) in words for people: every path in it that
 * names a field of the form becomes that field's label, and the schema's wording is made plain
 * ("maxSteps must be <= 128" reads "Max steps must be at most 128"). `labelOf` answers null for a path that is no
 * field of the form. Every form of the console says its API errors through this one function.
 */
export function humanError(param: string, message: string, labelOf: (param: string) => string | null): string {
  const label = labelOf(param) ?? param;
  let rest = message.startsWith(param) ? message.slice(param.length).replace(/^[:\s]+/, '') : message;
  for (const [pattern, replacement] of PLAIN) rest = rest.replace(pattern, replacement);
  rest = rest.replace(PATH, (path) => (path === param ? label : (labelOf(path) ?? path)));
  return `${label} ${rest}`;
}

/** The field error of an API error (keyed by the form's key for its `param`), or null for any other error. */
export function apiFieldErrors(
  error: unknown,
  keyOf: (param: string) => string,
  labelOf: (key: string) => string | null,
): FieldErrors | null {
  if (!(error instanceof ApiError) || error.param === null || error.status !== 400) return null;
  return { [keyOf(error.param)]: humanError(error.param, error.message, (param) => labelOf(keyOf(param))) };
}

/** Checks a form before it is sent, so every error shows at once: each check adds its message at its field. */
export function formChecks() {
  const errors: FieldErrors = {};
  const add = (key: string, message: string) => {
    if (errors[key] === undefined) errors[key] = message;
  };
  return {
    errors,
    add,
    required(key: string, label: string, value: string) {
      if (value.trim() === '') add(key, `${label} is required`);
    },
    /** A whole number from min to max; empty passes (the field is optional) unless required. */
    wholeNumber(key: string, label: string, value: string, min: number, max: number) {
      if (value.trim() === '') return;
      const number = Number(value);
      if (!Number.isInteger(number)) add(key, `${label} must be a whole number`);
      else if (number < min) add(key, `${label} must be at least ${min}`);
      else if (number > max) add(key, `${label} must be at most ${max}`);
    },
    url(key: string, label: string, value: string) {
      if (value.trim() === '') return add(key, `${label} is required`);
      try {
        const parsed = new URL(value.trim());
        if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') add(key, `${label} must start with https://`);
      } catch {
        add(key, `${label} must be a URL, e.g. https://example.com/mcp`);
      }
    },
  };
}

/** Whether an error at `errorKey` belongs to the field `fieldKey` (itself or something inside it). */
export function belongsTo(errorKey: string, fieldKey: string): boolean {
  return errorKey === fieldKey || errorKey.startsWith(`${fieldKey}.`) || errorKey.startsWith(`${fieldKey}[`);
}

/**
 * The errors of a form: its own checks before sending (`ready`), then the API's 400 at its field (`failed`), in
 * words for people. `errorOf` gives a field its errors.
 */
export function useFieldErrors<T>(check: (value: T) => FieldErrors, labelOf: (key: string) => string | null) {
  const [errors, setErrors] = useState<FieldErrors>({});
  return {
    errors,
    /** Checks the value; true when nothing stops it from being sent. */
    ready(value: T): boolean {
      const found = check(value);
      setErrors(found);
      return Object.keys(found).length === 0;
    },
    /** Puts the API's error at its field; other errors are the caller's to show. */
    failed(error: unknown): void {
      setErrors(apiFieldErrors(error, (param) => param, labelOf) ?? {});
    },
    /** Whether the form shows field errors (then the API's error is not repeated as a note). */
    any: Object.keys(errors).length > 0,
    errorOf(field: string): string | undefined {
      const mine = Object.entries(errors).filter(([key]) => belongsTo(key, field));
      return mine.length === 0 ? undefined : mine.map(([, message]) => message).join(' ');
    },
  };
}

/** At the top of a form: it was not saved, and every error, each also shown at its field. */
export function FormErrors({ errors, what }: { errors: FieldErrors; what: string }) {
  const messages = Object.values(errors);
  if (messages.length === 0) return null;
  return (
    <div className="note error" role="alert">
      <p>
        {what} was not saved: {messages.length === 1 ? 'one field needs' : `${messages.length} fields need`} a change.
      </p>
      <ul className="note-list">
        {messages.map((message) => (
          <li key={message}>{message}</li>
        ))}
      </ul>
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" aria-live="polite">
      Loading {what}…
    </p>
  );
}

interface FieldProps {
  label: string;
  error?: string | undefined;
  hint?: ReactNode;
  children: (props: { id: string; 'aria-invalid': boolean; 'aria-describedby': string | undefined }) => ReactNode;
}

/** A labelled control with its hint and the API's validation error beside it. */
export function Field({ label, error, hint, children }: FieldProps) {
  const id = useId();
  const described = [hint === undefined ? null : `${id}-hint`, error === undefined ? null : `${id}-error`]
    .filter((part) => part !== null)
    .join(' ');
  return (
    <div className={error === undefined ? 'field' : 'field invalid'}>
      <label htmlFor={id}>{label}</label>
      {children({
        id,
        'aria-invalid': error !== undefined,
        'aria-describedby': described === '' ? undefined : described,
      })}
      {hint === undefined ? null : (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      {error === undefined ? null : (
        <p className="field-error" id={`${id}-error`} role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

export function Badge({ value }: { value: string }) {
  return <span className={`badge badge-${value.replace(/[^a-z_]/g, '')}`}>{value.replaceAll('_', ' ')}</span>;
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['year', 365 * 86_400],
  ['month', 30 * 86_400],
  ['week', 7 * 86_400],
  ['day', 86_400],
  ['hour', 3600],
  ['minute', 60],
];

/** "3 minutes ago", "in 2 hours", "just now": a time relative to `now`. */
export function ago(date: Date, now = Date.now()): string {
  const seconds = Math.round((date.getTime() - now) / 1000);
  if (Math.abs(seconds) < 45) return 'just now';
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
  }
  return relative.format(Math.round(seconds / 60), 'minute');
}

/** A time from Unix seconds or an ISO string: relative ("5 minutes ago"), the date and time on hover. */
export function When({ at }: { at: number | string | null | undefined }) {
  if (at === null || at === undefined) return <span className="muted">—</span>;
  const date = typeof at === 'number' ? new Date(at * 1000) : new Date(at);
  const absolute = dateTime.format(date);
  return (
    <time dateTime={date.toISOString()} title={absolute}>
      {ago(date)}
    </time>
  );
}

export function usd(value: number | null | undefined): string {
  if (value === null || value === undefined) return '—';
  if (value === 0) return '$0';
  return value < 0.01 ? `$${value.toFixed(6)}` : `$${value.toFixed(2)}`;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '…';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

const UUID_AT_END = /^(.*?)([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

/**
 * An id short enough for a list and still telling rows apart: UUIDv7s begin with their creation time, so ids made
 * the same minute share their start; the end is random. `conv_0194…-…-5e3c2a1f9b07` reads `conv_…1f9b07`.
 */
export function shortId(id: string): string {
  const uuid = UUID_AT_END.exec(id);
  if (uuid !== null) return `${uuid[1]}…${(uuid[2] ?? '').slice(-8)}`;
  return id.length > 20 ? `…${id.slice(-12)}` : id;
}

/** An id in monospace, shortened to its distinguishing end, the whole id on hover and a button that copies it. */
export function Id({ value, what }: { value: string; what: string }) {
  const [copied, setCopied] = useState(false);
  const copy = () => {
    navigator.clipboard.writeText(value).then(
      () => {
        setCopied(true);
        window.setTimeout(() => setCopied(false), 1500);
      },
      () => setCopied(false),
    );
  };
  return (
    <span className="id">
      <code title={value}>{shortId(value)}</code>
      <button type="button" className="copy" onClick={copy} aria-label={`Copy ${what} id ${value}`}>
        {copied ? 'Copied' : 'Copy'}
      </button>
    </span>
  );
}

/** A table's box: at phone width a wide table scrolls inside it (by keyboard too), never the page. */
export function TableBox({ label, children }: { label: string; children: ReactNode }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region is focusable so the keyboard can scroll it.
    <section className="table-box" aria-label={label} tabIndex={0}>
      {children}
    </section>
  );
}

interface PagerProps {
  /** What this page shows: "1–25 of 60", "Page 2". */
  summary: string;
  /** Goes to the page before, or null on the first page. */
  onPrevious: (() => void) | null;
  /** Goes to the page after, or null on the last page. */
  onNext: (() => void) | null;
}

/** The pagination of every list: where the page is, Previous and Next. */
export function Pager({ summary, onPrevious, onNext }: PagerProps) {
  if (onPrevious === null && onNext === null) return <p className="pager muted small">{summary}</p>;
  return (
    <nav className="pager" aria-label="Pages">
      <span className="muted small" aria-live="polite">
        {summary}
      </span>
      <button type="button" disabled={onPrevious === null} onClick={onPrevious ?? undefined}>
        Previous
      </button>
      <button type="button" disabled={onNext === null} onClick={onNext ?? undefined}>
        Next
      </button>
    </nav>
  );
}

/** "1–25 of 60" for a page of `count` rows at `offset`; "None" for none. */
export function offsetSummary(offset: number, count: number, total: number): string {
  return count === 0 ? `None of ${total}` : `${offset + 1}–${offset + count} of ${total}`;
}

/**
 * Cursor paging for a list whose cursor lives in the URL: `current` is this page's cursor ('' for the first page),
 * `go` shows another. The cursors of the pages before are remembered, so Previous goes back one page (after a
 * reload, to the first).
 */
export function useCursorPages(current: string, go: (cursor: string) => void) {
  const [history, setHistory] = useState<string[]>([]);
  const before = current === '' ? [] : history;
  const page = current === '' ? 1 : before.length > 0 ? before.length + 1 : null;
  return {
    summary: (count: number, noun: string) => `${page === null ? '' : `Page ${page} · `}${count} ${noun}`,
    onPrevious:
      current === ''
        ? null
        : () => {
            setHistory(before.slice(0, -1));
            go(before.at(-1) ?? '');
          },
    onNext: (next: string | null | undefined) =>
      next === null || next === undefined || next === ''
        ? null
        : () => {
            setHistory([...before, current]);
            go(next);
          },
  };
}

interface ConfirmProps {
  /** The button that asks: "Rotate secret", "Delete". */
  label: string;
  /** What happens, said before it does: "The current secret stops working at once…". */
  consequence: string;
  /** The button that acts: "Confirm rotate". */
  confirm: string;
  onConfirm: () => void;
  pending: boolean;
  danger?: boolean;
  /** The asking button's accessible name where its label alone is ambiguous: "Delete report.pdf". */
  name?: string;
  /** The asking button is disabled (nothing to act on now). */
  disabled?: boolean;
}

/** A disruptive action in two steps: the button, then the consequence stated with Confirm and Cancel. */
export function ConfirmButton({
  label,
  consequence,
  confirm,
  onConfirm,
  pending,
  danger = false,
  name,
  disabled = false,
}: ConfirmProps) {
  const [asking, setAsking] = useState(false);
  // Asking ends when there is nothing left to act on (the turn ended meanwhile).
  if (asking && disabled) setAsking(false);
  if (!asking || disabled) {
    return (
      <button
        type="button"
        className={danger ? 'danger' : undefined}
        onClick={() => setAsking(true)}
        aria-label={name}
        disabled={disabled}
      >
        {label}
      </button>
    );
  }
  return (
    <fieldset className="row plain" aria-label={label}>
      <span>{consequence}</span>
      <button
        type="button"
        className={danger ? 'danger' : 'primary'}
        disabled={pending}
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirm}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </fieldset>
  );
}
