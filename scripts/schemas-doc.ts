/**
 * Writes docs/agent-document.schema.json, the JSON Schema of an agent document (`npm run docs:schemas`);
 * test/agents-as-code-cli.test.ts keeps it equal to the schema POST /v1/apply validates with.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentDocumentSchema } from '../src/cli/agents-as-code.ts';

writeFileSync(
  join(import.meta.dirname, '..', 'docs', 'agent-document.schema.json'),
  `${JSON.stringify(agentDocumentSchema(), null, 2)}\n`,
);
