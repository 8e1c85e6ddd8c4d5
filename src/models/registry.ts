/**
 * Which model ids this deployment can run. Ids are `provider/model`: openai, anthropic, any provider named in
 * AGENTRY_PROVIDERS, and the built-in `scripted` model (`scripted` or `scripted/priced`).
 */
import type { Config } from '../config.ts';

const SCRIPTED_MODELS = ['scripted', 'scripted/priced'] as const;

export interface ModelRegistry {
  /** Null when the id names a known provider and model, else a sentence saying what is wrong. */
  problem(modelId: string): string | null;
  providers(): string[];
}

export function createModelRegistry(config: Pick<Config, 'providers'>): ModelRegistry {
  const providers = ['openai', 'anthropic', 'scripted', ...Object.keys(config.providers)];
  return {
    providers: () => [...providers],
    problem: (modelId) => {
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
    },
  };
}
