/**
 * Stored JSON read through guards: the helper's errors name the column, and the guards accept the shapes the
 * writers store (copied from them, including shapes older versions wrote) while rejecting wrong ones.
 */
import { describe, expect, it } from 'vitest';
import { thrownBy } from '../../test/helpers/thrown.ts';
import { isStoredAgentConfig, type StoredAgentConfig } from '../domain/agents/agent-types.ts';
import { type ItemContent, isItemContent } from '../domain/turns/items.ts';
import { isMessageOptions, type MessageOptions } from '../domain/turns/message-options.ts';
import { isMessageError, isTextParts } from '../domain/turns/message-types.ts';
import { JsonColumnError, parseJsonColumn } from './json-column.ts';

/** What a guard sees: the value after a trip through the column. */
const stored = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

describe('parseJsonColumn', () => {
  it('returns a value that passes the guard', () => {
    const text = JSON.stringify({ code: 'model_error', message: 'the provider answered 500' });
    expect(parseJsonColumn(text, isMessageError, 'messages.error')).toEqual({
      code: 'model_error',
      message: 'the provider answered 500',
    });
    expect(parseJsonColumn('[{"type":"text","text":"hi"}]', isTextParts, 'messages.parts')).toEqual([
      { type: 'text', text: 'hi' },
    ]);
  });

  it('throws an error naming the column when the value has the wrong shape', () => {
    const error = thrownBy(() => parseJsonColumn('{"code":"x"}', isMessageError, 'messages.error'));
    expect(error).toBeInstanceOf(JsonColumnError);
    expect(error).toMatchObject({
      name: 'JsonColumnError',
      column: 'messages.error',
      message: 'messages.error holds a value of the wrong shape',
    });
    expect(() => parseJsonColumn('"hi"', isTextParts, 'messages.parts')).toThrow(
      'messages.parts holds a value of the wrong shape',
    );
  });

  it('throws an error naming the column when the text is not JSON', () => {
    const error = thrownBy(() => parseJsonColumn('{"code":', isMessageError, 'runs.error'));
    expect(error).toBeInstanceOf(JsonColumnError);
    expect(error).toMatchObject({
      column: 'runs.error',
      message: 'runs.error holds invalid JSON',
      cause: expect.any(SyntaxError),
    });
  });
});

describe('isItemContent', () => {
  // One of each variant as its writer stores it (engine/step.ts, engine/tool-calls.ts, turns/accept.ts,
  // approvals/approvals.ts, turns/client-outputs.ts, turns/message-service.ts).
  const variants: Record<string, ItemContent> = {
    user: { type: 'user_message', text: 'What is the weather in Paris?' },
    userWithFiles: {
      type: 'user_message',
      text: 'Describe these',
      attachments: [
        { kind: 'image', fileId: '0190f0c2-9f3e-7b51-a7c3-1b2c3d4e5f60', detail: 'low' },
        { kind: 'file', fileId: '0190f0c2-9f3e-7b51-a7c3-1b2c3d4e5f61' },
      ],
    },
    assistant: { type: 'assistant_message', text: 'It is sunny.' },
    serverCall: {
      type: 'function_call',
      name: 'docs__search',
      arguments: '{"query":"pricing"}',
      kind: 'server',
      actionId: 0,
      server: { id: '0190f0c2-9f3e-7b51-a7c3-1b2c3d4e5f62', label: 'docs', tool: 'search' },
      approval: { id: 'mcpr_0190f0c29f3e7b51a7c31b2c3d4e5f63', expiresAt: 1_790_000_000_000 },
    },
    builtinCallWaitingForever: {
      type: 'function_call',
      name: 'http_client',
      arguments: '{}',
      kind: 'server',
      actionId: 1,
      server: { id: null, label: 'agentry', tool: 'http_client' },
      approval: { id: 'mcpr_0190f0c29f3e7b51a7c31b2c3d4e5f64', expiresAt: null },
    },
    // Written before tool servers existed: no `server`.
    olderCall: { type: 'function_call', name: 'ask_user_question', arguments: '{}', kind: 'question', actionId: 2 },
    replayedClientCall: { type: 'function_call', name: 'get_weather', arguments: '{}', kind: 'client', actionId: -1 },
    decision: { type: 'approval_decision', approvalId: 'mcpr_1', approved: false, reason: null, by: 'timeout' },
    decisionWithReason: {
      type: 'approval_decision',
      approvalId: 'mcpr_2',
      approved: true,
      reason: 'looks safe',
      by: 'responses',
    },
    toolList: {
      type: 'tool_list',
      server: { id: null, label: 'agentry' },
      tools: [
        { name: 'http_client', description: null, inputSchema: { type: 'object', properties: {} } },
        { name: 'sandbox', description: 'Runs code', inputSchema: { type: 'object' } },
      ],
    },
    serverOutput: {
      type: 'function_call_output',
      name: 'docs__search',
      output: '3 hits',
      isError: false,
      source: 'server',
    },
    clientOutput: { type: 'function_call_output', name: '', output: '21C', isError: false, source: 'client' },
    answer: {
      type: 'function_call_output',
      name: 'ask_user_question',
      output: '{"choice":"yes"}',
      isError: false,
      source: 'answer',
      answer: { choice: 'yes' },
    },
    cancelled: { type: 'function_call_output', name: 'slow', output: 'cancelled', isError: true, source: 'cancelled' },
  };

  it.each(Object.entries(variants))('accepts a stored %s item', (_name, content) => {
    expect(isItemContent(stored(content))).toBe(true);
  });

  const wrong: [string, unknown][] = [
    ['null', null],
    ['an array', [{ type: 'assistant_message', text: 'hi' }]],
    ['no type', { text: 'hi' }],
    ['an unknown type', { type: 'reasoning', text: 'hmm' }],
    ['user_message without text', { type: 'user_message' }],
    [
      'an attachment of an unknown kind',
      { type: 'user_message', text: '', attachments: [{ kind: 'audio', fileId: 'f' }] },
    ],
    ['assistant_message with numeric text', { type: 'assistant_message', text: 42 }],
    ['function_call without actionId', { type: 'function_call', name: 'f', arguments: '{}', kind: 'client' }],
    [
      'function_call of an unknown kind',
      { type: 'function_call', name: 'f', arguments: '{}', kind: 'robot', actionId: 0 },
    ],
    [
      'function_call with object arguments',
      { type: 'function_call', name: 'f', arguments: { city: 'Paris' }, kind: 'client', actionId: 0 },
    ],
    [
      'function_call whose server lacks its label',
      {
        type: 'function_call',
        name: 'f',
        arguments: '{}',
        kind: 'server',
        actionId: 0,
        server: { id: null, tool: 'f' },
      },
    ],
    [
      'function_call whose approval expiry is a date string',
      {
        type: 'function_call',
        name: 'f',
        arguments: '{}',
        kind: 'server',
        actionId: 0,
        approval: { id: 'mcpr_1', expiresAt: '2026-01-01' },
      },
    ],
    [
      'approval_decision by someone unknown',
      { type: 'approval_decision', approvalId: 'a', approved: true, reason: null, by: 'admin' },
    ],
    ['approval_decision without approved', { type: 'approval_decision', approvalId: 'a', reason: null, by: 'answer' }],
    ['tool_list without tools', { type: 'tool_list', server: { id: null, label: 'agentry' } }],
    [
      'tool_list with a tool lacking its schema',
      { type: 'tool_list', server: { id: null, label: 'agentry' }, tools: [{ name: 't', description: null }] },
    ],
    [
      'function_call_output of an unknown source',
      { type: 'function_call_output', name: 'f', output: 'x', isError: false, source: 'model' },
    ],
    [
      'function_call_output without isError',
      { type: 'function_call_output', name: 'f', output: 'x', source: 'server' },
    ],
  ];

  it.each(wrong)('rejects %s', (_name, value) => {
    expect(isItemContent(value)).toBe(false);
  });
});

describe('isMessageOptions', () => {
  const accepted: Record<string, MessageOptions> = {
    // POST /v1/responses in strict mode (responses/response-service.ts with response-request.ts's defaults).
    strictResponse: {
      echo: {
        metadata: {},
        toolChoice: 'auto',
        temperature: null,
        topP: null,
        parallelToolCalls: true,
        previousResponseId: null,
        tools: [{ type: 'mcp', server_label: 'agentry', allowed_tools: ['http_client'] }],
      },
    },
    // Compatibility mode with function tools, settings and every echoed field.
    compatResponse: {
      instructions: 'Answer in French.',
      tools: [
        {
          name: 'get_weather',
          description: 'Weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
          strict: true,
        },
      ],
      settings: { temperature: 0.2, topP: 1, maxOutputTokens: 256, toolChoice: { name: 'get_weather' } },
      echo: {
        metadata: { customer: 'acme' },
        toolChoice: { type: 'function', name: 'get_weather' },
        temperature: 0.2,
        topP: 1,
        parallelToolCalls: false,
        previousResponseId: 'resp_0190f0c2-9f3e-7b51-a7c3-1b2c3d4e5f60',
        presencePenalty: 0,
        frequencyPenalty: 0,
        topLogprobs: 0,
        maxOutputTokens: 256,
        maxToolCalls: null,
        serviceTier: 'default',
        safetyIdentifier: null,
        promptCacheKey: 'k1',
        reasoning: { effort: null, summary: null },
        tools: [{ type: 'function', name: 'get_weather' }],
      },
    },
    // The older API's run with a model of its own (workflows/workflow-service.ts).
    workflowModel: { model: 'scripted' },
    // Written before previous_response_id and the later sampling fields were echoed.
    olderEcho: { echo: { metadata: {}, toolChoice: 'auto', temperature: null, topP: null, parallelToolCalls: true } },
    settingsOnly: { settings: { toolChoice: 'required' } },
    empty: {},
  };

  it.each(Object.entries(accepted))('accepts stored %s options', (_name, options) => {
    expect(isMessageOptions(stored(options))).toBe(true);
  });

  const echo = { metadata: {}, toolChoice: 'auto', temperature: null, topP: null, parallelToolCalls: true };
  const tool = { name: 'f', description: 'd', parameters: { type: 'object' }, strict: false };
  const wrong: [string, unknown][] = [
    ['null', null],
    ['a string', 'gpt-4o'],
    ['an array', [{ model: 'scripted' }]],
    ['numeric instructions', { instructions: 7 }],
    ['tools that are not an array', { tools: tool }],
    ['a tool without strict', { tools: [{ name: 'f', description: 'd', parameters: { type: 'object' } }] }],
    ['a tool with string parameters', { tools: [{ ...tool, parameters: '{}' }] }],
    ['a tool choice outside the set', { settings: { toolChoice: 'any' } }],
    ['a string temperature', { settings: { temperature: '0.2' } }],
    ['echo without metadata', { echo: { ...echo, metadata: undefined } }],
    ['echo metadata with a number', { echo: { ...echo, metadata: { n: 1 } } }],
    ['echo without parallelToolCalls', { echo: { ...echo, parallelToolCalls: undefined } }],
    ['echo reasoning as a string', { echo: { ...echo, reasoning: 'high' } }],
    ['a numeric model', { model: 4 }],
  ];

  it.each(wrong)('rejects %s', (_name, value) => {
    expect(isMessageOptions(stored(value))).toBe(false);
  });
});

describe('isStoredAgentConfig', () => {
  const config: StoredAgentConfig = {
    name: 'support',
    description: null,
    instructions: 'Be kind.',
    model: 'scripted',
    maxSteps: 32,
    mcpServers: [
      { kind: 'internal', name: 'http_client' },
      { kind: 'composio', toolkit: 'github' },
      { kind: 'custom', serverId: '0190f0c2-9f3e-7b51-a7c3-1b2c3d4e5f60', name: 'docs' },
      { type: 'url', name: 'docs', url: 'https://mcp.example.com/mcp' },
    ],
    clientTools: [{ type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: false }],
    skills: [{ repo: 'acme/skills', path: 'pdf' }],
    networkPolicy: {
      allow_network_egress: true,
      domain_allowlist: 'package_managers_only',
      additional_allowed_domains: ['example.com'],
      allow_public_traffic: false,
    },
    toolApprovals: { default: 'auto', overrides: { docs__search: 'always_ask' }, timeoutSeconds: 600 },
  };

  it('accepts a version as stored, and one written before approvals existed', () => {
    expect(isStoredAgentConfig(stored(config))).toBe(true);
    const { toolApprovals: _, ...older } = config;
    expect(isStoredAgentConfig(stored({ ...older, networkPolicy: null }))).toBe(true);
  });

  it('rejects a version naming an unknown internal tool or approval mode', () => {
    expect(isStoredAgentConfig(stored({ ...config, mcpServers: [{ kind: 'internal', name: 'teleport' }] }))).toBe(
      false,
    );
    expect(isStoredAgentConfig(stored({ ...config, toolApprovals: { default: 'never', overrides: {} } }))).toBe(false);
    expect(isStoredAgentConfig(stored({ ...config, maxSteps: '32' }))).toBe(false);
  });
});
