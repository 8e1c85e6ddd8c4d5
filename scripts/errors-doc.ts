/** Writes docs/errors.md from the error catalog (`npm run docs:errors`); test/errors.test.ts keeps them equal. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { errorCatalog } from '../src/errors/catalog.ts';

const rows = Object.entries(errorCatalog)
  .map(
    ([code, entry]) =>
      `| \`${code}\` | ${entry.status} | ${entry.type} | ${entry.description.replaceAll('|', '\\|')} |`,
  )
  .join('\n');

const text = `# Errors

Every error response has one body shape, on every route:

\`\`\`json
{"error":{"code":"validation_error","message":"maxSteps must be <= 128","type":"invalid_request_error","param":"maxSteps"}}
\`\`\`

- \`code\` is stable and listed below; match on it, not on \`message\`.
- \`param\` names the offending field as you wrote it (\`clientTools[0].name\`, \`limit\`, \`Idempotency-Key\`), or is null.
- \`type\` groups codes the way OpenAI clients expect.
- 5xx bodies never carry internal details; the \`x-request-id\` response header finds the request in the logs.

A failed turn is not an HTTP error: its Message ends \`failed\` with \`error: {code, message}\`, where \`code\` is one of
\`model_error\`, \`model_rate_limited\`, \`model_unavailable\`, \`model_auth_failed\`, \`model_bad_request\`,
\`model_not_configured\`, \`model_timeout\`, \`model_context_exceeded\` (the provider refused the context as longer
than the model's window; see [context.md](context.md)), \`max_steps_exceeded\`, \`invalid_output\` (the final reply did not have the
structure asked for) or \`internal_error\`; an interrupted turn ends
\`cancelled\` with code \`cancelled\`.

## Rules every request is held to

Whatever the route, and with the same answer on SQLite and PostgreSQL:

- **Text must be storable.** A string (a value or a property name, in a body, query or path) containing the NUL
  character \`\\u0000\` or a lone UTF-16 surrogate (\`\\ud800\` without its pair) is a 400 \`validation_error\`
  whose \`param\` names it: \`name must not contain the NUL character (U+0000)\`. PostgreSQL text cannot hold NUL
  and UTF-8 cannot encode a lone surrogate, so such a string could not be stored as sent; it is refused rather
  than altered. File names of uploads are the exception: control characters (NUL included) are dropped from them
  (see [files.md](files.md)).
- **Integers are exact.** An integer outside JavaScript's safe range (±9007199254740991), such as \`offset\` at
  2^63, is a 400 naming it; it would otherwise be rounded.
- **Nesting is bounded.** A JSON body whose arrays and objects nest more than 64 levels deep is a 400 with
  \`param: "body"\`.
- **An empty body is no body.** \`Content-Type: application/json\` with an empty body is accepted where the route
  takes no body or only optional fields (\`POST …/interrupt\`, \`DELETE\` routes, \`rotate_secret\`,
  \`redeliver\`); where fields are required, the 400 names the first missing one.
- **Path parameters of any length** (up to Node.js's 16 KiB request-header limit) get a 400 naming the parameter (\`id must be a valid uuid\`); a path that is not
  valid percent-encoded UTF-8 is a 400 with \`param: "path"\`.
- **Unknown routes** answer 404 \`route_not_found\` whatever their body, Content-Type or size.

This table is generated from the code (\`npm run docs:errors\`) and checked by \`test/errors.test.ts\`.

| code | status | type | meaning |
| --- | --- | --- | --- |
${rows}
`;

writeFileSync(join(import.meta.dirname, '..', 'docs', 'errors.md'), text);
