import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.ts';
import { SPAN_BLOCK } from '../domain/runs/spans.ts';
import type { RunRow, SpanRow } from '../storage/schema.ts';
import { exportRunSpans, providerOf } from './run-export.ts';
import { createTracing } from './tracing.ts';

const run: RunRow = {
  id: 'run-1',
  org_id: 'org',
  agent_id: 'agent-1',
  session_id: 'session-1',
  message_id: 'message-1',
  source: 'responses',
  status: 'completed',
  model: 'openai/gpt-5.4-mini',
  agent_version: 3,
  input_preview: 'What is my order status?',
  output_preview: 'Shipped.',
  input_tokens: 30,
  cached_input_tokens: 0,
  output_tokens: 12,
  cost_micros: 1500,
  error: null,
  created_at: 1_000,
  started_at: 1_010,
  completed_at: 1_900,
  exported_at: null,
  warnings: null,
  api_key_id: null,
  end_user: null,
};

const span = (fields: Partial<SpanRow>): SpanRow => ({
  id: 'span',
  org_id: 'org',
  run_id: 'run-1',
  parent_id: null,
  kind: 'agent_step',
  name: 'step 1',
  status: 'completed',
  seq: SPAN_BLOCK,
  started_at: 1_010,
  ended_at: 1_900,
  input_preview: null,
  output_preview: null,
  input_tokens: 0,
  output_tokens: 0,
  cost_micros: 0,
  attributes: '{}',
  ...fields,
});

const spans: SpanRow[] = [
  span({}),
  span({
    kind: 'model_call',
    name: 'openai/gpt-5.4-mini',
    seq: SPAN_BLOCK + 1,
    ended_at: 1_200,
    input_preview: 'What is my order status?',
    output_preview: 'tool calls: lookup',
    input_tokens: 30,
    output_tokens: 12,
    attributes: JSON.stringify({ finish: 'tool_calls' }),
  }),
  span({
    kind: 'tool_call',
    name: 'lookup',
    seq: SPAN_BLOCK + 2,
    status: 'failed',
    started_at: 1_200,
    ended_at: 1_400,
    input_preview: '{"order":"A1"}',
    output_preview: 'Error: not found',
    attributes: JSON.stringify({ call_id: 'call_1', kind: 'server', server: 'shop', tool: 'lookup', attempts: 1 }),
  }),
];

function tracingWith(capture: boolean) {
  const exporter = new InMemorySpanExporter();
  const config = loadConfig({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1',
    ...(capture ? { AGENTRY_OTEL_CAPTURE_CONTENT: 'true' } : {}),
  }).tracing;
  if (config === null) throw new Error('tracing not configured');
  return { exporter, tracing: createTracing(config, exporter) };
}

describe('exporting a run', () => {
  it('names providers as the GenAI conventions do', () => {
    expect(providerOf('openai/gpt-5')).toBe('openai');
    expect(providerOf('scripted')).toBe('agentry');
    expect(providerOf('ollama/llama3.3')).toBe('ollama');
  });

  it('leaves content out by default and adds the previews when opted in', async () => {
    for (const capture of [false, true]) {
      const { exporter, tracing } = tracingWith(capture);
      expect(exportRunSpans(tracing, { run, agentName: 'Shop', traceparent: null, spans })).toBe(3);
      await tracing.forceFlush();
      const finished = exporter.getFinishedSpans();
      const byName = new Map(finished.map((item) => [item.name, item]));
      const invoke = byName.get('invoke_agent Shop');
      const chat = byName.get('chat gpt-5.4-mini');
      const tool = byName.get('execute_tool lookup');
      expect(invoke?.attributes['gen_ai.agent.version']).toBe('3');
      expect(chat?.attributes['gen_ai.provider.name']).toBe('openai');
      expect(chat?.attributes['gen_ai.response.finish_reasons']).toEqual(['tool_calls']);
      expect(tool?.attributes['error.type']).toBe('tool_error');
      expect(tool?.attributes['agentry.tool.attempts']).toBe(1);
      expect(tool?.startTime).toEqual([1, 200_000_000]);
      expect(tool?.endTime).toEqual([1, 400_000_000]);
      if (capture) {
        expect(JSON.parse(String(invoke?.attributes['gen_ai.input.messages']))).toEqual([
          { role: 'user', parts: [{ type: 'text', content: 'What is my order status?' }] },
        ]);
        expect(tool?.attributes['gen_ai.tool.call.arguments']).toBe('{"order":"A1"}');
        expect(tool?.attributes['gen_ai.tool.call.result']).toBe('Error: not found');
      } else {
        for (const item of finished) {
          expect(item.attributes['gen_ai.input.messages']).toBeUndefined();
          expect(item.attributes['gen_ai.output.messages']).toBeUndefined();
          expect(item.attributes['gen_ai.tool.call.result']).toBeUndefined();
        }
      }
      await tracing.shutdown();
    }
  });

  it('records nothing below a caller that did not sample the trace', async () => {
    const { exporter, tracing } = tracingWith(false);
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00';
    expect(exportRunSpans(tracing, { run, agentName: 'Shop', traceparent, spans })).toBe(0);
    await tracing.forceFlush();
    expect(exporter.getFinishedSpans()).toHaveLength(0);
    await tracing.shutdown();
  });
});

describe('tracing configuration', () => {
  it('reads the standard variables and refuses what it cannot do, naming the variable', () => {
    expect(loadConfig({}).tracing).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeNull();
    expect(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).tracing,
    ).toBeNull();
    const config = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=a%20b,team=ops',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,service.name=from-attributes',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    }).tracing;
    expect(config).toMatchObject({
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: { 'x-api-key': 'a b', team: 'ops' },
      serviceName: 'from-attributes',
      resourceAttributes: { 'deployment.environment': 'prod' },
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
      captureContent: false,
    });
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/ingest',
      }).tracing?.url,
    ).toBe('https://traces.example/ingest');
    const bad: [Record<string, string>, RegExp][] = [
      [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /OTEL_EXPORTER_OTLP_PROTOCOL.*grpc/],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' }, /OTEL_EXPORTER_OTLP_ENDPOINT/],
      [{ OTEL_TRACES_SAMPLER_ARG: '2' }, /OTEL_TRACES_SAMPLER_ARG/],
      [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER/],
      [{ OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }, /OTEL_EXPORTER_OTLP_HEADERS/],
      [{ AGENTRY_METRICS: 'yes' }, /AGENTRY_METRICS/],
    ];
    for (const [env, message] of bad) {
      expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', ...env }), JSON.stringify(env)).toThrow(
        message,
      );
    }
    expect(loadConfig({ AGENTRY_METRICS_TOKEN: 't' }).metrics).toEqual({ enabled: true, token: 't' });
  });
});
