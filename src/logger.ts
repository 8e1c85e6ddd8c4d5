import pino, { type Logger } from 'pino';
import type { Config } from './config.ts';

/** Header and field paths that may carry secrets; pino replaces their values before a line is written. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.api_key',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'apiKey',
  'key',
  'secret',
  'signing_secret',
];

export function createLogger(
  config: Pick<Config, 'logLevel'>,
  destination: NodeJS.WritableStream = process.stdout,
): Logger {
  return pino({ level: config.logLevel, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}
