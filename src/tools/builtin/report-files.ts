/**
 * Reports are files in the agent's workspace under `reports/`: Markdown (`.md`) or HTML (`.html`), written by
 * `build_report` (or by any command in the sandbox) and read back by the download routes. This file owns the names,
 * the rendering and the access, all through the sandbox runtime's workspace file functions, so a report path can
 * never leave the workspace whatever the sandbox put there.
 */
import { WorkspacePathError } from '../sandbox/sandbox-errors.ts';
import type { SandboxRuntime } from '../sandbox/sandbox-runtime.ts';

export const REPORTS_DIR = 'reports';
export const REPORT_FORMATS = ['markdown', 'html'] as const;
export type ReportFormat = (typeof REPORT_FORMATS)[number];
/** What a report's name looks like (and all the download route accepts). */
export const REPORT_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\\.(md|html)$';
const REPORT_NAME = new RegExp(REPORT_NAME_PATTERN);
/** Largest report the download route serves. */
export const MAX_REPORT_BYTES = 64 * 1024 * 1024;

export interface ReportEntry {
  name: string;
  /** Relative to the workspace. */
  path: string;
  format: ReportFormat;
  bytes: number;
}

export const isReportName = (name: string): boolean => REPORT_NAME.test(name);
export const reportFormatOf = (name: string): ReportFormat => (name.endsWith('.html') ? 'html' : 'markdown');

/** A file name from a title: lower case, ASCII letters and digits joined by hyphens, at most 80 characters. */
export function slugOf(title: string): string {
  const slug = title
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 80)
    .replace(/-+$/, '');
  return slug === '' ? 'report' : slug;
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

/**
 * `text` ending in exactly one newline. A loop, not `replace(/\n*$/, …)`: that regex tries again from every newline
 * of a run that does not end the text, quadratic in the run (10 MB of newlines would hold the event loop for hours).
 */
function withOneFinalNewline(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 10) end--;
  return `${text.slice(0, end)}\n`;
}

/**
 * The file's content: the title as a heading over the content, or a whole HTML document around it. Runs on the
 * event loop: every step is linear in the content, which `build_report` caps at the workspace write limit.
 */
export function renderReport(title: string, content: string, format: ReportFormat): string {
  if (format === 'markdown') {
    return content.trimStart().startsWith('# ') ? content : `# ${title}\n\n${withOneFinalNewline(content)}`;
  }
  if (/^\s*(<!doctype html|<html[\s>])/i.test(content)) return content;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
${content}
</body>
</html>
`;
}

/** The reports in the workspace, by name; none when there is no `reports/` folder yet. */
export async function listReports(runtime: SandboxRuntime, workspace: string): Promise<ReportEntry[]> {
  let listing: Awaited<ReturnType<SandboxRuntime['listFiles']>>;
  try {
    listing = await runtime.listFiles(workspace, REPORTS_DIR);
  } catch (error) {
    if (error instanceof WorkspacePathError && (error.code === 'not_found' || error.code === 'not_a_directory')) {
      return [];
    }
    throw error;
  }
  return listing.entries.flatMap((entry) => {
    const name = entry.path.slice(REPORTS_DIR.length + 1);
    if (entry.type !== 'file' || !isReportName(name)) return [];
    return [{ name, path: entry.path, format: reportFormatOf(name), bytes: entry.size }];
  });
}

/** A report's bytes, or null when there is no such report (or it is too large to serve). */
export async function readReport(
  runtime: SandboxRuntime,
  workspace: string,
  name: string,
): Promise<{ entry: ReportEntry; content: Buffer } | null> {
  if (!isReportName(name)) return null;
  const path = `${REPORTS_DIR}/${name}`;
  try {
    const file = await runtime.readFile(workspace, path, { maxBytes: MAX_REPORT_BYTES });
    if (file.truncated) return null;
    return { entry: { name, path, format: reportFormatOf(name), bytes: file.size }, content: file.content };
  } catch (error) {
    if (error instanceof WorkspacePathError) return null;
    throw error;
  }
}

/** Writes a new report named after its title (a number is added when the name is taken) and returns it. */
export async function saveReport(
  runtime: SandboxRuntime,
  workspace: string,
  report: { title: string; content: string; format: ReportFormat },
): Promise<ReportEntry> {
  const taken = new Set((await listReports(runtime, workspace)).map((entry) => entry.name));
  const slug = slugOf(report.title);
  const extension = report.format === 'html' ? 'html' : 'md';
  let name = `${slug}.${extension}`;
  for (let n = 2; taken.has(name); n++) name = `${slug}-${n}.${extension}`;
  const written = await runtime.writeFile(
    workspace,
    `${REPORTS_DIR}/${name}`,
    renderReport(report.title, report.content, report.format),
  );
  return { name, path: written.path, format: report.format, bytes: written.bytes };
}
