/** The semi-space size, in MB, that `agentry serve` starts V8 with (server-heap.js). */
export const SEMI_SPACE_MB: number;
/** For `agentry serve`, replaces the process with one whose V8 heap is sized for a server (server-heap.js). */
export function startServerWithHeapSize(): void;
