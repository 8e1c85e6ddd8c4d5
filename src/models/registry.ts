/**
 * Which model ids this deployment can run, and the adapter for each. Ids are `provider/model`: openai and
 * anthropic (through the AI SDK, `ai-sdk.ts`), any provider named in AGENTRY_PROVIDERS (the direct
 * chat-completions client, `chat-completions.ts`), and the built-in `scripted` model (`scripted` or
 * `scripted/priced`). Adapters are created on first use and cached per model id.
 */
import type { Dispatcher } from 'undici';
import type { Config } from '../config.ts';
import { type ModelWindow, modelWindowOf } from './context-window.ts';
import type { ModelAdapterOptions } from './retrying-stream.ts';
import { createScriptedModel } from './scripted.ts';
import { type ModelAdapter, ModelError } from './types.ts';

const SCRIPTED_MODELS = ['scripted', 'scripted/priced'] as const;

/**
 * An adapter made by its first call. The HTTP adapters load their libraries (the AI SDK and its providers for
 * OpenAI and Anthropic, undici for the chat-completions providers) when a turn first calls such a model, not when a
 * process (or a CLI command) that may never call one starts.
 */
function madeOnFirstCall(make: () => Promise<ModelAdapter>): ModelAdapter {
  let adapter: Promise<ModelAdapter> | null = null;
  return {
    async *stream(request) {
      adapter ??= make();
      yield* (await adapter).stream(request);
    },
  };
}

/** A provider as the startup log describes it. */
export interface ProviderStatus {
  name: string;
  /** False when its turns would fail with model_not_configured (no API key). */
  ready: boolean;
  detail: string;
}

export interface ModelRegistry {
  /** Null when the id names a known provider and model, else a sentence saying what is wrong. */
  problem(modelId: string): string | null;
  /**
   * Null when a known model id can run here, else why its turns will fail (a missing API key, naming the
   * variable). Agents may still use it: the key can be set before their first turn.
   */
  credentialProblem(modelId: string): string | null;
  providers(): string[];
  /** Every provider, with whether it can run now. */
  describe(): ProviderStatus[];
  /**
   * The adapter for a model id; throws ModelError `model_not_configured` when the id is not runnable here. A
   * missing provider API key is reported by the adapter's first call (same code, naming the variable).
   */
  adapter(modelId: string): ModelAdapter;
  /** The context window a step's context is fitted to, and the output the model may produce (context-window.ts). */
  window(modelId: string): ModelWindow;
}

export type ModelRegistryConfig = Pick<Config, 'providers' | 'openaiApiKey' | 'anthropicApiKey'> &
  Partial<Pick<Config, 'contextWindow'>>;

export function createModelRegistry(config: ModelRegistryConfig, options: ModelAdapterOptions = {}): ModelRegistry {
  const providers = ['openai', 'anthropic', 'scripted', ...Object.keys(config.providers)];
  const adapters = new Map<string, ModelAdapter>();
  /** One connection pool per AGENTRY_PROVIDERS provider, whatever the number of its model ids in use. */
  const connections = new Map<string, Dispatcher>();

  const problem = (modelId: string): string | null => {
    if ((SCRIPTED_MODELS as readonly string[]).includes(modelId)) return null;
    const slash = modelId.indexOf('/');
    if (slash <= 0 || slash === modelId.length - 1) {
      return `model must look like provider/model (known providers: ${providers.join(', ')})`;
    }
    const provider = modelId.slice(0, slash);
    if (provider === 'scripted') return `unknown scripted model; use ${SCRIPTED_MODELS.join(' or ')}`;
    if (!providers.includes(provider)) {
      return `unknown model provider "${provider}" (known providers: ${providers.join(', ')})`;
    }
    return null;
  };

  const create = (modelId: string): ModelAdapter => {
    const invalid = problem(modelId);
    if (invalid !== null) throw new ModelError('model_not_configured', `model "${modelId}": ${invalid}`);
    if (modelId === 'scripted') return createScriptedModel({ priced: false });
    if (modelId === 'scripted/priced') return createScriptedModel({ priced: true });
    const slash = modelId.indexOf('/');
    const provider = modelId.slice(0, slash);
    const model = modelId.slice(slash + 1);
    if (provider === 'openai') {
      return madeOnFirstCall(async () =>
        (await import('./ai-sdk.ts')).createOpenAIAdapter(model, config.openaiApiKey, options),
      );
    }
    if (provider === 'anthropic') {
      return madeOnFirstCall(async () =>
        (await import('./ai-sdk.ts')).createAnthropicAdapter(model, config.anthropicApiKey, options),
      );
    }
    const compatible = Object.hasOwn(config.providers, provider) ? config.providers[provider] : undefined;
    if (compatible === undefined) throw new ModelError('model_not_configured', `model "${modelId}" is not configured`);
    return madeOnFirstCall(async () => {
      const { createOpenAICompatibleAdapter, providerConnections } = await import('./chat-completions.ts');
      let pool = connections.get(provider);
      if (pool === undefined) {
        pool = providerConnections();
        connections.set(provider, pool);
      }
      return createOpenAICompatibleAdapter(provider, model, compatible, pool, options);
    });
  };

  const keyVariables = [
    { provider: 'openai', variable: 'OPENAI_API_KEY', key: config.openaiApiKey },
    { provider: 'anthropic', variable: 'ANTHROPIC_API_KEY', key: config.anthropicApiKey },
  ];

  return {
    window: (modelId) => modelWindowOf(modelId, config.contextWindow ?? 0),
    providers: () => [...providers],
    problem,
    credentialProblem: (modelId) => {
      if (problem(modelId) !== null) return null;
      const provider = modelId.slice(0, modelId.indexOf('/'));
      const needed = keyVariables.find((entry) => entry.provider === provider);
      if (needed === undefined || needed.key !== null) return null;
      return `${provider} models need an API key and ${needed.variable} is not set: turns of this agent fail with model_not_configured until it is`;
    },
    describe: () => [
      ...keyVariables.map(({ provider, variable, key }) => ({
        name: provider,
        ready: key !== null,
        detail: key === null ? `${variable} not set` : `${variable} set`,
      })),
      { name: 'scripted', ready: true, detail: 'built in' },
      ...Object.entries(config.providers).map(([name, entry]) => ({ name, ready: true, detail: entry.baseURL })),
    ],
    adapter: (modelId) => {
      const cached = adapters.get(modelId);
      if (cached !== undefined) return cached;
      const created = create(modelId);
      adapters.set(modelId, created);
      return created;
    },
  };
}
