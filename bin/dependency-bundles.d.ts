/** The file: URL of each bundled entry file → its bundle's, from the manifest under `root` (dependency-bundles.js). */
export function bundleRedirects(root?: string): Map<string, string>;
/** Redirects this thread's imports of bundled entry files to their bundles; returns how many entry files it covers. */
export function useDependencyBundles(): Promise<number>;
