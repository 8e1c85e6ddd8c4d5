/**
 * The Responses stream events Agentry sends (reference/responses-wire.md section 3), declared once as JSON Schemas:
 * the producer (response-stream.ts) is typed by them, the OpenAPI document shows them as the `ResponseStreamEvent`
 * component, and a test validates streamed events against them. The wire form carries `sequence_number`, which the
 * framing adds; the producer's form is the same union without it.
 *
 * Output items and the Response are typed precisely (openai-items.ts, response-view.ts) while their schemas name
 * only their identifying fields: their full shapes are those of GET /v1/responses/{id}.
 */
import { type Static, type TProperties, Type } from 'typebox';
import type { OpenAIItem } from './openai-items.ts';
import type { ResponseObject } from './response-view.ts';

const OUTPUT_ITEM_TYPES = [
  'message',
  'function_call',
  'function_call_output',
  'mcp_call',
  'mcp_approval_request',
  'mcp_approval_response',
  'mcp_elicitation_request',
  'mcp_list_tools',
] as const satisfies readonly OpenAIItem['type'][];

type FunctionCallItem = Extract<OpenAIItem, { type: 'function_call' }>;
/** An output item as the stream shows it: a function call is announced `in_progress`, then done `completed`. */
export type StreamedItem = OpenAIItem | (Omit<FunctionCallItem, 'status'> & { status: 'in_progress' });

const OutputItem = Type.Unsafe<StreamedItem>({
  type: 'object',
  description:
    'An output item (message, function_call, mcp_call, mcp_list_tools, mcp_approval_request, mcp_elicitation_request)',
  required: ['id', 'type'],
  properties: { id: { type: 'string' }, type: { type: 'string', enum: [...OUTPUT_ITEM_TYPES] } },
});

const ResponseSnapshot = Type.Unsafe<ResponseObject>({
  type: 'object',
  description: 'The Response as GET /v1/responses/{id} returns it (in progress: without output yet)',
  required: ['id', 'object', 'status', 'output'],
  properties: {
    id: { type: 'string' },
    object: { type: 'string', enum: ['response'] },
    status: { type: 'string' },
    output: { type: 'array' },
  },
});

/** Always empty: annotations and logprobs are not produced. (Not `Empty`: its `items: []` is not valid
 * JSON Schema 2020-12, the dialect of OpenAPI 3.1.) */
const Empty = Type.Unsafe<[]>({ type: 'array', maxItems: 0 });

const OutputText = Type.Object({
  type: Type.Literal('output_text'),
  text: Type.String(),
  annotations: Empty,
  logprobs: Empty,
});

const event = <K extends string, P extends TProperties>(type: K, properties: P) =>
  Type.Object({ type: Type.Literal(type), sequence_number: Type.Integer({ minimum: 0 }), ...properties });

const ofItem = { item_id: Type.String(), output_index: Type.Integer({ minimum: 0 }) };
const ofPart = { ...ofItem, content_index: Type.Integer({ minimum: 0 }) };

const vendor = <K extends string>(type: K) =>
  event(`response.agentry_tool_call.${type}` as const, {
    response_id: Type.String(),
    run_id: Type.String(),
    step: Type.Union([Type.Integer(), Type.Null()], { description: 'The turn step of the call; null in a replay' }),
    source_type: Type.Union([
      Type.Literal('tool_server'),
      Type.Literal('tool_client'),
      Type.Literal('tool_ask_user_question'),
      Type.Literal('tool_approval'),
    ]),
    data: Type.Record(Type.String(), Type.Unknown(), { description: 'call_id, name and what the event reports' }),
  });

export const ResponseStreamEventSchema = Type.Union(
  [
    event('response.created', { response: ResponseSnapshot }),
    event('response.in_progress', { response: ResponseSnapshot }),
    event('response.output_item.added', { output_index: Type.Integer({ minimum: 0 }), item: OutputItem }),
    event('response.output_item.done', { output_index: Type.Integer({ minimum: 0 }), item: OutputItem }),
    event('response.content_part.added', { ...ofPart, part: OutputText }),
    event('response.content_part.done', { ...ofPart, part: OutputText }),
    event('response.output_text.delta', { ...ofPart, delta: Type.String(), logprobs: Empty }),
    event('response.output_text.done', { ...ofPart, text: Type.String(), logprobs: Empty }),
    event('response.function_call_arguments.delta', { ...ofItem, delta: Type.String() }),
    event('response.function_call_arguments.done', { ...ofItem, name: Type.String(), arguments: Type.String() }),
    event('response.mcp_list_tools.in_progress', ofItem),
    event('response.mcp_list_tools.completed', ofItem),
    event('response.mcp_call.in_progress', ofItem),
    event('response.mcp_call_arguments.delta', { ...ofItem, delta: Type.String() }),
    event('response.mcp_call_arguments.done', { ...ofItem, arguments: Type.String() }),
    event('response.mcp_call.completed', ofItem),
    event('response.mcp_call.failed', ofItem),
    vendor('started'),
    vendor('progress'),
    vendor('action_required'),
    vendor('failed'),
    event('response.completed', { response: ResponseSnapshot }),
    event('response.failed', { response: ResponseSnapshot }),
    event('response.incomplete', { response: ResponseSnapshot }),
  ],
  {
    $id: 'ResponseStreamEvent',
    description:
      'One event of a streamed Response (POST /v1/responses with stream: true), sent as `event: <type>` and `data: <this JSON>`; the stream ends with `data: [DONE]`. response.agentry_tool_call.* are left out when the client asks for standard events only',
  },
);

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A Responses stream event as the wire carries it. */
export type ResponseStreamWireEvent = Static<typeof ResponseStreamEventSchema>;
/** One Responses stream event: its `type` and fields, without the `sequence_number` the framing adds. */
export type ResponseStreamEvent = DistributiveOmit<ResponseStreamWireEvent, 'sequence_number'>;
export type ResponseStreamEventType = ResponseStreamEvent['type'];
/** The fields of the event of type `K`, without its `type`. */
export type ResponseEventFields<K extends ResponseStreamEventType> = Omit<
  Extract<ResponseStreamEvent, { type: K }>,
  'type'
>;
/** The `source_type` of a vendor event: the tool kind the call belongs to, or the flow that needs the caller. */
export type VendorEventSource = Extract<
  ResponseStreamEvent,
  { type: 'response.agentry_tool_call.started' }
>['source_type'];
