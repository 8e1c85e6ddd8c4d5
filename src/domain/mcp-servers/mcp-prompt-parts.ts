/**
 * `mcp_prompt` parts of a submitted message (docs/mcp-auth.md "Prompts"): each names a server of the session's
 * agent by its label and one of its prompts; it is asked with `prompts/get` as the session's turns would ask it
 * (the end user's credential when the session has one, else the organization's; the pools and egress guard of
 * tool calls; bounded time), and its user messages become the part's text (images stored as files, attached).
 * The prompt is looked up in the server's list first, so an unknown name or a missing argument is a 400 naming
 * the field, not whatever the server answers. Everything the server sends is external input: the text is bounded
 * and made storable, and a prompt that cannot be a user message (assistant messages, audio, binary) is refused.
 */
import { AppError, notFound, validationError } from '../../errors/app-error.ts';
import { storableText } from '../../lib/storable-text.ts';
import type { Executor } from '../../storage/db.ts';
import { isMcpError, type McpConnection, type McpPromptInfo, type McpPromptResult } from '../../tools/mcp/client.ts';
import { McpAuthorizationRequired, type McpProviderTools } from '../../tools/mcp/provider.ts';
import type { McpServer } from '../../tools/tool-config.ts';
import type { ToolScope } from '../../tools/types.ts';
import { requireAgentVersion } from '../agents/agent-repo.ts';
import { type ImageImporter, keepingImages } from '../files/image-import.ts';
import type { Attachment } from '../turns/items.ts';
import type { ExpandedParts, PromptParts } from '../turns/message-service.ts';
import type { ExpandedPart, McpPromptPart, PromptRequestPart } from '../turns/message-types.ts';

/** Characters a prompt may expand to: what a text part may hold. */
export const MAX_PROMPT_TEXT_CHARS = 100_000;
/** Pages of a server's prompt list read to find a prompt. */
const MAX_PROMPT_PAGES = 20;
/** Images one prompt may attach (each stored as a file, bounded like an uploaded image). */
export const MAX_PROMPT_IMAGES = 8;
/** Characters of a server's error message repeated in ours. */
const MAX_QUOTED_CHARS = 1000;

const quoted = (error: unknown) => (error instanceof Error ? error.message : String(error)).slice(0, MAX_QUOTED_CHARS);

export interface McpPromptPartsDeps {
  db: Executor;
  withServer: McpProviderTools['withServer'];
  images: ImageImporter;
  /** Bound on one request to the server. */
  requestTimeoutMs: number;
}

/** Whose the session is and which servers its agent names, as its turns resolve tools. */
interface SessionScope extends ToolScope {
  entries: McpServer[];
}

async function sessionScope(
  db: Executor,
  target: { orgId: string; sessionId: string },
  agentOf: Parameters<PromptParts>[2],
): Promise<SessionScope> {
  const session = await db
    .selectFrom('sessions')
    .select(['agent_id', 'agent_version', 'end_user', 'hidden'])
    .where('id', '=', target.sessionId)
    .where('org_id', '=', target.orgId)
    .executeTakeFirst();
  if (session === undefined || session.hidden !== 0) throw notFound('session', target.sessionId);
  const scope = { orgId: target.orgId, db, endUser: session.end_user };
  if (session.agent_id === null) return { ...scope, agentId: '', entries: [] };
  const agent = await agentOf(db, session.agent_id);
  // The version the session's turns run: its pin, else the agent's current one.
  const config =
    session.agent_version === null || session.agent_version === agent.version
      ? agent
      : await requireAgentVersion(db, agent.id, session.agent_version, 'agentVersion');
  return { ...scope, agentId: agent.id, entries: config.mcpServers };
}

async function findPrompt(connection: McpConnection, name: string, signal: AbortSignal) {
  let cursor: string | null = null;
  for (let page = 0; page < MAX_PROMPT_PAGES; page++) {
    const listed = await connection.listPrompts(cursor, signal);
    const found = listed.items.find((prompt) => prompt.name === name);
    if (found !== undefined || listed.nextCursor === null) return found;
    cursor = listed.nextCursor;
  }
  return undefined;
}

function checkArguments(prompt: McpPromptInfo, given: Record<string, string>, param: string): void {
  for (const argument of prompt.arguments) {
    if (argument.required && given[argument.name] === undefined) {
      throw validationError(`${param}.arguments.${argument.name}`, `prompt "${prompt.name}" requires ${argument.name}`);
    }
  }
  const declared = new Set(prompt.arguments.map((argument) => argument.name));
  for (const name of Object.keys(given)) {
    if (!declared.has(name)) {
      throw validationError(`${param}.arguments.${name}`, `prompt "${prompt.name}" takes no argument ${name}`);
    }
  }
}

/** The server's answer to `prompts/get`, after the prompt and its arguments were checked against its list. */
async function getPrompt(
  deps: McpPromptPartsDeps,
  scope: SessionScope,
  part: PromptRequestPart,
  param: string,
): Promise<McpPromptResult> {
  const signal = AbortSignal.timeout(2 * deps.requestTimeoutMs + 1000);
  const args = part.arguments ?? {};
  const where = `MCP server "${part.server}"`;
  let result: McpPromptResult | undefined;
  try {
    result = await deps.withServer(scope, scope.entries, part.server, signal, async (connection) => {
      const prompt = connection.capabilities.prompts ? await findPrompt(connection, part.name, signal) : undefined;
      if (prompt === undefined) throw validationError(`${param}.name`, `${where} offers no prompt "${part.name}"`);
      checkArguments(prompt, args, param);
      return connection.getPrompt(part.name, args, signal).catch((error: unknown) => {
        if (!isMcpError(error) || error.code !== 'tool_error') throw error;
        throw validationError(param, `${where} refused prompt "${part.name}": ${quoted(error)}`);
      });
    });
  } catch (error) {
    if (error instanceof AppError) throw error;
    const why = error instanceof McpAuthorizationRequired ? `authorization_required: ${quoted(error)}` : quoted(error);
    throw new AppError('mcp_server_unreachable', `${where} could not be asked for its prompt: ${why}`, {
      cause: error,
    });
  }
  if (result === undefined) {
    throw validationError(`${param}.server`, `the session's agent has no MCP server labelled "${part.server}"`);
  }
  return result;
}

/** The prompt's messages as one user input: their text, and the images to store; 400 on `param` otherwise. */
function userContent(result: McpPromptResult, part: PromptRequestPart, param: string) {
  const texts: string[] = [];
  const images: { data: string; mimeType: string }[] = [];
  const refuse = (why: string) =>
    validationError(param, `prompt "${part.name}" returned ${why}, which a message cannot carry`);
  for (const message of result.messages) {
    if (message.role !== 'user') throw refuse('an assistant message');
    const { content } = message;
    if (content.type === 'unusable') throw refuse(content.what);
    if (content.type === 'image') images.push(content);
    else texts.push(content.text);
  }
  if (texts.length === 0 && images.length === 0) throw refuse('no content');
  if (images.length > MAX_PROMPT_IMAGES) throw refuse(`${images.length} images (at most ${MAX_PROMPT_IMAGES})`);
  const text = storableText(texts.join('\n\n'));
  if (text.length > MAX_PROMPT_TEXT_CHARS) {
    throw validationError(
      param,
      `prompt "${part.name}" expanded to ${text.length} characters; a message part holds at most ${MAX_PROMPT_TEXT_CHARS}`,
    );
  }
  return { text, images };
}

export function createMcpPromptParts(deps: McpPromptPartsDeps): PromptParts {
  async function expand(scope: SessionScope, part: PromptRequestPart, index: number) {
    const param = `parts[${index}]`;
    const result = await getPrompt(deps, scope, part, param);
    const { text, images } = userContent(result, part, param);
    const attachments: Attachment[] = [];
    for (const image of images) {
      const fileId = await deps.images.import(scope.orgId, `data:${image.mimeType};base64,${image.data}`, param);
      attachments.push({ kind: 'image', fileId });
    }
    const kept: McpPromptPart = {
      type: 'mcp_prompt',
      server: part.server,
      name: part.name,
      arguments: part.arguments ?? {},
      text,
    };
    if (attachments.length > 0) kept.fileIds = attachments.map((attachment) => attachment.fileId);
    return { part: kept, attachments };
  }

  return async (target, parts, agentOf): Promise<ExpandedParts> => {
    const scope = await sessionScope(deps.db, target, agentOf);
    // One part for each part sent, in place: the files' parts are checked later by their index.
    const kept: ExpandedPart[] = [];
    const attachments: Attachment[] = [];
    const imported: string[] = [];
    // A later part that fails deletes the images of the parts before it.
    await keepingImages(deps.images, target.orgId, imported, async () => {
      for (const [index, part] of parts.entries()) {
        if (part.type !== 'mcp_prompt') {
          kept.push(part);
          continue;
        }
        const expanded = await expand(scope, part, index);
        kept.push(expanded.part);
        attachments.push(...expanded.attachments);
        imported.push(...expanded.attachments.map((attachment) => attachment.fileId));
      }
    });
    return { parts: kept, attachments, discard: () => deps.images.discard(target.orgId, imported) };
  };
}
