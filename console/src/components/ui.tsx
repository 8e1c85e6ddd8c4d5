/** Small shared pieces: error notes, form fields with their API error, badges, times and money, confirmations. */
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

/** A time from Unix seconds or an ISO string. */
export function When({ at }: { at: number | string | null | undefined }) {
  if (at === null || at === undefined) return <span className="muted">—</span>;
  const date = typeof at === 'number' ? new Date(at * 1000) : new Date(at);
  return <time dateTime={date.toISOString()}>{dateTime.format(date)}</time>;
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

export function shortId(id: string): string {
  return id.length > 13 ? `${id.slice(0, 8)}…` : id;
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
}

/** A disruptive action in two steps: the button, then the consequence stated with Confirm and Cancel. */
export function ConfirmButton({ label, consequence, confirm, onConfirm, pending, danger = false }: ConfirmProps) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button type="button" className={danger ? 'danger' : undefined} onClick={() => setAsking(true)}>
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
