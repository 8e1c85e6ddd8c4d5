/**
 * A sandbox runtime handed out while its detection runs. Detecting bubblewrap (its version, a trial run) is mostly
 * waiting on child processes, and on a server's start each of its steps also waits for the main thread, busy
 * building routes and migrating: some 150 ms of a start. A server starts the detection and does not wait for it:
 * each call of the runtime, and `detected()` (which the sandbox tools' listing awaits), waits for the detection;
 * `available()` says the sandbox is still being detected until it is done.
 */
import type { BubblewrapDetection } from './bubblewrap-detect.ts';
import {
  createSandboxRuntime,
  type SandboxRuntime,
  type SandboxRuntimeOptions,
  sandboxSizes,
} from './sandbox-runtime.ts';

const DETECTING: BubblewrapDetection = {
  available: false,
  reason: 'the sandbox is still being detected',
  hint: 'a server detects it as it starts: try again in a moment',
};

export interface DeferredSandboxRuntime {
  runtime: SandboxRuntime;
  /** Settles when the detection has: rejects as createSandboxRuntime would have. */
  ready: Promise<void>;
}

export function createDeferredSandboxRuntime(options: SandboxRuntimeOptions): DeferredSandboxRuntime {
  let detected: SandboxRuntime | null = null;
  const pending = createSandboxRuntime(options);
  const ready = pending.then((runtime) => {
    detected = runtime;
  });
  // Awaited by the caller later; a failure must not count as unhandled before then.
  ready.catch(() => {});
  const runtime: SandboxRuntime = {
    ...sandboxSizes(options),
    available: () => detected?.available() ?? DETECTING,
    detected: async () => (await pending).available(),
    userFor: async (orgId) => (await pending).userFor(orgId),
    workspaceFor: async (orgId, agentId) => (await pending).workspaceFor(orgId, agentId),
    run: async (runOptions) => (await pending).run(runOptions),
    readFile: async (workspace, path, readOptions) => (await pending).readFile(workspace, path, readOptions),
    writeFile: async (workspace, path, content) => (await pending).writeFile(workspace, path, content),
    listFiles: async (workspace, path, listOptions) => (await pending).listFiles(workspace, path, listOptions),
    activeRuns: () => detected?.activeRuns() ?? 0,
    async close() {
      const settled = await pending.catch(() => null);
      await settled?.close();
    },
  };
  return { runtime, ready };
}
