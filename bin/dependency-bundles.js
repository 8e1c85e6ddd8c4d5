// Puts the dependency bundles that `npm install` made (scripts/dependency-bundles.ts) in the place of the packages'
// own entry files for this process: a module importing `typebox` or `kysely` gets one bundle instead of hundreds of
// files. Only an import that resolves to exactly a bundled entry file is redirected, and only while the package's
// package.json is the one that was bundled, so another version of the package (nested, or installed since) loads
// as installed. AGENTRY_DEPENDENCY_BUNDLES=0 turns it off. Worker threads load the packages as installed.
import { readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** The file of each bundled entry (a file: URL) → its bundle's, from the manifest under `root`'s node_modules. */
export function bundleRedirects(root = ROOT) {
  const redirects = new Map();
  let manifest;
  try {
    manifest = JSON.parse(
      readFileSync(join(root, 'node_modules', '.cache', 'agentry', 'bundles', 'manifest.json'), 'utf8'),
    );
  } catch {
    return redirects;
  }
  if (manifest?.format !== 1 || !Array.isArray(manifest.packages)) return redirects;
  for (const entry of manifest.packages) {
    let current;
    try {
      current = readFileSync(join(root, 'node_modules', entry.name, 'package.json'), 'utf8');
    } catch {
      continue;
    }
    if (current !== entry.packageJson) continue;
    // Node.js resolves a module to its real path: a project reached through a symbolic link (or a linked
    // node_modules) must still match.
    let pairs;
    try {
      pairs = Object.entries(entry.entries).map(([file, bundle]) => [
        pathToFileURL(realpathSync(join(root, file))).href,
        pathToFileURL(join(root, bundle)).href,
      ]);
    } catch {
      continue; // an entry file gone: the package is not the one bundled
    }
    for (const [file, bundle] of pairs) redirects.set(file, bundle);
  }
  return redirects;
}

/** Installs the redirection for this thread; returns how many entry files it covers (0: none, or turned off). */
export async function useDependencyBundles() {
  if (process.env.AGENTRY_DEPENDENCY_BUNDLES === '0') return 0;
  const redirects = bundleRedirects();
  if (redirects.size === 0) return 0;
  const { registerHooks } = await import('node:module');
  // Node.js 22.15 and newer; an older one loads the packages as installed.
  if (typeof registerHooks !== 'function') return 0;
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const resolved = nextResolve(specifier, context);
      const bundle = redirects.get(resolved.url);
      return bundle === undefined ? resolved : { ...resolved, url: bundle };
    },
  });
  return redirects.size;
}
