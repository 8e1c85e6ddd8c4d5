/**
 * Files attached to a chat message: the composer's picker (button, paste, drop) uploading each file through
 * POST /v1/files as it is chosen, its chips (name, size, progress or the error in words, a remove button), and the
 * attachments of a sent message in the transcript. Images are fetched with the key (an `<img src>` could not send
 * it) and shown through a blob: URL.
 */
import { useQuery } from '@tanstack/react-query';
import { type ClipboardEvent, type DragEvent, useCallback, useEffect, useRef, useState } from 'react';
import { ApiError, toApiError } from '../api/client.ts';
import type { Message } from '../api/types.ts';
import { readKey } from '../auth/key-store.ts';
import { humanError } from './ui.tsx';

/** What POST /v1/files/{id}/content and POST /v1/files need: the key of this tab. */
const authorization = (): Record<string, string> => {
  const key = readKey();
  return key === null ? {} : { authorization: `Bearer ${key}` };
};

export interface Attached {
  /** This chip's own key (a file may be attached twice). */
  key: number;
  name: string;
  size: number;
  /** The uploaded file's id, once uploaded. */
  fileId: string | null;
  error: string | null;
}

/** A file ready to send: uploaded, with no error. */
export type ReadyAttachment = Attached & { fileId: string };

export function bytes(size: number): string {
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MB`;
}

async function upload(file: File): Promise<string> {
  const form = new FormData();
  form.append('file', file, file.name);
  form.append('purpose', 'user_data');
  const response = await fetch('/v1/files', { method: 'POST', headers: authorization(), body: form });
  const body: unknown = await response.json().catch(() => null);
  if (!response.ok) {
    const error = toApiError(response.status, body);
    const { param } = error;
    // "file is larger than …" reads "notes.txt is larger than …"; other words of the message stay as they are.
    const named = (path: string) => (path === param ? file.name : null);
    throw new Error(param === null ? error.message : humanError(param, error.message, named));
  }
  const id = typeof body === 'object' && body !== null && 'id' in body ? body.id : null;
  if (typeof id !== 'string') throw new Error(`${file.name} was not stored: the server answered no file id`);
  return id;
}

/** The composer's attachments: add files (each uploads at once), remove one, clear them, mark one failed. */
export function useAttachments() {
  const [items, setItems] = useState<Attached[]>([]);
  const next = useRef(0);
  const update = useCallback((key: number, change: Partial<Attached>) => {
    setItems((current) => current.map((item) => (item.key === key ? { ...item, ...change } : item)));
  }, []);
  const add = useCallback(
    (files: Iterable<File>) => {
      for (const file of files) {
        next.current += 1;
        const key = next.current;
        setItems((current) => [...current, { key, name: file.name, size: file.size, fileId: null, error: null }]);
        upload(file).then(
          (fileId) => update(key, { fileId }),
          (error: unknown) => update(key, { error: error instanceof Error ? error.message : String(error) }),
        );
      }
    },
    [update],
  );
  const remove = useCallback((key: number) => setItems((current) => current.filter((item) => item.key !== key)), []);
  const clear = useCallback(() => setItems([]), []);
  const ready = items.filter((item): item is ReadyAttachment => item.fileId !== null && item.error === null);
  const uploading = items.some((item) => item.fileId === null && item.error === null);
  return { items, ready, uploading, add, remove, clear, fail: update };
}

export type Attachments = ReturnType<typeof useAttachments>;

/** Paste and drop handlers that attach the files they carry (text pastes stay text). */
export function fileDropHandlers(attachments: Attachments) {
  return {
    onPaste: (event: ClipboardEvent) => {
      if (event.clipboardData.files.length === 0) return;
      event.preventDefault();
      attachments.add(event.clipboardData.files);
    },
    onDragOver: (event: DragEvent) => {
      if (event.dataTransfer.types.includes('Files')) event.preventDefault();
    },
    onDrop: (event: DragEvent) => {
      if (event.dataTransfer.files.length === 0) return;
      event.preventDefault();
      attachments.add(event.dataTransfer.files);
    },
  };
}

/** The Attach button (a hidden file input behind it) and the chips of the chosen files. */
export function AttachmentPicker({ attachments }: { attachments: Attachments }) {
  const input = useRef<HTMLInputElement>(null);
  return (
    <div className="attachments">
      <input
        ref={input}
        type="file"
        multiple
        hidden
        aria-label="Files to attach"
        onChange={(event) => {
          attachments.add(event.target.files ?? []);
          event.target.value = '';
        }}
      />
      <button type="button" onClick={() => input.current?.click()}>
        Attach files
      </button>
      {attachments.items.length === 0 ? null : (
        <ul className="chips" aria-label="Attached files">
          {attachments.items.map((item) => (
            <li key={item.key} className={item.error === null ? 'chip' : 'chip chip-error'}>
              <span className="chip-name">{item.name}</span> <span className="muted small">{bytes(item.size)}</span>
              {item.error !== null ? (
                <span className="field-error small" role="alert">
                  {item.error}
                </span>
              ) : item.fileId === null ? (
                <span className="muted small">uploading…</span>
              ) : null}
              <button
                type="button"
                className="link small"
                aria-label={`Remove ${item.name}`}
                onClick={() => attachments.remove(item.key)}
              >
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** The chip of a send error that names `parts[i].fileId` (the text part, when sent, is parts[0]). */
export function failedPart(param: string | null, withText: boolean): number | null {
  const match = param === null ? null : /^parts\[(\d+)\]\.fileId$/.exec(param);
  if (match === null) return null;
  return Number(match[1]) - (withText ? 1 : 0);
}

type AttachmentPart = Extract<Message['parts'][number], { type: 'image' | 'file' }>;

function Thumbnail({ part }: { part: AttachmentPart }) {
  const content = useQuery({
    queryKey: ['file-content', part.fileId],
    queryFn: async () => {
      const response = await fetch(`/v1/files/${part.fileId}/content`, { headers: authorization() });
      if (!response.ok) throw toApiError(response.status, await response.json().catch(() => null));
      return response.blob();
    },
    staleTime: Number.POSITIVE_INFINITY,
    retry: false,
  });
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    if (content.data === undefined) return;
    const made = URL.createObjectURL(content.data);
    setUrl(made);
    return () => URL.revokeObjectURL(made);
  }, [content.data]);
  if (content.isError) return <span className="chip">{part.filename} (no longer available)</span>;
  if (url === null) return <span className="chip">{part.filename}</span>;
  return <img className="thumbnail" src={url} alt={part.filename} />;
}

/** The files attached to a sent message: images as thumbnails, other files as chips with their name. */
export function MessageAttachments({ parts }: { parts: Message['parts'] }) {
  const attached = parts.filter((part): part is AttachmentPart => part.type === 'image' || part.type === 'file');
  if (attached.length === 0) return null;
  return (
    <ul className="chips" aria-label="Attachments">
      {attached.map((part, index) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: a sent message's parts never change; one file may be there twice
        <li key={`${part.fileId}-${index}`} data-file-id={part.fileId}>
          {part.type === 'image' ? <Thumbnail part={part} /> : <span className="chip">{part.filename}</span>}
        </li>
      ))}
    </ul>
  );
}

/** A send refused for one of its files (400 on `parts[i].fileId`), said with the file's name; null for any other. */
export function attachmentError(
  error: unknown,
  files: readonly Attached[],
  withText: boolean,
): { key: number; message: string } | null {
  if (!(error instanceof ApiError) || error.status !== 400) return null;
  const index = failedPart(error.param, withText);
  const file = index === null ? undefined : files[index];
  if (file === undefined || error.param === null) return null;
  const rest = error.message.startsWith(error.param)
    ? error.message.slice(error.param.length).replace(/^[:\s]+/, '')
    : error.message;
  return { key: file.key, message: `${file.name}: ${rest}` };
}
