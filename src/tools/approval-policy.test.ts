import { describe, expect, it } from 'vitest';
import type { ToolApprovals } from '../domain/agents/agent-types.ts';
import { approvalModeOf, needsApproval } from './approval-policy.ts';
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
const policy = (fields: Partial<ToolApprovals> = {}): ToolApprovals => ({ default: 'auto', overrides: {}, ...fields });

describe('approval policy', () => {
  it('takes the exact name, then the server wildcard, then the default', () => {
    const write = tool({});
    expect(approvalModeOf(policy(), write)).toBe('auto');
    expect(approvalModeOf(policy({ default: 'always_ask' }), write)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'files__*': 'always_ask' } }), write)).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'files__*': 'always_ask', write: 'auto' } }), write)).toBe('auto');
    // A built-in tool's wildcard names its internal entry as well as its label.
    const run = tool({ name: 'sandbox_run', origin: { serverId: null, serverLabel: 'agentry', tool: 'sandbox_run' } });
    expect(
      approvalModeOf(policy({ overrides: { 'sandbox__*': 'always_ask' } }), { ...run, approvalServer: 'sandbox' }),
    ).toBe('always_ask');
    expect(approvalModeOf(policy({ overrides: { 'sandbox__*': 'always_ask' } }), run)).toBe('auto');
  });

  it('never asks for client tools, questions, calls that cannot change anything, or unparsable arguments', () => {
    const asking = policy({ default: 'always_ask' });
    expect(needsApproval(asking, tool({}), '{}')).toBe(true);
    expect(needsApproval(asking, tool({ kind: 'client' }), '{}')).toBe(false);
    expect(needsApproval(asking, tool({ kind: 'question' }), '{}')).toBe(false);
    expect(needsApproval(asking, undefined, '{}')).toBe(false);
    const http = tool({ changes: (args) => (args as { method: string }).method !== 'GET' });
    expect(needsApproval(asking, http, '{"method":"GET"}')).toBe(false);
    expect(needsApproval(asking, http, '{"method":"POST"}')).toBe(true);
    expect(needsApproval(asking, http, '{not json')).toBe(false);
    expect(needsApproval(asking, tool({ changes: () => false }), '{}')).toBe(false);
  });
});
