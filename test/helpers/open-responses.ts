/**
 * Validators for Open Responses bodies and stream events. They use the published OpenAPI document when
 * AGENTRY_OPEN_RESPONSES_OPENAPI names a copy of it (`ResponseResource` and every `*StreamingEvent` schema), and
 * the field-list schema of test/fixtures/open-responses-schema.ts otherwise; the same checks run either way.
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { responseResource, streamingEvents } from '../fixtures/open-responses-schema.ts';

export interface OpenResponsesValidators {
  /** `published` or `field-list`. */
  source: string;
  response(body: unknown): string[];
  event(event: unknown): string[];
}

const describe = (validate: ValidateFunction): string[] =>
  (validate.errors ?? []).map((error) => `${error.instancePath || '(root)'} ${error.message ?? ''}`);

export function openResponsesValidators(): OpenResponsesValidators {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const path = process.env.AGENTRY_OPEN_RESPONSES_OPENAPI;
  let response: ValidateFunction;
  let events: ValidateFunction[];
  let source: string;
  if (path !== undefined && path !== '') {
    const document = JSON.parse(readFileSync(path, 'utf8')) as { components: { schemas: Record<string, unknown> } };
    ajv.addSchema({ $id: 'openresponses', components: document.components });
    const ref = (name: string) => ajv.compile({ $ref: `openresponses#/components/schemas/${name}` });
    response = ref('ResponseResource');
    events = Object.keys(document.components.schemas)
      .filter((name) => name.endsWith('StreamingEvent'))
      .map(ref);
    source = 'published';
  } else {
    response = ajv.compile(responseResource);
    events = streamingEvents.map((schema) => ajv.compile(schema));
    source = 'field-list';
  }
  return {
    source,
    response: (body) => (response(body) ? [] : describe(response)),
    event: (event) => {
      if (events.some((validate) => validate(event))) return [];
      const type = typeof event === 'object' && event !== null && 'type' in event ? String(event.type) : 'unknown';
      return [`${type} matches no Open Responses streaming event`];
    },
  };
}
