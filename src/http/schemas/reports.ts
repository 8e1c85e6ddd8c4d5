import { Type } from 'typebox';
import { REPORT_FORMATS, REPORT_NAME_PATTERN } from '../../tools/builtin/report-files.ts';
import { StringEnum, Uuid } from './common.ts';

export const ReportParams = Type.Object({
  id: Uuid,
  name: Type.String({
    pattern: REPORT_NAME_PATTERN,
    description: 'The report file name, e.g. quarterly-summary.md',
  }),
});

export const Report = Type.Object(
  {
    object: Type.Literal('report'),
    name: Type.String({ description: 'File name in the reports/ folder of the agent workspace' }),
    path: Type.String({ description: 'Path relative to the agent workspace, e.g. reports/quarterly-summary.md' }),
    format: StringEnum(REPORT_FORMATS),
    bytes: Type.Integer({ minimum: 0 }),
    url: Type.String({ description: 'Where the content is served (this API, same key)' }),
  },
  { additionalProperties: false, description: 'A report in the agent workspace' },
);

export const ReportList = Type.Object(
  { object: Type.Literal('list'), data: Type.Array(Report) },
  { additionalProperties: false, description: 'The reports of the agent, by name' },
);

export const ReportContent = Type.Unsafe<unknown>({
  description:
    'The report as an attachment: text/markdown or text/html, UTF-8. Served with Content-Disposition: attachment, a Content-Security-Policy that forbids scripts and X-Content-Type-Options: nosniff, so an HTML report never runs in this API origin.',
  content: {
    'text/markdown': { schema: { type: 'string' } },
    'text/html': { schema: { type: 'string' } },
  },
});
