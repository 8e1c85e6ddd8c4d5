/** /console/files: uploaded files, newest first; upload, download and delete. */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useRef, useState } from 'react';
import { useSearchParams } from 'react-router';
import { api, toApiError, unwrap } from '../api/client.ts';
import type { FileObject } from '../api/types.ts';
import { readKey } from '../auth/key-store.ts';
import { useCan } from '../auth/session.tsx';
import { saveFile } from '../components/save-file.ts';
import { usePageTitle } from '../components/title.ts';
import {
  ConfirmButton,
  ErrorNote,
  Field,
  type FieldErrors,
  formChecks,
  Id,
  Loading,
  Pager,
  TableBox,
  useCursorPages,
  useFieldErrors,
  When,
} from '../components/ui.tsx';

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** Downloads with the key in a header (never in a URL), then hands the bytes to the browser as a file. */
async function download(file: FileObject): Promise<void> {
  const response = await fetch(`/v1/files/${file.id}/content`, {
    headers: { authorization: `Bearer ${readKey() ?? ''}` },
  });
  if (!response.ok) throw toApiError(response.status, await response.json().catch(() => null));
  saveFile(await response.blob(), file.filename);
}

/** What the upload form shows wrong before sending. */
function checkUpload(chosen: { file: File | null; purpose: string }): FieldErrors {
  const check = formChecks();
  if (chosen.file === null) check.add('file', 'Choose a file to upload');
  check.required('purpose', 'Purpose', chosen.purpose);
  return check.errors;
}

export default function FilesPage() {
  usePageTitle('Files');
  const canWrite = useCan('files:write');
  const queryClient = useQueryClient();
  const [params, setParams] = useSearchParams();
  const after = params.get('after') ?? '';
  const pages = useCursorPages(after, (next) => setParams(next === '' ? {} : { after: next }));
  const input = useRef<HTMLInputElement>(null);
  const [purpose, setPurpose] = useState('user_data');
  const files = useQuery({
    queryKey: ['files', after],
    queryFn: () =>
      unwrap(api.GET('/v1/files', { params: { query: { limit: 20, ...(after === '' ? {} : { after }) } } })),
  });
  const upload = useMutation({
    mutationFn: async () => {
      const chosen = input.current?.files?.[0];
      if (chosen === undefined) throw new Error('Choose a file to upload');
      const body = new FormData();
      body.append('purpose', purpose);
      body.append('file', chosen);
      const response = await fetch('/v1/files', {
        method: 'POST',
        body,
        headers: { authorization: `Bearer ${readKey() ?? ''}` },
      });
      const answer: unknown = await response.json().catch(() => null);
      if (!response.ok) throw toApiError(response.status, answer);
      return answer;
    },
    onSuccess: async () => {
      if (input.current !== null) input.current.value = '';
      await queryClient.invalidateQueries({ queryKey: ['files'] });
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/v1/files/{id}', { params: { path: { id } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['files'] }),
  });
  const fetchFile = useMutation({ mutationFn: download });
  const fields = useFieldErrors(checkUpload, (key) => (key === 'file' ? 'File' : key === 'purpose' ? 'Purpose' : null));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const chosen = { file: input.current?.files?.[0] ?? null, purpose };
    if (fields.ready(chosen)) upload.mutate(undefined, { onError: fields.failed });
  };
  return (
    <section>
      <h1>Files</h1>
      {canWrite ? (
        <form onSubmit={submit} noValidate className="card row" aria-label="Upload a file">
          <Field label="File" error={fields.errorOf('file')}>
            {(props) => <input {...props} ref={input} type="file" />}
          </Field>
          <Field label="Purpose" error={fields.errorOf('purpose')}>
            {(props) => <input {...props} value={purpose} onChange={(e) => setPurpose(e.target.value)} />}
          </Field>
          <button type="submit" className="primary" disabled={upload.isPending}>
            Upload
          </button>
        </form>
      ) : null}
      <ErrorNote error={(fields.any ? null : upload.error) ?? remove.error ?? fetchFile.error ?? files.error} />
      {files.data === undefined ? (
        files.isPending ? (
          <Loading what="files" />
        ) : null
      ) : files.data.data.length === 0 ? (
        <p className="muted">No files.</p>
      ) : (
        <>
          <TableBox label="Files">
            <table>
              <caption className="sr-only">Files</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Type</th>
                  <th scope="col" className="num">
                    Size
                  </th>
                  <th scope="col">Purpose</th>
                  <th scope="col">Uploaded</th>
                  <th scope="col">Id</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {files.data.data.map((file) => (
                  <tr key={file.id}>
                    <td>{file.filename}</td>
                    <td>
                      <code>{file.media_type}</code>
                    </td>
                    <td className="num">{size(file.bytes)}</td>
                    <td>{file.purpose}</td>
                    <td>
                      <When at={file.created_at} />
                    </td>
                    <td>
                      <Id value={file.id} what="file" />
                    </td>
                    <td className="actions">
                      <button
                        type="button"
                        onClick={() => fetchFile.mutate(file)}
                        aria-label={`Download ${file.filename}`}
                      >
                        Download
                      </button>
                      {canWrite ? (
                        <ConfirmButton
                          label="Delete"
                          name={`Delete ${file.filename}`}
                          consequence={`Delete ${file.filename}? Its content is gone for good; agents and responses that name it can no longer read it.`}
                          confirm={`Confirm delete of ${file.filename}`}
                          onConfirm={() => remove.mutate(file.id)}
                          pending={remove.isPending}
                          danger
                        />
                      ) : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableBox>
          <Pager
            summary={pages.summary(files.data.data.length, 'files')}
            onPrevious={pages.onPrevious}
            onNext={files.data.has_more ? pages.onNext(files.data.last_id) : null}
          />
        </>
      )}
    </section>
  );
}
