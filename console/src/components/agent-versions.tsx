/**
 * The Versions section of the agent page: every version of the agent, newest first, with who made it, when, and
 * how many of the latest runs used it; what each changed from the one before (GET …/versions/{n}?diff_from=n-1);
 * and restoring one as a new version, after a confirmation that says what it does (If-Match on the version shown,
 * so a change made meanwhile is a conflict, not overwritten).
 */
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiError, api, unwrap } from '../api/client.ts';
import type { Agent } from '../api/types.ts';
import { ErrorNote, When } from './ui.tsx';

const PAGE = 20;

/** A value of a change, as short JSON. */
function shown(value: unknown): string {
  if (value === undefined) return '(none)';
  const text = JSON.stringify(value);
  return text.length > 400 ? `${text.slice(0, 400)}…` : text;
}

function VersionDiff({ agentId, version }: { agentId: string; version: number }) {
  const diff = useQuery({
    queryKey: ['agent-version-diff', agentId, version],
    queryFn: () =>
      unwrap(
        api.GET('/v1/agents/{id}/versions/{version}', {
          params: { path: { id: agentId, version }, query: { diff_from: version - 1 } },
        }),
      ),
  });
  if (diff.error !== null) return <ErrorNote error={diff.error} />;
  const changes = diff.data?.diff?.changes;
  if (changes === undefined) return <p className="muted small">Loading the changes…</p>;
  if (changes.length === 0) return <p className="muted small">Same configuration as v{version - 1}.</p>;
  return (
    <table className="diff" aria-label={`Changes in v${version}`}>
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Before (v{version - 1})</th>
          <th scope="col">After (v{version})</th>
        </tr>
      </thead>
      <tbody>
        {changes.map((change) => (
          <tr key={change.path}>
            <td>
              <code>{change.path}</code>
            </td>
            <td className="diff-before">
              <code>{shown(change.before)}</code>
            </td>
            <td className="diff-after">
              <code>{shown(change.after)}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function RestoreVersion({ agent, version }: { agent: Agent; version: number }) {
  const [confirming, setConfirming] = useState(false);
  const queryClient = useQueryClient();
  const restore = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/agents/{id}/versions/{version}/restore', {
          params: { path: { id: agent.id, version }, header: { 'if-match': `"${agent.version}"` } },
        }),
      ),
    onSuccess: async (answer) => {
      setConfirming(false);
      queryClient.setQueryData(['agent', agent.id], answer);
      await queryClient.invalidateQueries({ queryKey: ['agents'] });
      await queryClient.invalidateQueries({ queryKey: ['agent-versions', agent.id] });
    },
  });
  const conflict = restore.error instanceof ApiError && restore.error.code === 'version_conflict';
  return (
    <>
      {confirming ? (
        <fieldset className="row plain" aria-label={`Restore v${version}`}>
          <span>
            Save v{version}'s configuration as v{agent.version + 1}? Sessions that follow the latest version run it from
            their next turn; pinned sessions keep their version, and every version stays in this list.
          </span>
          <button type="button" className="primary" onClick={() => restore.mutate()} disabled={restore.isPending}>
            Confirm restore
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </fieldset>
      ) : (
        <button type="button" onClick={() => setConfirming(true)}>
          Restore v{version}
        </button>
      )}
      <ErrorNote error={restore.error}>
        {conflict ? <p>The agent changed meanwhile: reload the page to see its latest version, then restore.</p> : null}
      </ErrorNote>
    </>
  );
}

export function AgentVersions({ agent, canWrite }: { agent: Agent; canWrite: boolean }) {
  const [opened, setOpened] = useState<number | null>(null);
  const versions = useInfiniteQuery({
    queryKey: ['agent-versions', agent.id, agent.version],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET('/v1/agents/{id}/versions', {
          params: {
            path: { id: agent.id },
            query: pageParam === undefined ? { limit: PAGE } : { limit: PAGE, cursor: pageParam },
          },
        }),
      ),
    getNextPageParam: (last) => (last.has_more && last.next_cursor !== null ? last.next_cursor : undefined),
  });
  const runs = useQuery({
    queryKey: ['runs', { agent: agent.id, limit: 50 }],
    queryFn: () => unwrap(api.GET('/v1/runs', { params: { query: { agent_id: agent.id, limit: 50 } } })),
  });
  const counts = new Map<number, number>();
  for (const run of runs.data?.data ?? []) {
    if (run.agent_version !== null) counts.set(run.agent_version, (counts.get(run.agent_version) ?? 0) + 1);
  }
  const list = versions.data?.pages.flatMap((page) => page.data) ?? [];
  return (
    <section aria-labelledby="versions">
      <h2 id="versions">Versions</h2>
      <p>
        Every change is saved as a new version; turns already running keep theirs, and sessions pinned to a version run
        it whatever changes later. Runs: how many of the agent's latest 50 runs used the version.
      </p>
      <ErrorNote error={versions.error} />
      <ol className="versions" aria-label="Versions">
        {list.map((entry) => (
          <li key={entry.version} className="card">
            <div className="row">
              <strong>v{entry.version}</strong>
              {entry.version === agent.version ? <span className="badge">current</span> : null}
              <span className="muted small">
                {entry.actor === null ? 'author not recorded' : `by ${entry.actor}`} · <When at={entry.createdAt} />
                {' · '}
                {counts.get(entry.version) ?? 0} runs
              </span>
              {entry.version > 1 ? (
                <button
                  type="button"
                  aria-expanded={opened === entry.version}
                  onClick={() => setOpened(opened === entry.version ? null : entry.version)}
                >
                  {opened === entry.version ? 'Hide changes' : 'Show changes'}
                </button>
              ) : (
                <span className="muted small">first version</span>
              )}
              {canWrite && entry.version !== agent.version ? (
                <RestoreVersion agent={agent} version={entry.version} />
              ) : null}
            </div>
            {opened === entry.version ? <VersionDiff agentId={agent.id} version={entry.version} /> : null}
          </li>
        ))}
      </ol>
      {versions.hasNextPage ? (
        <button type="button" onClick={() => versions.fetchNextPage()} disabled={versions.isFetchingNextPage}>
          Older versions
        </button>
      ) : null}
    </section>
  );
}
