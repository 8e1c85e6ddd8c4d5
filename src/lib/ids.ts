import { randomFillSync, randomInt } from 'node:crypto';

let lastMillis = 0;
let counter = 0;

/** Random bytes are drawn from the CSPRNG a pool at a time: one system call per 512 ids instead of one each. */
const POOL_BYTES = 8192;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

/** 16 fresh random bytes, copied out of the pool (never handed out twice). */
function random16(): Buffer {
  if (poolOffset + 16 > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = Buffer.from(pool.subarray(poolOffset, poolOffset + 16));
  poolOffset += 16;
  return bytes;
}

/**
 * A UUID version 7: 48 bits of Unix milliseconds, a 12-bit counter that rises within one millisecond, then 62
 * random bits. Ids made by one process sort in creation order, so lists ordered by (created_at, id) keep the order
 * things were created in even when several share a millisecond.
 */
export function newId(): string {
  let millis = Date.now();
  if (millis > lastMillis) {
    lastMillis = millis;
    const seed = random16();
    counter = (((seed[0] ?? 0) << 8) | (seed[1] ?? 0)) & 0x3ff;
  } else {
    millis = lastMillis;
    counter += 1;
    if (counter > 0xfff) {
      lastMillis += 1;
      millis = lastMillis;
      counter = 0;
    }
  }
  const bytes = random16();
  bytes.writeUIntBE(millis, 0, 6);
  bytes[6] = 0x70 | (counter >> 8);
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Uniformly random base62 text from the CSPRNG (randomInt rejects biased draws). */
export function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}
