/** Time comes from an injected clock so that tests can drive it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export function iso(millis: number): string {
  return new Date(millis).toISOString();
}

export function unixSeconds(millis: number): number {
  return Math.floor(millis / 1000);
}
