import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Executor } from '../../storage/db.ts';
import { createSandboxProvider } from '../builtin/sandbox-tools.ts';
import { createToolRegistry } from '../registry.ts';
import { type AgentToolConfig, DEFAULT_TOOL_APPROVALS } from '../tool-config.ts';
import { createDeferredSandboxRuntime } from './deferred-runtime.ts';
import type { SandboxRuntimeOptions } from './sandbox-runtime.ts';

let dataDir: string | null = null;
afterEach(() => {
  if (dataDir !== null) rmSync(dataDir, { recursive: true, force: true });
  dataDir = null;
});

function options(extra: Partial<SandboxRuntimeOptions> = {}): SandboxRuntimeOptions {
  dataDir = mkdtempSync(join(tmpdir(), 'agentry-deferred-sandbox-'));
  return {
    dataDir,
    logger: pino({ level: 'silent' }),
    allowInsecureDestinations: false,
    projectIdOf: async () => 1,
    detection: { available: false, reason: 'no bubblewrap in this test', hint: 'none' },
    quotaBytes: 8 * 1024 * 1024,
    fileLimits: { readBytes: 100 },
    ...extra,
  };
}

describe('createDeferredSandboxRuntime', () => {
  it('knows its limits at once, says "still being detected" until it is, then what was detected', async () => {
    const { runtime, ready } = createDeferredSandboxRuntime(options());
    expect(runtime.quotaBytes).toBe(8 * 1024 * 1024);
    expect(runtime.fileLimits.readBytes).toBe(100);
    expect(runtime.available()).toMatchObject({ available: false, reason: 'the sandbox is still being detected' });
    expect(runtime.activeRuns()).toBe(0);
    await expect(runtime.detected()).resolves.toMatchObject({ reason: 'no bubblewrap in this test' });
    await ready;
    expect(runtime.available()).toEqual({ available: false, reason: 'no bubblewrap in this test', hint: 'none' });
    await runtime.close();
  });

  it('lets the sandbox tools listed before the detection wait for it, not report it missing', async () => {
    const { runtime, ready } = createDeferredSandboxRuntime(options());
    const registry = createToolRegistry([createSandboxProvider(runtime)]);
    const agent: AgentToolConfig = {
      mcpServers: [{ kind: 'internal', name: 'sandbox' }],
      clientTools: [],
      skills: [],
      networkPolicy: null,
      toolApprovals: DEFAULT_TOOL_APPROVALS,
    };
    const warnings = registry.warnings(agent, { orgId: 'org1', agentId: 'agent1', db: {} as Executor });
    expect(runtime.available()).toMatchObject({ reason: 'the sandbox is still being detected' });
    const [warning] = await warnings;
    expect(warning?.message).toContain('(no bubblewrap in this test)');
    await ready;
    await runtime.close();
  });

  it('lets a call made before the detection wait for it', async () => {
    const { runtime, ready } = createDeferredSandboxRuntime(options());
    const workspace = runtime.workspaceFor('org1', 'agent1');
    const written = workspace.then((path) => runtime.writeFile(path, 'notes.md', 'hello'));
    await expect(written).resolves.toMatchObject({ path: 'notes.md', bytes: 5, created: true });
    await ready;
    const file = await runtime.readFile(await workspace, 'notes.md');
    expect(file.content.toString()).toBe('hello');
    await expect(runtime.run({ workspace: await workspace, command: 'true', policy: null })).rejects.toThrow(
      'no bubblewrap in this test',
    );
    await runtime.close();
  });

  it('rejects `ready` and each waiting call when the runtime cannot be made, and closes without it', async () => {
    const { runtime, ready } = createDeferredSandboxRuntime(options({ quotaBytes: 1 }));
    await expect(ready).rejects.toThrow('the workspace quota must be at least 1 MiB');
    await expect(runtime.workspaceFor('org1', 'agent1')).rejects.toThrow('at least 1 MiB');
    await expect(runtime.close()).resolves.toBeUndefined();
  });
});
