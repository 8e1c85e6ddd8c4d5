import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import type { ToolCallContext } from '../types.ts';
import { argumentProblem, builtinTool } from './define-tool.ts';

const schema = Type.Object(
  { path: Type.String({ minLength: 1 }), depth: Type.Optional(Type.Integer({ minimum: 1 })) },
  { additionalProperties: false },
);

describe('built-in tool arguments', () => {
  it('names the argument that is wrong', () => {
    expect(argumentProblem(schema, {})).toBe('missing argument path');
    expect(argumentProblem(schema, { path: 3 })).toBe('path must be string');
    expect(argumentProblem(schema, { path: 'a', depth: 0 })).toMatch(/^depth must be >= 1/);
    expect(argumentProblem(schema, { path: 'a', extra: 1 })).toBe('unknown argument extra');
    expect(argumentProblem(schema, 'text')).toBe('the arguments must be object');
  });

  it('offers a plain JSON Schema and never runs with bad arguments', async () => {
    let ran = 0;
    const tool = builtinTool({
      name: 't',
      server: 'test',
      description: 'd',
      parameters: schema,
      run: async (args) => {
        ran += 1;
        return { output: args.path, isError: false };
      },
    });
    expect(JSON.parse(JSON.stringify(tool.parameters))).toEqual({
      type: 'object',
      required: ['path'],
      properties: { path: { type: 'string', minLength: 1 }, depth: { type: 'integer', minimum: 1 } },
      additionalProperties: false,
    });
    expect(Object.getOwnPropertySymbols(tool.parameters)).toEqual([]);
    const context: ToolCallContext = {
      signal: new AbortController().signal,
      deadline: Date.now() + 1000,
      orgId: 'o',
      agentId: 'a',
      sessionId: 's',
      endUser: null,
      messageId: 'm',
      runId: 'r',
      callId: 'c',
      egress: { policy: null, allowInsecureDestinations: false },
      progress: () => undefined,
      meta: {},
    };
    expect(await tool.execute?.({ path: 'a' }, context)).toEqual({ output: 'a', isError: false });
    expect(await tool.execute?.({ path: 7 }, context)).toEqual({
      output: 'Error: invalid arguments: path must be string',
      isError: true,
    });
    expect(ran).toBe(1);
  });
});
