/**
 * The one parser of `application/json` bodies. An empty (or all-whitespace) body is no body: the official
 * clients send that Content-Type on every call, also to routes that take no body, so such a route must not
 * answer invalid_json. Nesting deeper than MAX_JSON_DEPTH is refused before parsing, so that nothing recursive
 * afterwards (hashing, serialising, storing) can overflow the stack. Parsing itself is Fastify's, which also
 * refuses `__proto__` and `constructor.prototype` keys.
 */
import type { FastifyRequest } from 'fastify';
import { validationError } from '../errors/app-error.ts';

/** Arrays and objects inside one another; far above what any route's body needs. */
export const MAX_JSON_DEPTH = 64;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** True when the JSON text nests arrays and objects deeper than `max`; strings are skipped, malformed text too. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === BACKSLASH) index++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      depth++;
      if (depth > max) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

type Done = (error: Error | null, body?: unknown) => void;
export type JsonBodyParser = (request: FastifyRequest, body: string, done: Done) => void;

/** Wraps Fastify's JSON parser (`app.getDefaultJsonParser`) with the empty-body and depth rules above. */
export function createJsonBodyParser(parse: JsonBodyParser): JsonBodyParser {
  return (request, body, done) => {
    if (body.trim() === '') {
      done(null, undefined);
      return;
    }
    if (nestsDeeperThan(body, MAX_JSON_DEPTH)) {
      done(validationError('body', `body must not nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep`));
      return;
    }
    parse(request, body, done);
  };
}
