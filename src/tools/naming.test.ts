import { describe, expect, it } from 'vitest';
import { exposeNames, safeToolName } from './naming.ts';
import type { ResolvedTool } from './types.ts';

const tool = (name: string, server: string, fixedName = false): ResolvedTool => ({
  name,
  description: '',
  parameters: { type: 'object', properties: {} },
  strict: false,
  kind: fixedName ? 'client' : 'server',
  origin: { serverId: null, serverLabel: server, tool: name },
  ...(fixedName ? { fixedName } : {}),
});

describe('exposed tool names', () => {
  it('keeps a name no other tool has', () => {
    expect(exposeNames([tool('search', 'docs'), tool('add', 'math')]).map((t) => t.name)).toEqual(['search', 'add']);
  });

  it('prefixes every tool of a clashing name with its server', () => {
    const names = exposeNames([tool('search', 'docs'), tool('search', 'web'), tool('add', 'math')]).map((t) => t.name);
    expect(names).toEqual(['docs__search', 'web__search', 'add']);
  });

  it('renames the server tool, never the client tool, on a clash with a client tool', () => {
    const names = exposeNames([tool('lookup', 'client', true), tool('lookup', 'crm')]).map((t) => t.name);
    expect(names).toEqual(['lookup', 'crm__lookup']);
  });

  it('makes names model-safe and at most 64 characters, and unique even after cutting', () => {
    expect(safeToolName('my.tool name')).toBe('my_tool_name');
    expect(safeToolName('')).toBe('tool');
    const long = 'x'.repeat(80);
    const names = exposeNames([tool(long, 'a'), tool(long, 'a')]).map((t) => t.name);
    expect(names[0]).toHaveLength(64);
    expect(new Set(names).size).toBe(2);
    for (const name of names) expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
  });
});
