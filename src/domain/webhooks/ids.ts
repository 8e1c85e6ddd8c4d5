/**
 * Public identifiers of webhook objects: a type prefix and 32 hex digits. Endpoint and delivery ids start with
 * the creation time and a per-process sequence, so that sorting by (created_at, id) follows creation order even
 * within one millisecond (list pages, event history).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { newId } from '../../lib/ids.ts';

let lastMillis = 0;
let sequence = 0;

/** 12 hex digits of milliseconds, 4 of sequence, 16 random: ordered in creation order within a process. */
function ordered(): string {
  const now = Date.now();
  if (now > lastMillis) {
    lastMillis = now;
    // A random start keeps two processes creating ids in the same millisecond from colliding on the sequence.
    sequence = randomInt(0x8000);
  } else {
    sequence = (sequence + 1) & 0xffff;
  }
  return `${lastMillis.toString(16).padStart(12, '0')}${sequence.toString(16).padStart(4, '0')}${randomBytes(8).toString('hex')}`;
}

export const newEndpointId = (): string => `we_${ordered()}`;
export const newDeliveryId = (): string => `dlv_${ordered()}`;
export const newAttemptId = (): string => `att_${ordered()}`;
/** The same form as the outbox's event ids (domain/outbox.ts). */
export const newEventId = (): string => `evt_${newId().replaceAll('-', '')}`;
