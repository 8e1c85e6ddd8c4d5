import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SANDBOX_LIMITS, resolveLimits, runTimeout } from '../../config/sandbox-limits.ts';
import { ConfigError, loadConfig } from '../../config.ts';
import { OutputCapture } from './output-capture.ts';

describe('sandbox limits', () => {
  it('start from the defaults and take overrides', () => {
    expect(resolveLimits()).toEqual(DEFAULT_SANDBOX_LIMITS);
    expect(resolveLimits({ processes: 64 }, { cpuSeconds: 5 })).toMatchObject({ processes: 64, cpuSeconds: 5 });
    expect(resolveLimits({ timeoutMs: 900_000 }).timeoutMs).toBe(DEFAULT_SANDBOX_LIMITS.maxTimeoutMs);
  });

  it('refuse values that would break every command or cannot hold', () => {
    expect(() => resolveLimits({ processes: 2 })).toThrow(/processes/);
    expect(() => resolveLimits({ memoryBytes: 1.5 })).toThrow(/memoryBytes/);
    expect(() => resolveLimits({ outputBytes: 10_000, outputKillBytes: 5000 })).toThrow(/outputKillBytes/);
  });

  it('cap a caller-given timeout', () => {
    const limits = resolveLimits({ timeoutMs: 1000, maxTimeoutMs: 5000 });
    expect(runTimeout(limits, undefined)).toBe(1000);
    expect(runTimeout(limits, 3000)).toBe(3000);
    expect(runTimeout(limits, 60_000)).toBe(5000);
    expect(runTimeout(limits, -5)).toBe(1);
  });
});

describe('sandbox configuration (AGENTRY_SANDBOX_*)', () => {
  it('leaves everything to the defaults when unset', () => {
    expect(loadConfig({}).sandbox).toEqual({
      bwrapPath: null,
      user: null,
      uidBase: 2_000_000_000,
      workspaceQuotaBytes: 2048 * 1024 * 1024,
      egressPorts: null,
      limits: {},
      readBytes: 1024 * 1024,
      writeBytes: 10 * 1024 * 1024,
    });
  });

  it('reads every variable', () => {
    const sandbox = loadConfig({
      AGENTRY_SANDBOX_BWRAP: '/opt/bin/bwrap',
      AGENTRY_SANDBOX_UID: '2000',
      AGENTRY_SANDBOX_GID: '2001',
      AGENTRY_SANDBOX_EGRESS_PORTS: '80, 443,8443',
      AGENTRY_SANDBOX_PROCESSES: '128',
      AGENTRY_SANDBOX_MEMORY_BYTES: '536870912',
      AGENTRY_SANDBOX_OUTPUT_BYTES: '65536',
      AGENTRY_SANDBOX_READ_BYTES: '4096',
      AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB: '100',
    }).sandbox;
    expect(sandbox).toEqual({
      bwrapPath: '/opt/bin/bwrap',
      user: { uid: 2000, gid: 2001 },
      uidBase: 2_000_000_000,
      workspaceQuotaBytes: 100 * 1024 * 1024,
      egressPorts: [80, 443, 8443],
      limits: { processes: 128, memoryBytes: 536870912, outputBytes: 65536 },
      readBytes: 4096,
      writeBytes: 10 * 1024 * 1024,
    });
    expect(loadConfig({ AGENTRY_SANDBOX_UID_BASE: '3000000' }).sandbox.uidBase).toBe(3_000_000);
  });

  it('docs/configuration.md states each limit with its default', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'configuration.md'), 'utf8');
    const variables = Object.entries(DEFAULT_SANDBOX_LIMITS);
    for (const [name, value] of variables) {
      const variable = `AGENTRY_SANDBOX_${name.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}`;
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${variable}\``));
      expect(row, variable).toContain(`| \`${value}\``);
    }
  });

  it('names the variable of a bad value', () => {
    const failure = (env: Record<string, string>) => {
      try {
        loadConfig(env);
        return null;
      } catch (error) {
        return error instanceof ConfigError ? error.variable : String(error);
      }
    };
    expect(failure({ AGENTRY_SANDBOX_PROCESSES: '2' })).toBe('AGENTRY_SANDBOX_PROCESSES');
    expect(failure({ AGENTRY_SANDBOX_CPU_SECONDS: 'lots' })).toBe('AGENTRY_SANDBOX_CPU_SECONDS');
    expect(failure({ AGENTRY_SANDBOX_UID: '0', AGENTRY_SANDBOX_GID: '0' })).toBe('AGENTRY_SANDBOX_UID');
    expect(failure({ AGENTRY_SANDBOX_UID: '2000' })).toBe('AGENTRY_SANDBOX_GID');
    expect(
      failure({ AGENTRY_SANDBOX_UID: '2000', AGENTRY_SANDBOX_GID: '2000', AGENTRY_SANDBOX_UID_BASE: '5000' }),
    ).toBe('AGENTRY_SANDBOX_UID_BASE');
    expect(failure({ AGENTRY_SANDBOX_UID_BASE: '0' })).toBe('AGENTRY_SANDBOX_UID_BASE');
    expect(failure({ AGENTRY_SANDBOX_UID_BASE: '4000000000' })).toBe('AGENTRY_SANDBOX_UID_BASE');
    expect(failure({ AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB: '0' })).toBe('AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB');
    expect(failure({ AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB: '2GB' })).toBe('AGENTRY_SANDBOX_WORKSPACE_QUOTA_MB');
    expect(failure({ AGENTRY_SANDBOX_EGRESS_PORTS: '80,http' })).toBe('AGENTRY_SANDBOX_EGRESS_PORTS');
    expect(failure({ AGENTRY_SANDBOX_OUTPUT_BYTES: '100000', AGENTRY_SANDBOX_OUTPUT_KILL_BYTES: '5000' })).toBe(
      'AGENTRY_SANDBOX_OUTPUT_KILL_BYTES',
    );
  });
});

describe('output capture', () => {
  it('keeps the first bytes of both streams under one budget and says what it dropped', () => {
    let killed = 0;
    const capture = new OutputCapture(10, 30, () => {
      killed += 1;
    });
    capture.add('stdout', Buffer.from('12345678'));
    capture.add('stderr', Buffer.from('abcdef'));
    expect(capture.text('stdout')).toBe('12345678');
    expect(capture.text('stderr')).toBe('ab\n[output truncated: 4 more bytes of stderr were not kept]\n');
    expect(capture.truncated).toBe(true);
    expect(killed).toBe(0);
    capture.add('stdout', Buffer.alloc(20));
    expect(killed).toBe(1);
    capture.add('stdout', Buffer.alloc(20));
    expect(killed).toBe(1);
    expect(capture.totalBytes).toBe(54);
  });
});
