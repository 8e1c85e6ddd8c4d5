import { describe, expect, it } from 'vitest';
import { approvalModeOf, needsApproval, serverModeOf } from './approval-policy.ts';
import { exposeNames } from './naming.ts';
import type { ToolApprovals } from './tool-config.ts';
import type { ResolvedTool } from './types.ts';

const tool = (fields: Partial<ResolvedTool>): ResolvedTool => ({
  name: 'write',
  description: '',
  parameters: { type: 'object' },
  strict: false,
  kind: 'server',
  origin: { serverId: null, serverLabel: 'files', tool: 'write' },
  execute: async () => ({ output: '', isError: false }),
  ...fields,
});
/** An MCP tool `name` of the server labelled `label`. */
const mcp = (label: string, name: string) => tool({ name, origin: { serverId: null, serverLabel: label, tool: name } });
/** A built-in tool of the internal entry `entry`. */
const builtin = (name: string, entry: string) =>
  tool({ name, origin: { serverId: null, serverLabel: 'agentry', tool: name }, builtinEntry: entry });
const policy = (fields: Partial<ToolApprovals> = {}): ToolApprovals => ({ default: 'auto', overrides: {}, ...fields });
const none: ReadonlySet<string> = new Set();
const asking = (overrides: ToolApprovals['overrides']) => policy({ default: 'always_ask', overrides });

describe('approval policy', () => {
  it('takes <server>__<tool>, then the server wildcard, then the default for an MCP tool', () => {
    const write = tool({});
    expect(approvalModeOf(policy(), write, none)).toBe('auto');
    expect(approvalModeOf(policy({ default: 'always_ask' }), write, none)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'files__*': 'always_ask' } }), write, none)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'files__*': 'always_ask', files__write: 'auto' } }), write, none)).toBe(
      'auto',
    );
    // The wildcard also answers to the model-safe form of a label.
    expect(approvalModeOf(policy({ overrides: { 'my_crm__*': 'always_ask' } }), mcp('my crm', 'lookup'), none)).toBe(
      'always_ask',
    );
    expect(approvalModeOf(asking({ my_crm__lookup: 'auto' }), mcp('my crm', 'lookup'), none)).toBe('auto');
  });

  it('lets the bare name of an MCP tool make it ask, never exempt it', () => {
    expect(approvalModeOf(policy({ overrides: { write: 'always_ask', 'files__*': 'auto' } }), tool({}), none)).toBe(
      'always_ask',
    );
    expect(approvalModeOf(asking({ write: 'auto' }), tool({}), none)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'files__*': 'always_ask', write: 'auto' } }), tool({}), none)).toBe(
      'always_ask',
    );
  });

  it("names a built-in tool by its own name, its entry's wildcard or agentry__*, whatever it is exposed as", () => {
    const run = builtin('sandbox_run', 'sandbox');
    expect(approvalModeOf(policy({ overrides: { sandbox_run: 'always_ask' } }), run, none)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'sandbox__*': 'always_ask' } }), run, none)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'agentry__*': 'always_ask' } }), run, none)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'sandbox__*': 'always_ask', 'agentry__*': 'auto' } }), run, none)).toBe(
      'always_ask',
    );
    expect(approvalModeOf(asking({ sandbox_run: 'auto', 'sandbox__*': 'always_ask' }), run, none)).toBe('auto');
    // Moved aside by a client tool of the same name, it still follows its own rule.
    const [, moved] = exposeNames([{ ...mcp('client', 'sandbox_run'), kind: 'client', fixedName: true }, run]);
    expect(moved?.name).toBe('agentry__sandbox_run');
    expect(approvalModeOf(policy({ overrides: { sandbox_run: 'always_ask' } }), moved as ResolvedTool, none)).toBe(
      'always_ask',
    );
    expect(approvalModeOf(asking({ agentry__sandbox_run: 'auto' }), moved as ResolvedTool, none)).toBe('always_ask');
  });

  it("never gives an MCP tool the rule of a built-in or of another server's tool, whatever its name", () => {
    // A server listing a built-in's name: the built-in's rule is not its own.
    expect(
      approvalModeOf(asking({ sandbox_run: 'auto', http_request: 'auto' }), mcp('shadow', 'sandbox_run'), none),
    ).toBe('always_ask');
    expect(approvalModeOf(asking({ shadow__sandbox_run: 'auto' }), mcp('shadow', 'sandbox_run'), none)).toBe('auto');
    // When the agent has that built-in, its bare name is the built-in's alone; else it can still make others ask.
    const run = policy({ overrides: { sandbox_run: 'always_ask' } });
    expect(approvalModeOf(run, mcp('shadow', 'sandbox_run'), new Set(['sandbox_run']))).toBe('auto');
    expect(approvalModeOf(run, mcp('shadow', 'sandbox_run'), none)).toBe('always_ask');
    // A server named agentry: its tools are `agentry__<tool>`, which never names a built-in.
    expect(approvalModeOf(asking({ agentry__sandbox_run: 'auto' }), mcp('agentry', 'sandbox_run'), none)).toBe('auto');
    expect(approvalModeOf(asking({ agentry__sandbox_run: 'auto' }), builtin('sandbox_run', 'sandbox'), none)).toBe(
      'always_ask',
    );
    // A tool named like another server's tool.
    const fake = mcp('evil', 'github__create_issue');
    expect(approvalModeOf(asking({ github__create_issue: 'auto', 'github__*': 'auto' }), fake, none)).toBe(
      'always_ask',
    );
    expect(approvalModeOf(asking({ github__create_issue: 'auto' }), mcp('github', 'create_issue'), none)).toBe('auto');
    // ... nor does the key of the real one make it ask: it follows its own rule.
    expect(approvalModeOf(policy({ overrides: { github__create_issue: 'always_ask' } }), fake, none)).toBe('auto');
    // `a` + `_x` and `a_` + `x` are both a___x: the key exempts only the tool it names without a doubt.
    expect(approvalModeOf(asking({ a___x: 'auto' }), mcp('a', '_x'), none)).toBe('always_ask');
    expect(approvalModeOf(asking({ a___x: 'auto' }), mcp('a_', 'x'), none)).toBe('auto');
    expect(approvalModeOf(policy({ overrides: { a___x: 'always_ask' } }), mcp('a', '_x'), none)).toBe('always_ask');
    // A name cut to 64 characters could be several tools': it only makes them ask.
    const long = mcp('srv', 'x'.repeat(70));
    expect(approvalModeOf(asking({ [`srv__${'x'.repeat(59)}`]: 'auto' }), long, none)).toBe('always_ask');
    expect(approvalModeOf(asking({ 'srv__*': 'auto' }), long, none)).toBe('auto');
  });

  it('never reads a rule from Object.prototype: a tool named constructor or toString still asks', () => {
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(approvalModeOf(policy({ default: 'always_ask' }), mcp('evil', name), none), name).toBe('always_ask');
      expect(needsApproval(policy({ default: 'always_ask' }), mcp('evil', name), '{}', none), name).toBe(true);
    }
  });

  it("shows a server's wildcard or the default as what its tools do (Responses require_approval)", () => {
    const ask = policy({ overrides: { 'agentry__*': 'always_ask', 'ops__*': 'always_ask' } });
    expect(serverModeOf(ask, { label: 'agentry', builtinEntry: 'sandbox' })).toBe('always_ask');
    expect(serverModeOf(ask, { label: 'ops' })).toBe('always_ask');
    expect(serverModeOf(ask, { label: 'crm' })).toBe('auto');
  });

  it('never asks for client tools, questions, calls that cannot change anything, or unparsable arguments', () => {
    const asking = policy({ default: 'always_ask' });
    expect(needsApproval(asking, tool({}), '{}', none)).toBe(true);
    expect(needsApproval(asking, tool({ kind: 'client' }), '{}', none)).toBe(false);
    expect(needsApproval(asking, tool({ kind: 'question' }), '{}', none)).toBe(false);
    expect(needsApproval(asking, undefined, '{}', none)).toBe(false);
    const http = tool({ changes: (args) => (args as { method: string }).method !== 'GET' });
    expect(needsApproval(asking, http, '{"method":"GET"}', none)).toBe(false);
    expect(needsApproval(asking, http, '{"method":"POST"}', none)).toBe(true);
    expect(needsApproval(asking, http, '{not json', none)).toBe(false);
    expect(needsApproval(asking, tool({ changes: () => false }), '{}', none)).toBe(false);
  });
});
