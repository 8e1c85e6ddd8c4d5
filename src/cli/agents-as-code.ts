/**
 * `agentry export` and `agentry apply` (docs/agents-as-code.md): the organization's agents, MCP connectors,
 * schedules and webhook endpoints as YAML files, one per resource, with the lock of what they are now
 * (`agentry.lock.json`) and the JSON Schema editors validate them with; and those files applied back through the
 * same planner as POST /v1/apply, validated by the same schema, the lock read before and written after, the
 * `${NAME}` references of connector secrets resolved from the environment. Loaded when one of these commands runs.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import type { Deps } from '../deps.ts';
import type { ApplyLock, ApplyResult, DocumentKind, PlannedChange } from '../domain/apply/apply-types.ts';
import { CLI_AUDIT } from '../domain/audit/audit-log.ts';
import { AppError } from '../errors/app-error.ts';
import { ApplyBody, Document } from '../http/schemas/documents.ts';
import { createValidatorCompiler, describeValidationError, requestPartSchema } from '../http/validation.ts';

export const LOCK_FILE = 'agentry.lock.json';
export const SCHEMA_FILE = 'agent-document.schema.json';
/** The files a directory's documents are read from. */
const YAML = /\.ya?ml$/;
/** The largest documents file read: far above any agent's, well below what would hurt. */
const MAX_FILE_BYTES = 10 * 1024 * 1024;

/** The JSON Schema of a document of any kind (published as docs/agent-document.schema.json). */
export function agentDocumentSchema(): Record<string, unknown> {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    ...JSON.parse(JSON.stringify(Document)),
  };
}

/** What a file name says of its document's kind: `support.agent.yaml`, `github.mcp-server.yaml`. */
const SUFFIXES: Record<DocumentKind, string> = {
  agent: 'agent',
  mcp_server: 'mcp-server',
  schedule: 'schedule',
  webhook_endpoint: 'webhook-endpoint',
};

/** A file name per document: its name in lower-case letters, digits and dashes and its kind, unique in the folder. */
function fileNames(documents: { kind: DocumentKind; name: string }[]): string[] {
  const used = new Set<string>();
  return documents.map(({ kind, name }) => {
    const base =
      name
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '-')
        .replace(/^-+|-+$/g, '')
        .slice(0, 60) || SUFFIXES[kind];
    let file = `${base}.${SUFFIXES[kind]}.yaml`;
    for (let n = 2; used.has(file); n++) file = `${base}-${n}.${SUFFIXES[kind]}.yaml`;
    used.add(file);
    return file;
  });
}

/** Writes the organization's resources into `dir`; the files written, in order. */
export async function exportAgents(deps: Deps, orgId: string, dir: string): Promise<string[]> {
  const exported = await deps.agentApply.exportDocuments(orgId, { endpoints: true });
  mkdirSync(dir, { recursive: true });
  const names = fileNames(exported.documents);
  const written: string[] = [];
  for (const [index, document] of exported.documents.entries()) {
    const file = join(dir, names[index] ?? 'agent.yaml');
    const header = `# yaml-language-server: $schema=${SCHEMA_FILE}\n`;
    writeFileSync(file, header + stringify(document, { lineWidth: 0 }));
    written.push(file);
  }
  writeFileSync(join(dir, SCHEMA_FILE), `${JSON.stringify(agentDocumentSchema(), null, 2)}\n`);
  writeFileSync(join(dir, LOCK_FILE), `${JSON.stringify(exported.lock, null, 2)}\n`);
  return written;
}

/** Where each document came from, to name it in a message. */
interface Source {
  file: string;
  /** Its position in its file (YAML files may hold several, separated by `---`). */
  index: number;
}

function filesOf(path: string): string[] {
  if (!existsSync(path)) throw new Error(`${path} does not exist`);
  if (!statSync(path).isDirectory()) return [path];
  const files = readdirSync(path)
    .filter((name) => YAML.test(name))
    .sort()
    .map((name) => join(path, name));
  if (files.length === 0) throw new Error(`${path} holds no .yaml or .yml file`);
  return files;
}

function readDocuments(path: string): { documents: unknown[]; sources: Source[] } {
  const documents: unknown[] = [];
  const sources: Source[] = [];
  for (const file of filesOf(path)) {
    if (statSync(file).size > MAX_FILE_BYTES) throw new Error(`${file} is larger than ${MAX_FILE_BYTES} bytes`);
    const parsed = parseAllDocuments(readFileSync(file, 'utf8'));
    // One document, or an empty stream: parseAllDocuments answers an array of documents (or an empty stream).
    const list = Array.isArray(parsed) ? parsed : [];
    for (const [index, yaml] of list.entries()) {
      const [problem] = yaml.errors;
      if (problem !== undefined) throw new Error(`${file}: ${problem.message}`);
      const value: unknown = yaml.toJS({ maxAliasCount: 100 });
      if (value === null || value === undefined) continue;
      documents.push(value);
      sources.push({ file, index });
    }
  }
  if (documents.length === 0) throw new Error(`no document found in ${path}`);
  return { documents, sources };
}

function readLock(file: string): ApplyLock | null {
  if (!existsSync(file)) return null;
  try {
    // Its shape is checked with the documents (checkBody).
    return JSON.parse(readFileSync(file, 'utf8')) as ApplyLock;
  } catch (error) {
    throw new Error(`${file} is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
}

const validateBody = createValidatorCompiler()({
  schema: requestPartSchema(ApplyBody, 'body'),
  httpPart: 'body',
  method: 'POST',
  url: '/v1/apply',
});

/** A failure of POST /v1/apply's rules, worded for the file it comes from: `support.agent.yaml: maxSteps must…`. */
function checkBody(body: Record<string, unknown>, sources: Source[], lockFile: string): void {
  if (validateBody(body) !== false) return;
  const [error] = validateBody.errors ?? [];
  if (error === undefined) throw new Error('the documents are invalid');
  const problem = describeValidationError(
    { ...error, params: error.params ?? {}, message: error.message ?? 'is invalid' },
    'body',
  );
  throw located(problem, sources, lockFile);
}

/** A problem with the field `param` of the documents (or the lock), named by the file it is in. */
function located(problem: { param: string; message: string }, sources: Source[], lockFile: string): Error {
  const at = /^documents\[(\d+)\]\.?/.exec(problem.param);
  if (at === null) {
    const where = problem.param.startsWith('lock') ? lockFile : 'documents';
    return new Error(`${where}: ${problem.message}`);
  }
  const source = sources[Number(at[1])];
  const field = problem.param.slice(at[0].length);
  const place =
    source === undefined ? 'documents' : `${source.file}${source.index > 0 ? ` (document ${source.index + 1})` : ''}`;
  return new Error(`${place}: ${problem.message.replace(problem.param, field === '' ? 'the document' : field)}`);
}

/** The `${NAME}` references of connector documents whose variable the environment sets, with their values. */
function secretsFrom(documents: unknown[], env: Record<string, string | undefined>): Record<string, string> {
  const secrets: Record<string, string> = {};
  for (const document of documents) {
    if (typeof document !== 'object' || document === null || Reflect.get(document, 'kind') !== 'mcp_server') continue;
    for (const match of JSON.stringify(document).matchAll(/\$\{([A-Z_][A-Z0-9_]*)\}/g)) {
      const name = match[1] ?? '';
      const value = env[name];
      if (value !== undefined) secrets[name] = value;
    }
  }
  return secrets;
}

/**
 * Reads the documents at `path`, applies them (or plans only), and writes the new lock next to them. `env` holds
 * the values of the connectors' `${NAME}` references (the command's environment).
 */
export async function applyDocuments(
  deps: Deps,
  orgId: string,
  path: string,
  options: { dryRun: boolean; force: boolean; env: Record<string, string | undefined> },
): Promise<ApplyResult> {
  const { documents, sources } = readDocuments(path);
  const dir = existsSync(path) && statSync(path).isDirectory() ? path : dirname(path);
  const lockFile = join(dir, LOCK_FILE);
  const lock = readLock(lockFile);
  const secrets = secretsFrom(documents, options.env);
  const body: Record<string, unknown> = { documents, dry_run: options.dryRun, force: options.force, lock, secrets };
  checkBody(body, sources, basename(lockFile));
  let result: ApplyResult;
  try {
    result = await deps.agentApply.apply(orgId, body.documents as never, {
      dryRun: options.dryRun,
      force: options.force,
      lock,
      actor: 'cli',
      audit: CLI_AUDIT,
      secrets,
    });
  } catch (error) {
    if (!(error instanceof AppError) || error.param === null) throw error;
    throw located({ param: error.param, message: error.message }, sources, basename(lockFile));
  }
  if (!options.dryRun) writeFileSync(lockFile, `${JSON.stringify(result.lock, null, 2)}\n`);
  return result;
}

/** The plan as the CLI prints it: one line per document (a new endpoint's signing secret on a line of its own). */
export function planLines(plan: PlannedChange[], dryRun: boolean): string {
  const lines = plan.map((change) => {
    const name = JSON.stringify(change.name);
    const what = `${change.kind.replace('_', ' ')} ${name}`;
    if (change.action === 'create') {
      const secret =
        change.signing_secret === undefined ? '' : `\n  signing secret (shown only now): ${change.signing_secret}`;
      return `${dryRun ? 'would create' : 'created'} ${what}${secret}`;
    }
    const fields = change.changes.join(', ');
    if (change.kind !== 'agent') {
      if (change.action === 'unchanged') return `unchanged ${what}`;
      return `${dryRun ? 'would update' : 'updated'} ${what}: ${fields}`;
    }
    if (change.action === 'unchanged') return `unchanged ${what} (version ${change.version})`;
    return dryRun
      ? `would update ${what} (version ${change.version}): ${fields}`
      : `updated ${what} to version ${change.version}: ${fields}`;
  });
  return `${lines.join('\n')}\n`;
}
