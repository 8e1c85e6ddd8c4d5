/**
 * When a task stops moving by itself, apart from the SDK's types (task-view.ts), so the A2A service can be built
 * at start-up without loading the SDK.
 */
import type { MessageStatus } from '../turns/message-types.ts';

/** Terminal and interrupted states end a stream (A2A 1.0, section 3.1.2). */
export function endsStream(status: MessageStatus): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled' || status === 'requires_action';
}
