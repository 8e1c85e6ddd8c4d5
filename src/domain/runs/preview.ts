/** Bounded previews of what went into and came out of a run or a span (DESIGN 5: cut at 1,000 characters). */
export const PREVIEW_CHARS = 1000;

export const preview = (text: string): string => (text.length > PREVIEW_CHARS ? text.slice(0, PREVIEW_CHARS) : text);
