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
\`model_not_configured\`, \`model_timeout\`, \`max_steps_exceeded\` or \`internal_error\`; an interrupted turn ends
\`cancelled\` with code \`cancelled\`.

This table is generated from the code (\`npm run docs:errors\`) and checked by \`test/errors.test.ts\`.

| code | status | type | meaning |
| --- | --- | --- | --- |
${rows}
`;

writeFileSync(join(import.meta.dirname, '..', 'docs', 'errors.md'), text);
