/**
 * A vitest setup file (vitest.config.ts `setupFiles`): no process a test file started through spawnChild outlives
 * the file, whether its tests passed, failed, timed out or never cleaned up (children.ts).
 */
import { afterAll } from 'vitest';
import { killChildren, killChildrenOnExit } from './children.ts';

killChildrenOnExit();
afterAll(() => {
  killChildren();
});
