/** The real `@a2a-js/sdk` client as an orchestrator uses it: from an agent's card URL, with the API key. */
import { randomUUID } from 'node:crypto';
import { type Message, type Part, Role, type Task } from '@a2a-js/sdk';
import {
  type Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

export const BINDINGS = ['JSONRPC', 'HTTP+JSON'] as const;
export type Binding = (typeof BINDINGS)[number];

export const text = (value: string): Part => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: '',
});

export function userMessage(value: string | Part[], ids: { contextId?: string; taskId?: string } = {}): Message {
  return {
    messageId: randomUUID(),
    contextId: ids.contextId ?? '',
    taskId: ids.taskId ?? '',
    role: Role.ROLE_USER,
    parts: typeof value === 'string' ? [text(value)] : value,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export const send = (message: Message, returnImmediately = false) => ({
  tenant: '',
  message,
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
  metadata: undefined,
});

export function asTask(result: Message | Task): Task {
  if (!('status' in result)) throw new Error('expected a task, got a message');
  return result;
}

export const partText = (part: Part | undefined): string | undefined =>
  part?.content?.$case === 'text' ? part.content.value : undefined;

/** A fetch that sends this key as a bearer token, as an orchestrator configured with the card's scheme does. */
const withKey =
  (key: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };

export async function clientFor(baseUrl: string, agentId: string, key: string, binding: Binding): Promise<Client> {
  const fetchImpl = withKey(key);
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    preferredTransports: [binding],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  });
  return factory.createFromUrl(`${baseUrl}/v1/agents/${agentId}/.well-known/agent-card.json`, '');
}
