/**
 * Skills (the agent's `skills` entries, and the `skills` internal entry, which adds no tool of its own): each
 * skill is one tool source that offers no tools but contributes a paragraph to the agent's instructions, its
 * name and description from SKILL.md and where its files are in the workspace, and copies those files there
 * (skill-sources.ts). A skill that cannot be had (not in the local root, cloning not configured or not allowed
 * by the policy) is an accepted-message warning; one that fails to load at turn time (a clone that fails, a
 * repository without that folder) is left out of that turn with a warning event. Neither fails the turn.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkspacePathError } from '../sandbox/sandbox-errors.ts';
import type { SandboxRuntime } from '../sandbox/sandbox-runtime.ts';
import type { Skill } from '../tool-config.ts';
import type { ToolProvider, ToolSource } from '../types.ts';
import { internalEntry } from './define-tool.ts';
import { type SkillSources, skillLabel, workspaceSkillPath } from './skill-sources.ts';

export interface SkillsProviderDeps {
  sources: SkillSources;
  /** Owns the workspaces the skill files are copied into. */
  runtime: SandboxRuntime;
}

/** Copies the skill's files into the workspace unless its SKILL.md is already there. */
async function ensureInWorkspace(deps: SkillsProviderDeps, workspace: string, dir: string, skill: Skill) {
  const target = workspaceSkillPath(skill);
  const present = await deps.runtime.readFile(workspace, `${target}/SKILL.md`).then(
    () => true,
    (error: unknown) => {
      if (error instanceof WorkspacePathError && error.code === 'not_found') return false;
      throw error;
    },
  );
  if (present) return;
  for (const file of await deps.sources.files(dir)) {
    if (file.bytes > deps.runtime.fileLimits.writeBytes) continue;
    await deps.runtime.writeFile(workspace, `${target}/${file.path}`, await readFile(join(dir, file.path)));
  }
}

function instructionFor(skill: Skill, info: { name: string; description: string }): string {
  const where = workspaceSkillPath(skill);
  const description = info.description === '' ? '' : `: ${info.description}`;
  return `Skill "${info.name}"${description} (its instructions are in ${where}/SKILL.md in your workspace; read them before doing what the skill covers)`;
}

export function createSkillsProvider(deps: SkillsProviderDeps): ToolProvider {
  return {
    name: 'skills',
    claims: internalEntry('skills'),
    sourcesBeyondEntries: (agent) => agent.skills.length > 0,
    async sources(agent, _claimed, scope) {
      return Promise.all(
        agent.skills.map(async (skill): Promise<ToolSource> => {
          const label = skillLabel(skill);
          const location = await deps.sources.locate(skill, agent.networkPolicy);
          if (!location.found) {
            return {
              label,
              available: false,
              warning: { code: 'skill_unavailable', message: `${label} ${location.reason}; the turn runs without it` },
            };
          }
          return {
            label,
            available: true,
            async load(signal) {
              const dir = await deps.sources.materialize(location, skill, signal);
              const info = await deps.sources.readInfo(dir, skill, signal);
              const workspace = await deps.runtime.workspaceFor(scope.orgId, scope.agentId);
              await ensureInWorkspace(deps, workspace, dir, skill);
              return { tools: [], instructions: instructionFor(skill, info) };
            },
          };
        }),
      );
    },
  };
}
