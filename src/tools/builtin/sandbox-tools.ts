/**
 * The `sandbox` internal tool: `sandbox_run`, `sandbox_read_file`, `sandbox_write_file` and `sandbox_list_files`
 * over the agent's durable workspace, all through the one sandbox runtime the composition root built (see
 * src/tools/sandbox/). Where this host cannot sandbox (no bubblewrap, no user namespaces, a data directory the
 * sandbox user cannot reach), none of the four is offered and every accepted message says why: a command never
 * runs unisolated. A command is killed with everything it started when the call's signal fires (interrupt, end
 * of turn, shutdown); its wall time is the sandbox's own limit, not the generic tool timeout.
 */
import { Type } from 'typebox';
import { runTimeout } from '../../config/sandbox-limits.ts';
import { isStorageFull } from '../../storage/errors.ts';
import { egressEnabled } from '../network/network-policy.ts';
import { SandboxError, WorkspacePathError } from '../sandbox/sandbox-errors.ts';
import type { SandboxRuntime } from '../sandbox/sandbox-runtime.ts';
import type { ResolvedTool, ToolCallContext, ToolOutput, ToolProvider, ToolSource } from '../types.ts';
import { builtinTool, internalEntry, toolError } from './define-tool.ts';
import { describeFile, describeListing, describeRun, runFailed } from './sandbox-output.ts';

export const SANDBOX_TOOL_NAMES = ['sandbox_run', 'sandbox_read_file', 'sandbox_write_file', 'sandbox_list_files'];

/** Past the command's own wall time: setting up the sandbox and its proxy, and tearing them down. */
const SETUP_GRACE_MS = 30_000;
/** How deep a listing goes: enough to see a project's layout in one call. */
const LIST_DEPTH = 3;

const RELATIVE_PATH =
  'Path relative to the workspace root, e.g. "src/main.py" (no leading "/", no ".." segments); the workspace is /workspace inside sandbox_run';

const DISK_FULL_WRITE =
  "the server's disk is full: the file could not be written (it may be left empty or incomplete); try again later";
const DISK_FULL_RUN = "the server's disk is full: the command could not be started; try again later";

/**
 * A refused path (outside the workspace, not found, a directory...) is the model's to correct; a full disk is the
 * server's condition, said plainly rather than as a bare ENOSPC.
 */
async function inWorkspace(run: () => Promise<ToolOutput>): Promise<ToolOutput> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof WorkspacePathError) return toolError(error.message);
    if (isStorageFull(error)) return toolError(DISK_FULL_WRITE);
    throw error;
  }
}

function sandboxTools(runtime: SandboxRuntime): ResolvedTool[] {
  const { limits } = runtime;
  const workspace = (context: ToolCallContext) => runtime.workspaceFor(context.orgId, context.agentId);

  const run = builtinTool({
    name: 'sandbox_run',
    server: 'sandbox',
    description: `Run a shell command (bash -lc) in your sandbox. The working directory is your workspace (/workspace), which keeps its files across sessions. No root, the system is read-only, and network access follows your network policy (through HTTP(S)_PROXY). Default time limit ${limits.timeoutMs} ms, at most ${limits.maxTimeoutMs} ms; the command is killed with every process it started when it runs out. The workspace may hold ${Math.round(runtime.quotaBytes / (1024 * 1024))} MiB; a command that fills it is stopped.`,
    parameters: Type.Object(
      {
        command: Type.String({ minLength: 1, maxLength: 100_000, description: 'The shell command to run' }),
        timeout_ms: Type.Optional(
          Type.Integer({
            minimum: 1,
            maximum: limits.maxTimeoutMs,
            description: `Wall-clock limit in milliseconds (default ${limits.timeoutMs})`,
          }),
        ),
      },
      { additionalProperties: false },
    ),
    timeoutMs: limits.maxTimeoutMs + SETUP_GRACE_MS,
    async run(args, context) {
      const timeoutMs = runTimeout(limits, args.timeout_ms);
      let result: Awaited<ReturnType<SandboxRuntime['run']>>;
      try {
        result = await runtime.run({
          workspace: await workspace(context),
          command: args.command,
          timeoutMs,
          signal: context.signal,
          policy: context.egress.policy,
        });
      } catch (error) {
        if (error instanceof SandboxError) {
          throw new Error(error.hint === null ? error.message : `${error.message} (${error.hint})`, { cause: error });
        }
        if (isStorageFull(error)) throw new Error(DISK_FULL_RUN, { cause: error });
        throw error;
      }
      // Stopped by the turn (interrupt, shutdown) or the call's timeout: the engine says which.
      if (context.signal.aborted) throw context.signal.reason;
      return { output: describeRun(result, limits, timeoutMs), isError: runFailed(result) };
    },
  });

  const readFile = builtinTool({
    name: 'sandbox_read_file',
    server: 'sandbox',
    changes: () => false,
    description: `Read a text file of your workspace (the first ${runtime.fileLimits.readBytes} bytes).`,
    parameters: Type.Object(
      { path: Type.String({ minLength: 1, maxLength: 4096, description: RELATIVE_PATH }) },
      { additionalProperties: false },
    ),
    run: async (args, context) =>
      inWorkspace(async () => ({
        output: describeFile(await runtime.readFile(await workspace(context), args.path)),
        isError: false,
      })),
  });

  const writeFile = builtinTool({
    name: 'sandbox_write_file',
    server: 'sandbox',
    description: `Create or replace a text file in your workspace (missing directories are created; at most ${runtime.fileLimits.writeBytes} bytes).`,
    parameters: Type.Object(
      {
        path: Type.String({ minLength: 1, maxLength: 4096, description: RELATIVE_PATH }),
        content: Type.String({ description: 'The whole new content of the file' }),
      },
      { additionalProperties: false },
    ),
    run: async (args, context) =>
      inWorkspace(async () => {
        const written = await runtime.writeFile(await workspace(context), args.path, args.content);
        return {
          output: `wrote ${written.bytes} bytes to ${written.path} (${written.created ? 'created' : 'replaced'})`,
          isError: false,
        };
      }),
  });

  const listFiles = builtinTool({
    name: 'sandbox_list_files',
    server: 'sandbox',
    changes: () => false,
    description: `List the files of your workspace, or of one of its directories (${LIST_DEPTH} levels deep).`,
    parameters: Type.Object(
      {
        path: Type.Optional(
          Type.String({ maxLength: 4096, description: `${RELATIVE_PATH}; the workspace root when omitted` }),
        ),
      },
      { additionalProperties: false },
    ),
    run: async (args, context) =>
      inWorkspace(async () => ({
        output: describeListing(
          await runtime.listFiles(await workspace(context), args.path ?? '', { maxDepth: LIST_DEPTH }),
        ),
        isError: false,
      })),
  });

  return [run, readFile, writeFile, listFiles];
}

export function createSandboxProvider(runtime: SandboxRuntime): ToolProvider {
  const label = 'internal tool "sandbox"';
  return {
    name: 'sandbox',
    claims: internalEntry('sandbox'),
    async sources(agent, claimed) {
      if (claimed.length === 0) return [];
      // A server's first turns may come while the sandbox is still being detected: they wait for it.
      const host = await runtime.detected();
      if (!host.available) {
        return [
          {
            label,
            available: false,
            warning: {
              code: 'tool_unavailable',
              message: `${label} is configured on the agent but this deployment cannot sandbox commands (${host.reason}), so ${SANDBOX_TOOL_NAMES.join(', ')} are not offered; the operator can fix it: ${host.hint}`,
            },
          },
        ];
      }
      const tools = sandboxTools(runtime);
      const sources: ToolSource[] = [{ label, available: true, load: async () => ({ tools }) }];
      if (host.socat === null && egressEnabled(agent.networkPolicy)) {
        sources.push({
          label: 'sandbox network',
          available: false,
          warning: {
            code: 'sandbox_network_unavailable',
            message:
              "the agent's network policy allows egress, but sandboxed commands have no network here: socat (the sandbox's end of the egress proxy) is not installed on the server",
          },
        });
      }
      return sources;
    },
  };
}
