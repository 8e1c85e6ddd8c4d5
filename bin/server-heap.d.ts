/** The semi-space size, in MB, that `agentry serve` starts V8 with (server-heap.js). */
export const SEMI_SPACE_MB: number;
/** The MALLOC_ARENA_MAX that `agentry serve` runs with unless its environment sets one (server-heap.js). */
export const ARENAS: string;
/** For `agentry serve`, replaces the process with one whose V8 heap is sized for a server (server-heap.js). */
export function startServerWithHeapSize(): void;
