import { describe, expect, it } from 'vitest';
import { costMicros, isPriced, priceOf } from './pricing.ts';

describe('pricing', () => {
  it('prices the scripted models as the design says', () => {
    expect(priceOf('scripted')).toBeNull();
    expect(priceOf('scripted/priced')).toEqual({ inputPerMTok: 1, cachedInputPerMTok: 0.1, outputPerMTok: 1 });
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

  it('prices cached input tokens at the cached input price', () => {
    // 1,000 input tokens of which 800 cached on gpt-5.4: 200 × $2.50 + 800 × $0.25 per 1M = 500 + 200 micro-USD.
    expect(costMicros('openai/gpt-5.4', { inputTokens: 1000, cachedInputTokens: 800, outputTokens: 0 })).toBe(700);
    // More cached than input (a provider's rounding) counts every input token as cached, never a negative count.
    expect(costMicros('scripted/priced', { inputTokens: 10, cachedInputTokens: 50, outputTokens: 0 })).toBe(1);
    expect(costMicros('scripted/priced', { inputTokens: 10, cachedInputTokens: 0, outputTokens: 0 })).toBe(10);
  });

  it('stays exact for very large token counts', () => {
    const tokens = 10_000_000_000; // 10B output tokens at $50/1M = $500,000 = 5e11 micro-USD.
    expect(costMicros('anthropic/claude-fable-5-1', { inputTokens: 0, outputTokens: tokens })).toBe(500_000_000_000);
  });
});
