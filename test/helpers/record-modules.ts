/**
 * Loaded with `node --import` into a child (test/startup-imports.test.ts): records the URL of every module the
 * process resolves (and Node's internal modules it loaded) and, when its main thread exits, writes them one per
 * line to the file RECORD_MODULES_TO names.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const target = process.env.RECORD_MODULES_TO;
if (target !== undefined && isMainThread) {
  const resolved = new Set<string>();
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const result = nextResolve(specifier, context);
      resolved.add(result.url);
      return result;
    },
  });
  // Node's own internal modules too (`internal:deps/undici/undici`, …), from its list of what the process loaded.
  const internal = () =>
    (Reflect.get(process, 'moduleLoadList') as string[])
      .filter((entry) => entry.startsWith('NativeModule internal/'))
      .map((entry) => `internal:${entry.slice('NativeModule internal/'.length)}`);
  process.on('exit', () => writeFileSync(target, [...resolved, ...internal()].join('\n')));
}
