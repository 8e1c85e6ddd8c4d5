import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.ts';
import { BUILTIN_MODELS, createModelCatalogue, DEFAULT_MODEL_ENTRY, type ModelEntry } from './catalogue.ts';
import { modelWindowOf } from './context-window.ts';

/** The rows of the table under `## Model catalogue` in docs/models.md. */
function documentedModels(): Record<string, ModelEntry> {
  const markdown = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'models.md'), 'utf8');
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Model catalogue\n'));
  if (section === undefined) throw new Error('docs/models.md has no "## Model catalogue" section');
  const table: Record<string, ModelEntry> = {};
  const number = String.raw`\s*([0-9.]+)\s*`;
  const pattern = new RegExp(String.raw`^\|\s*\`([^\`]+)\`\s*\|${Array(5).fill(number).join('\\|')}\|\s*$`);
  for (const line of section.split('\n')) {
    const row = pattern.exec(line);
    if (row === null) continue;
    const [, model = '', window, output, input, cached, outputPrice] = row;
    expect(table, `duplicate row for ${model}`).not.toHaveProperty([model]);
    table[model] = {
      contextWindow: Number(window),
      maxOutputTokens: Number(output),
      prices: { inputPerMTok: Number(input), cachedInputPerMTok: Number(cached), outputPerMTok: Number(outputPrice) },
      capabilities: { tools: true, images: true, structuredOutput: true },
    };
  }
  return table;
}

const dir = mkdtempSync(join(tmpdir(), 'agentry-catalogue-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** The catalogue a process started with `env` would install. */
function catalogueFrom(env: Record<string, string>) {
  return createModelCatalogue(loadConfig(env).modelCatalog);
}

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('loadConfig accepted the configuration');
}

describe('model catalogue', () => {
  it('matches the table in docs/models.md exactly', () => {
    const documented = documentedModels();
    expect(Object.keys(documented).length).toBeGreaterThan(5);
    expect(documented).toEqual({ ...BUILTIN_MODELS });
  });

  it('describes the built-in models', () => {
    const info = createModelCatalogue().info('anthropic/claude-sonnet-4-5');
    expect(info).toEqual({
      id: 'anthropic/claude-sonnet-4-5',
      contextWindow: 200_000,
      maxOutputTokens: 64_000,
      prices: { inputPerMTok: 3, cachedInputPerMTok: 0.3, outputPerMTok: 15 },
      capabilities: { tools: true, images: true, structuredOutput: true },
      source: 'builtin',
    });
    expect(createModelCatalogue().info('scripted').source).toBe('builtin');
  });

  it("gives the context fitting each model's window and output limit, AGENTRY_CONTEXT_WINDOW over every window", () => {
    expect(modelWindowOf('openai/gpt-4o', 0)).toEqual({ contextWindow: 128_000, maxOutputTokens: 16_384 });
    expect(modelWindowOf('anthropic/claude-haiku-4-5', 0)).toEqual({ contextWindow: 200_000, maxOutputTokens: 64_000 });
    expect(modelWindowOf('ollama/llama3', 0)).toEqual({ contextWindow: 128_000, maxOutputTokens: 4_096 });
    expect(modelWindowOf('openai/gpt-4o', 50_000)).toEqual({ contextWindow: 50_000, maxOutputTokens: 16_384 });
  });

  it('gives unknown models the defaults, unpriced', () => {
    const catalogue = createModelCatalogue();
    for (const id of ['openai/not-a-model', 'ollama/llama3', 'constructor', 'toString']) {
      expect(catalogue.info(id)).toEqual({ id, ...DEFAULT_MODEL_ENTRY, source: 'default' });
      expect(catalogue.knows(id)).toBe(false);
    }
    expect(DEFAULT_MODEL_ENTRY.contextWindow).toBe(128_000);
    expect(DEFAULT_MODEL_ENTRY.maxOutputTokens).toBe(4_096);
  });

  it("layers the operator's YAML file over the built-in table, field by field", () => {
    const path = file(
      'models.yaml',
      [
        'models:',
        '  openai/gpt-5.4:',
        '    prices: { input: 2, cached_input: 0.2 }',
        '  scripted:',
        '    context_window: 2000',
        '    max_output_tokens: 500',
        'providers:',
        '  openai:',
        '    capabilities: { images: false }',
      ].join('\n'),
    );
    const catalogue = catalogueFrom({ AGENTRY_MODEL_CATALOG: path });
    expect(catalogue.info('openai/gpt-5.4')).toEqual({
      id: 'openai/gpt-5.4',
      contextWindow: 1_050_000,
      maxOutputTokens: 128_000,
      prices: { inputPerMTok: 2, cachedInputPerMTok: 0.2, outputPerMTok: 15 },
      capabilities: { tools: true, images: false, structuredOutput: true },
      source: 'operator',
    });
    expect(catalogue.info('scripted')).toMatchObject({ contextWindow: 2000, maxOutputTokens: 500, source: 'operator' });
    // The provider-wide entry reaches an unknown model of the provider, with the defaults under it.
    expect(catalogue.info('openai/gpt-9')).toMatchObject({
      contextWindow: 128_000,
      capabilities: { images: false },
      source: 'operator',
    });
    expect(catalogue.info('anthropic/claude-haiku-4-5').source).toBe('builtin');
  });

  it('reads a JSON file, and AGENTRY_PROVIDERS entries win over it', () => {
    const path = file(
      'models.json',
      JSON.stringify({
        models: { 'local/big': { context_window: 64_000, max_output_tokens: 8_000 } },
        providers: { local: { context_window: 16_000, prices: { input: 1, output: 2 } } },
      }),
    );
    const providers = {
      local: {
        baseURL: 'http://127.0.0.1:1/v1',
        max_output_tokens: 1_000,
        models: { big: { context_window: 96_000 } },
      },
    };
    const catalogue = catalogueFrom({ AGENTRY_MODEL_CATALOG: path, AGENTRY_PROVIDERS: JSON.stringify(providers) });
    expect(catalogue.info('local/big')).toMatchObject({
      contextWindow: 96_000,
      maxOutputTokens: 8_000,
      prices: { inputPerMTok: 1, cachedInputPerMTok: 0, outputPerMTok: 2 },
      source: 'operator',
    });
    expect(catalogue.info('local/small')).toMatchObject({ contextWindow: 16_000, maxOutputTokens: 1_000 });
    expect(catalogue.modelIds()).toContain('local/big');
  });

  it('takes per-provider and per-model entries from AGENTRY_PROVIDERS alone', () => {
    const providers = {
      ollama: {
        baseURL: 'http://127.0.0.1:11434/v1',
        context_window: 32_768,
        capabilities: { images: false },
        models: { 'llama3.3': { context_window: 131_072, prices: { input: 0.1, output: 0.2 } } },
      },
    };
    const config = loadConfig({ AGENTRY_PROVIDERS: JSON.stringify(providers) });
    expect(config.providers).toEqual({ ollama: { baseURL: 'http://127.0.0.1:11434/v1' } });
    const catalogue = createModelCatalogue(config.modelCatalog);
    expect(catalogue.info('ollama/llama3.3')).toMatchObject({
      contextWindow: 131_072,
      maxOutputTokens: 4_096,
      prices: { inputPerMTok: 0.1, cachedInputPerMTok: 0, outputPerMTok: 0.2 },
      capabilities: { tools: true, images: false, structuredOutput: true },
      source: 'operator',
    });
    expect(catalogue.info('ollama/qwen3')).toMatchObject({ contextWindow: 32_768, source: 'operator' });
    // An entry with only its connection describes nothing: its models keep the defaults.
    const plain = catalogueFrom({ AGENTRY_PROVIDERS: JSON.stringify({ vllm: { baseURL: 'http://127.0.0.1:1/v1' } }) });
    expect(plain.info('vllm/qwen3')).toMatchObject({ source: 'default' });
    expect(plain.knows('vllm/qwen3')).toBe(false);
  });

  it('stops startup naming the entry and field of a bad catalogue file', () => {
    const cases: [string, string, string][] = [
      [
        'price.yaml',
        'models:\n  openai/gpt-5.4:\n    prices: { input: -1 }\n',
        'models["openai/gpt-5.4"].prices.input must be a number of USD per 1M tokens, 0 or more',
      ],
      [
        'window.json',
        '{"providers":{"ollama":{"context_window":"big"}}}',
        'providers["ollama"].context_window must be a positive integer (tokens)',
      ],
      [
        'field.yaml',
        'models:\n  openai/gpt-5:\n    contextWindow: 1000\n',
        'models["openai/gpt-5"].contextWindow is not a catalogue field',
      ],
      ['id.yaml', 'models:\n  gpt-5: {}\n', 'models["gpt-5"]: a model id must look like provider/model'],
      [
        'limit.yaml',
        'models:\n  a/b: { context_window: 100, max_output_tokens: 200 }\n',
        'models["a/b"].max_output_tokens must not exceed its context_window',
      ],
      ['syntax.json', '{"models": ', 'is not valid'],
    ];
    for (const [name, text, problem] of cases) {
      const path = file(name, text);
      const error = configError({ AGENTRY_MODEL_CATALOG: path });
      expect(error.variable).toBe('AGENTRY_MODEL_CATALOG');
      expect(error.message).toContain(path);
      expect(error.message).toContain(problem);
    }
    const missing = configError({ AGENTRY_MODEL_CATALOG: join(dir, 'absent.yaml') });
    expect(missing.message).toContain('cannot read');
  });

  it('stops startup naming the provider and field of a bad AGENTRY_PROVIDERS entry', () => {
    const bad = { ollama: { baseURL: 'http://127.0.0.1:11434/v1', models: { x: { capabilities: { tools: 'yes' } } } } };
    const error = configError({ AGENTRY_PROVIDERS: JSON.stringify(bad) });
    expect(error.variable).toBe('AGENTRY_PROVIDERS');
    expect(error.message).toContain('ollama.models["x"].capabilities.tools must be true or false');
  });
});
