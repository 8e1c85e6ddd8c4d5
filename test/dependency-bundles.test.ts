/**
 * The dependency bundles (scripts/dependency-bundles.ts, bin/dependency-bundles.js): which entry files a process
 * redirects to their bundles. A bundle replaces its package only while the package's package.json is the one that
 * was bundled; anything else about the manifest that is off means the packages load as installed.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { bundleRedirects } from '../bin/dependency-bundles.js';
import { type BundleManifest, MANIFEST, packageEntries } from '../scripts/dependency-bundles.ts';

let root: string | null = null;
afterEach(() => {
  if (root !== null) rmSync(root, { recursive: true, force: true });
  root = null;
});

const PACKAGE_JSON = '{"name":"pkg","version":"1.0.0","type":"module","exports":{".":"./index.js"}}';

/** A project folder with one installed package `pkg` and a manifest made by `manifest` from its package.json. */
function project(manifest: (packageJson: string) => unknown): string {
  root = mkdtempSync(join(tmpdir(), 'agentry-bundles-'));
  mkdirSync(join(root, 'node_modules', 'pkg'), { recursive: true });
  writeFileSync(join(root, 'node_modules', 'pkg', 'package.json'), PACKAGE_JSON);
  writeFileSync(join(root, 'node_modules', 'pkg', 'index.js'), 'export const value = 1;\n');
  const bundles = join(root, 'node_modules', '.cache', 'agentry', 'bundles');
  mkdirSync(bundles, { recursive: true });
  writeFileSync(join(bundles, 'manifest.json'), JSON.stringify(manifest(PACKAGE_JSON)));
  return root;
}

const ENTRY = 'node_modules/pkg/index.js';
const BUNDLE = 'node_modules/.cache/agentry/bundles/pkg/entry-0.mjs';

describe('bundleRedirects', () => {
  it('redirects each entry file of a package whose package.json is the one bundled', () => {
    const dir = project((packageJson) => ({
      format: 1,
      packages: [{ name: 'pkg', packageJson, entries: { [ENTRY]: BUNDLE } }],
    }));
    expect([...bundleRedirects(dir)]).toEqual([
      [pathToFileURL(join(dir, ENTRY)).href, pathToFileURL(join(dir, BUNDLE)).href],
    ]);
  });

  it('matches the real path Node.js resolves to when the project is reached through a symbolic link', () => {
    const dir = project((packageJson) => ({
      format: 1,
      packages: [{ name: 'pkg', packageJson, entries: { [ENTRY]: BUNDLE } }],
    }));
    const link = `${dir}-link`;
    symlinkSync(dir, link);
    try {
      expect([...bundleRedirects(link)]).toEqual([
        [pathToFileURL(join(dir, ENTRY)).href, pathToFileURL(join(link, BUNDLE)).href],
      ]);
    } finally {
      rmSync(link);
    }
  });

  it('leaves a package alone once one of its entry files is gone', () => {
    const dir = project((packageJson) => ({
      format: 1,
      packages: [{ name: 'pkg', packageJson, entries: { [ENTRY]: BUNDLE, 'node_modules/pkg/gone.js': BUNDLE } }],
    }));
    expect(bundleRedirects(dir).size).toBe(0);
  });

  it('leaves a package alone once its package.json has changed (another version installed since)', () => {
    const dir = project((packageJson) => ({
      format: 1,
      packages: [{ name: 'pkg', packageJson, entries: { [ENTRY]: BUNDLE } }],
    }));
    writeFileSync(join(dir, 'node_modules', 'pkg', 'package.json'), PACKAGE_JSON.replace('1.0.0', '1.0.1'));
    expect(bundleRedirects(dir).size).toBe(0);
  });

  it.each([
    ['another format', (packageJson: string) => ({ format: 2, packages: [{ name: 'pkg', packageJson, entries: {} }] })],
    ['no packages', () => ({ format: 1 })],
    ['a package not installed', () => ({ format: 1, packages: [{ name: 'gone', packageJson: 'x', entries: {} }] })],
    ['not an object', () => 'bundles'],
  ])('redirects nothing for a manifest with %s', (_name, manifest) => {
    expect(bundleRedirects(project(manifest)).size).toBe(0);
  });

  it('redirects nothing without a manifest', () => {
    root = mkdtempSync(join(tmpdir(), 'agentry-bundles-'));
    expect(bundleRedirects(root).size).toBe(0);
  });
});

describe('the bundles of this install', () => {
  it('cover every entry file TypeBox and Kysely export, each replaced by a bundle that is there', () => {
    const manifest = JSON.parse(readFileSync(MANIFEST, 'utf8')) as BundleManifest;
    expect(manifest.packages.map((entry) => entry.name)).toEqual(['typebox', 'kysely']);
    const projectRoot = join(import.meta.dirname, '..');
    for (const entry of manifest.packages) {
      const files = Object.values(packageEntries(join(projectRoot, 'node_modules', entry.name)));
      expect(Object.keys(entry.entries).sort()).toEqual(files.map((file) => file.slice(projectRoot.length + 1)).sort());
      for (const bundle of Object.values(entry.entries))
        expect(readFileSync(join(projectRoot, bundle)).length).toBeGreaterThan(0);
    }
    expect(bundleRedirects().size).toBe(manifest.packages.flatMap((entry) => Object.keys(entry.entries)).length);
  });

  it('export what the packages export', async () => {
    const manifest = JSON.parse(readFileSync(MANIFEST, 'utf8')) as BundleManifest;
    const projectRoot = join(import.meta.dirname, '..');
    for (const entry of manifest.packages) {
      for (const [file, bundle] of Object.entries(entry.entries)) {
        const installed = (await import(pathToFileURL(join(projectRoot, file)).href)) as Record<string, unknown>;
        const bundled = (await import(pathToFileURL(join(projectRoot, bundle)).href)) as Record<string, unknown>;
        expect(Object.keys(bundled).sort(), file).toEqual(Object.keys(installed).sort());
      }
    }
  });
});
