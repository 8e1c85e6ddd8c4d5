/**
 * `node:http` without its ES module facade. An `import … from 'node:http'` makes Node.js build the facade, which
 * reads every export, and the `WebSocket`, `CloseEvent` and `MessageEvent` exports load Node's whole fetch
 * implementation (its bundled undici): about 45 ms of a server's start, for nothing the server uses. Type-only
 * imports of `node:http` are erased and stay as they are.
 */
export const http: typeof import('node:http') = process.getBuiltinModule('node:http');
