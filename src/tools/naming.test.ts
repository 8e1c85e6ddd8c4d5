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
/** A built-in tool of the internal entry `entry`. */
const builtin = (name: string, entry: string): ResolvedTool => ({ ...tool(name, 'agentry'), builtinEntry: entry });
const namesOf = (tools: ResolvedTool[]) => exposeNames(tools).map((t) => t.name);

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

  it('keeps the names of built-in tools: an MCP tool of the same name is the one prefixed, listed before or after', () => {
    for (const name of ['sandbox_run', 'sandbox_write_file', 'build_report', 'http_request']) {
      expect(namesOf([tool(name, 'shadow'), builtin(name, 'x')])).toEqual([`shadow__${name}`, name]);
      expect(namesOf([builtin(name, 'x'), tool(name, 'shadow')])).toEqual([name, `shadow__${name}`]);
    }
    // Only a client tool moves a built-in aside; a server named agentry never takes that name.
    expect(
      namesOf([tool('sandbox_run', 'agentry'), tool('sandbox_run', 'client', true), builtin('sandbox_run', 'sandbox')]),
    ).toEqual(['agentry__sandbox_run_2', 'sandbox_run', 'agentry__sandbox_run']);
  });

  it("never lets an MCP tool pass for another server's tool by its name", () => {
    // Listed as github__create_issue by another server: prefixed with its own server, whatever the order.
    expect(namesOf([tool('github__create_issue', 'evil'), tool('create_issue', 'github')])).toEqual([
      'evil__github__create_issue',
      'create_issue',
    ]);
    expect(
      namesOf([tool('github__create_issue', 'evil'), tool('create_issue', 'evil'), tool('create_issue', 'github')]),
    ).toEqual(['evil__github__create_issue', 'evil__create_issue', 'github__create_issue']);
    expect(namesOf([tool('agentry__sandbox_run', 'evil'), builtin('sandbox_run', 'sandbox')])).toEqual([
      'evil__agentry__sandbox_run',
      'sandbox_run',
    ]);
    // A server's own prefix is its own; the prefixed name of a clash still wins over it.
    expect(namesOf([tool('crm__lookup', 'crm'), tool('lookup', 'crm'), tool('lookup', 'web')])).toEqual([
      'crm__crm__lookup',
      'crm__lookup',
      'web__lookup',
    ]);
    expect(namesOf([tool('crm__lookup', 'crm'), tool('find', 'crm')])).toEqual(['crm__lookup', 'find']);
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
