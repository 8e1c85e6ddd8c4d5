/**
 * The `@a2a-js/sdk` side of the A2A routes (http/routes/a2a.ts): the protocol's JSON forms, errors, JSON-RPC
 * transport and our request handler over them. Loaded on the first A2A request, so a server that never serves A2A
 * never loads the SDK (test/startup-imports.test.ts).
 */
export {
  AgentCard,
  ListTaskPushNotificationConfigsResponse,
  ListTasksResponse,
  SendMessageRequest,
  SendMessageResponse,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
  taskStateFromJSON,
} from '@a2a-js/sdk';
export { A2AError, RequestMalformedError, restStatusFor, toJsonRpcError, toRestErrorBody } from '@a2a-js/sdk/errors';
export { JsonRpcTransportHandler, ServerCallContext } from '@a2a-js/sdk/server';
export { createA2aHandler, protocolError, SIGNAL_KEY } from '../../domain/a2a/a2a-handler.ts';
