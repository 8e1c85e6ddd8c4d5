import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createWorkspaceQuota, fileSizeWithin, MIB, quotaFull } from './workspace-quota.ts';
import { createUsageThreads, type WorkspaceUsage } from './workspace-usage.ts';

const usage = (bytes: number, incomplete: WorkspaceUsage['incomplete'] = null): WorkspaceUsage => ({
  bytes,
  entries: 1,
  incomplete,
  stripped: [],
  reowned: 0,
  durationMs: 0,
});

describe('the workspace quota', () => {
  it("lowers a command's file-size limit to the room left, never below 1 KiB", () => {
    expect(fileSizeWithin(1024 * MIB, 100 * MIB, usage(30 * MIB))).toBe(70 * MIB);
    expect(fileSizeWithin(10 * MIB, 100 * MIB, usage(30 * MIB))).toBe(10 * MIB);
    expect(fileSizeWithin(10 * MIB, 100 * MIB, usage(120 * MIB))).toBe(1024);
    expect(fileSizeWithin(10 * MIB, 100 * MIB, usage(MIB, 'entries'))).toBe(1024);
  });

  it('counts a workspace at its quota, or one it could not measure, as full', () => {
    expect(quotaFull(usage(100), 100)).toBe(true);
    expect(quotaFull(usage(99), 100)).toBe(false);
    expect(quotaFull(usage(1, 'depth'), 100)).toBe(true);
    expect(quotaFull(usage(1, 'time'), 100)).toBe(false); // out of time: what it saw is what counts
  });

  it('measures a workspace once, then keeps the measurement current with the writes it is told of', async () => {
    const root = mkdtempSync(join(tmpdir(), 'agentry-quota-'));
    const threads = createUsageThreads();
    try {
      expect(() => createWorkspaceQuota(1000, threads)).toThrow(/at least 1 MiB/);
      const quota = createWorkspaceQuota(MIB, threads);
      writeFileSync(join(root, 'a'), Buffer.alloc(100_000));
      const first = await quota.usage(root);
      expect(first.bytes).toBeGreaterThanOrEqual(100_000);
      writeFileSync(join(root, 'b'), Buffer.alloc(100_000)); // not told: the remembered figure stands
      expect((await quota.usage(root)).bytes).toBe(first.bytes);
      quota.grew(root, 100_000);
      expect((await quota.usage(root)).bytes).toBe(first.bytes + 100_000);
      quota.record(root, usage(5));
      expect((await quota.usage(root)).bytes).toBe(5);
    } finally {
      await threads.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
