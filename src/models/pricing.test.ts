import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { costMicros, isPriced, type ModelPrice, PRICES, priceOf } from './pricing.ts';

/** The rows of the table under `## Pricing` in docs/models.md: `| \`model\` | input | output |`. */
function documentedPrices(): Record<string, ModelPrice> {
  const markdown = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'models.md'), 'utf8');
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Pricing\n'));
  if (section === undefined) throw new Error('docs/models.md has no "## Pricing" section');
  const table: Record<string, ModelPrice> = {};
  for (const line of section.split('\n')) {
    const row = /^\|\s*`([^`]+)`\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|\s*$/.exec(line);
    if (row === null) continue;
    const [, model = '', input = '', output = ''] = row;
    expect(table, `duplicate row for ${model}`).not.toHaveProperty([model]);
    table[model] = { inputPerMillion: Number(input), outputPerMillion: Number(output) };
  }
  return table;
}

describe('pricing', () => {
  it('matches the table in docs/models.md exactly', () => {
    const documented = documentedPrices();
    expect(Object.keys(documented).length).toBeGreaterThan(5);
    expect(documented).toEqual({ ...PRICES });
  });

  it('prices the scripted models as the design says', () => {
    expect(priceOf('scripted')).toEqual({ inputPerMillion: 0, outputPerMillion: 0 });
    expect(priceOf('scripted/priced')).toEqual({ inputPerMillion: 1, outputPerMillion: 1 });
    expect(isPriced('scripted')).toBe(false);
    expect(isPriced('scripted/priced')).toBe(true);
  });

  it('leaves configured providers and unknown models unpriced', () => {
    expect(priceOf('ollama/llama3')).toBeNull();
    expect(priceOf('openai/not-a-model')).toBeNull();
    expect(priceOf('constructor')).toBeNull();
    expect(isPriced('ollama/llama3')).toBe(false);
    expect(costMicros('ollama/llama3', { inputTokens: 1_000_000, outputTokens: 1_000_000 })).toBe(0);
  });

  it('costs integer micro-USD, rounded up', () => {
    // $1 per 1M tokens each way = 1 micro-USD per token.
    expect(costMicros('scripted/priced', { inputTokens: 3, outputTokens: 4 })).toBe(7);
    expect(costMicros('scripted', { inputTokens: 1000, outputTokens: 1000 })).toBe(0);
    // 1,000 tokens at $2.50/1M = 2,500 micro-USD, plus 1,000 at $15/1M = 15,000.
    expect(costMicros('openai/gpt-5.4', { inputTokens: 1000, outputTokens: 1000 })).toBe(17_500);
    // One token at $0.05/1M is 0.05 micro-USD: charged as 1, never 0.
    expect(costMicros('openai/gpt-5-nano', { inputTokens: 1, outputTokens: 0 })).toBe(1);
    // Fractional prices carry no float error: 1,000,000 × $0.15 = exactly $0.15.
    expect(costMicros('openai/gpt-4o-mini', { inputTokens: 1_000_000, outputTokens: 0 })).toBe(150_000);
    expect(costMicros('openai/gpt-4.1-mini', { inputTokens: 0, outputTokens: 3 })).toBe(5);
    expect(costMicros('scripted/priced', { inputTokens: 0, outputTokens: 0 })).toBe(0);
  });

  it('stays exact for very large token counts', () => {
    const tokens = 10_000_000_000; // 10B output tokens at $50/1M = $500,000 = 5e11 micro-USD.
    expect(costMicros('anthropic/claude-fable-5-1', { inputTokens: 0, outputTokens: tokens })).toBe(500_000_000_000);
  });
});
