import type { Migration, MigrationProvider } from 'kysely/migration';
import { initial } from './0001-initial.ts';
import { engine } from './0002-engine.ts';
import { spans } from './0003-spans.ts';
import { responses } from './0004-responses.ts';
import { files } from './0005-files.ts';
import { webhooks } from './0006-webhooks.ts';
import { conversations } from './0007-conversations.ts';
import { mcpServers } from './0008-mcp-servers.ts';
import { apiKeyLastUsed } from './0009-api-key-last-used.ts';
import { legacyTasks } from './0010-legacy-tasks.ts';
import { schedules } from './0011-schedules.ts';
import { toolApprovals } from './0012-tool-approvals.ts';
import { traceContext } from './0013-trace-context.ts';
import { engineProcesses } from './0014-engine-processes.ts';
import { changeNotifications } from './0015-change-notifications.ts';
import { endpointChangeNotifications } from './0016-endpoint-change-notifications.ts';
import { sealedWebhookSecrets } from './0017-sealed-webhook-secrets.ts';
import { storageProbe } from './0018-storage-probe.ts';
import { messageWarnings } from './0019-message-warnings.ts';
import { agentOutputFormat } from './0020-agent-output-format.ts';
import { withoutRowid } from './0021-without-rowid.ts';
import { agentContextPolicy } from './0022-agent-context-policy.ts';
import { cachedInputTokens } from './0023-cached-input-tokens.ts';
import { compaction } from './0024-compaction.ts';
import { memories } from './0025-memories.ts';
import { agentVersionPins } from './0026-agent-version-pins.ts';
import { mcpCredentials } from './0028-mcp-credentials.ts';
import { sessionEndUser } from './0029-session-end-user.ts';
import { waitingMessages } from './0030-waiting-messages.ts';
import { limits } from './0031-limits.ts';
import { budgets } from './0032-budgets.ts';
import { usage } from './0033-usage.ts';
import { auditLog } from './0034-audit-log.ts';
import { retention } from './0035-retention.ts';
import { a2aPush } from './0037-a2a-push.ts';
import { mcpCapabilities } from './0041-mcp-capabilities.ts';
import { engineProcessSlots } from './0043-engine-process-slots.ts';
import { partialRunIndexes } from './0044-partial-run-indexes.ts';
import type { MigrationContext } from './context.ts';

/**
 * Versioned migrations, applied in name order. Never edit a released one: add the next, then run `npm run
 * schema:sqlite` (a new SQLite database is created from the schema they make: storage/sqlite-fresh.ts).
 */
const migrations = (context: MigrationContext): Record<string, Migration> => ({
  '0001-initial': initial,
  '0002-engine': engine,
  '0003-spans': spans,
  '0004-responses': responses,
  '0005-files': files,
  '0006-webhooks': webhooks,
  '0007-conversations': conversations,
  '0008-mcp-servers': mcpServers,
  '0009-api-key-last-used': apiKeyLastUsed,
  '0010-legacy-tasks': legacyTasks,
  '0011-schedules': schedules,
  '0012-tool-approvals': toolApprovals,
  '0013-trace-context': traceContext,
  '0014-engine-processes': engineProcesses,
  '0015-change-notifications': changeNotifications,
  '0016-endpoint-change-notifications': endpointChangeNotifications,
  '0017-sealed-webhook-secrets': sealedWebhookSecrets(context),
  '0018-storage-probe': storageProbe,
  '0019-message-warnings': messageWarnings,
  '0020-agent-output-format': agentOutputFormat,
  '0021-without-rowid': withoutRowid,
  '0022-agent-context-policy': agentContextPolicy,
  '0023-cached-input-tokens': cachedInputTokens,
  '0024-compaction': compaction,
  '0025-memories': memories,
  '0026-agent-version-pins': agentVersionPins,
  '0028-mcp-credentials': mcpCredentials,
  '0029-session-end-user': sessionEndUser,
  '0030-waiting-messages': waitingMessages,
  '0031-limits': limits,
  '0032-budgets': budgets,
  '0033-usage': usage,
  '0034-audit-log': auditLog,
  '0035-retention': retention,
  '0037-a2a-push': a2aPush,
  '0041-mcp-capabilities': mcpCapabilities,
  '0043-engine-process-slots': engineProcessSlots,
  '0044-partial-run-indexes': partialRunIndexes,
});

export function migrationProvider(context: MigrationContext): MigrationProvider {
  return { getMigrations: async () => migrations(context) };
}
