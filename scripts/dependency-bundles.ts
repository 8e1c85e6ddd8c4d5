/**
 * Bundles the dependencies made of hundreds of small ES modules (TypeBox, Kysely) into a few files each, so that a
 * server's start does not resolve and link them one by one: most of a warm start's time went to Node's module
 * loader, and these two packages were 630 of the 1,468 modules a server loaded (docs/performance.md, start-up).
 * Run by the root package's `postinstall` after the console's build; `bin/dependency-bundles.js` puts the bundles in
 * the place of the packages' own files when a process starts. The bundles live in node_modules/.cache, so every
 * `npm ci` makes them again from what it installed; a bundle whose package has changed since is not used.
 *
 * Bundling is an optimization only: without a bundler (rolldown, which the console's Vite brings) or with
 * AGENTRY_DEPENDENCY_BUNDLES=0, the packages load as installed.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, resolve } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
export const BUNDLES_DIR = join(ROOT, 'node_modules', '.cache', 'agentry', 'bundles');
export const MANIFEST = join(BUNDLES_DIR, 'manifest.json');

/** The packages bundled: ES modules only (a CommonJS package's `require` semantics are not the bundler's to keep). */
export const BUNDLED_PACKAGES = ['typebox', 'kysely'] as const;

/** What bin/dependency-bundles.js reads: per package, its package.json as bundled and its files' replacements. */
export interface BundleManifest {
  format: 1;
  packages: {
    name: string;
    /** The package's package.json when it was bundled; a package whose file differs since is not replaced. */
    packageJson: string;
    /** Entry file of the package (relative to the project root) → the bundle that replaces it (same). */
    entries: Record<string, string>;
  }[];
}

type ExportTarget = string | { [condition: string]: ExportTarget } | null;

/** The file an export target names for `import` under Node.js (conditions `node`, `import`, `default`), if any. */
function importTarget(target: ExportTarget): string | undefined {
  if (typeof target === 'string') return target;
  if (target === null || typeof target !== 'object') return undefined;
  for (const [condition, value] of Object.entries(target)) {
    if (condition === 'node' || condition === 'import' || condition === 'default') {
      const file = importTarget(value);
      if (file !== undefined) return file;
    }
  }
  return undefined;
}

/** The package's entry files by export subpath ('.', './value', …): the files other modules can import. */
export function packageEntries(packageDir: string): Record<string, string> {
  const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
    exports?: ExportTarget | Record<string, ExportTarget>;
    module?: string;
    main?: string;
  };
  const exportsField = manifest.exports;
  const entries: Record<string, string> = {};
  const subpaths =
    exportsField !== undefined &&
    exportsField !== null &&
    typeof exportsField === 'object' &&
    Object.keys(exportsField).every((key) => key.startsWith('.'))
      ? (exportsField as Record<string, ExportTarget>)
      : { '.': (exportsField ?? manifest.module ?? manifest.main ?? 'index.js') as ExportTarget };
  for (const [subpath, target] of Object.entries(subpaths)) {
    // Patterns (`./*`) and non-JavaScript exports (`./package.json`) are left to the installed package.
    if (subpath.includes('*')) continue;
    const file = importTarget(target);
    if (file === undefined || !/\.(m?js)$/.test(file)) continue;
    entries[subpath] = resolve(packageDir, file);
  }
  return entries;
}

/** The rolldown module of this install: the root's (a development install) or the console's (always installed). */
async function loadBundler(): Promise<typeof import('rolldown') | null> {
  for (const base of [ROOT, join(ROOT, 'console')]) {
    try {
      const path = createRequire(join(base, 'package.json')).resolve('rolldown');
      return (await import(path)) as typeof import('rolldown');
    } catch {}
  }
  return null;
}

/** Bundles each package of BUNDLED_PACKAGES and writes the manifest; returns it, or null without a bundler. */
export async function buildDependencyBundles(): Promise<BundleManifest | null> {
  const bundler = await loadBundler();
  if (bundler === null) return null;
  rmSync(BUNDLES_DIR, { recursive: true, force: true });
  mkdirSync(BUNDLES_DIR, { recursive: true });
  const manifest: BundleManifest = { format: 1, packages: [] };
  for (const name of BUNDLED_PACKAGES) {
    const packageDir = join(ROOT, 'node_modules', name);
    const entries = packageEntries(packageDir);
    // One build of all of a package's entries: code they share goes into shared chunks, loaded once.
    const inputs = Object.fromEntries(
      Object.keys(entries).map((subpath, index) => [`entry-${index}`, entries[subpath] as string]),
    );
    const outDir = join(BUNDLES_DIR, name);
    await bundler.build({
      input: inputs,
      platform: 'node',
      // Anything outside the package (another package, a Node.js built-in) stays an import.
      external: (id, importer) =>
        importer !== undefined && !id.startsWith('.') && !id.startsWith('/') && !id.startsWith(packageDir),
      logLevel: 'silent',
      output: { dir: outDir, format: 'esm', entryFileNames: '[name].mjs', chunkFileNames: 'chunk-[hash].mjs' },
    });
    const replaced: Record<string, string> = {};
    Object.values(entries).forEach((file, index) => {
      replaced[relative(ROOT, file)] = relative(ROOT, join(outDir, `entry-${index}.mjs`));
    });
    manifest.packages.push({
      name,
      packageJson: readFileSync(join(packageDir, 'package.json'), 'utf8'),
      entries: replaced,
    });
  }
  writeFileSync(MANIFEST, `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

if (import.meta.main) {
  const started = performance.now();
  let outcome: string;
  try {
    const manifest = await buildDependencyBundles();
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    outcome =
      manifest === null
        ? 'no bundler installed; packages load as installed'
        : `${manifest.packages.map((entry) => entry.name).join(', ')} in ${seconds} s`;
  } catch (error) {
    // An optimization only: a failed bundle must not fail the install. Without a manifest, nothing is redirected.
    rmSync(BUNDLES_DIR, { recursive: true, force: true });
    outcome = `not made (${error instanceof Error ? error.message : String(error)}); packages load as installed`;
  }
  process.stdout.write(`dependency bundles: ${outcome}\n`);
}
