/**
 * Builds the web console into console/dist, which the server serves at /console. Run by the root package's
 * `postinstall` (so `npm install && npm start`, and CI's `npm ci && npm test`, serve it on a fresh clone) and by
 * `npm run console:build`. It installs the console's own locked dependencies when they are missing or changed,
 * and skips the build when the sources have not changed since the last one (a stamp holds their hash), so
 * repeated installs cost a few milliseconds. `npm start` never builds.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
export const CONSOLE_DIR = join(ROOT, 'console');
const DIST = join(CONSOLE_DIR, 'dist');
const STAMP = join(DIST, '.build-stamp');
const LOCK = join(CONSOLE_DIR, 'package-lock.json');
const INSTALL_STAMP = join(CONSOLE_DIR, 'node_modules', '.agentry-lock-hash');
const INPUTS = ['index.html', 'package.json', 'package-lock.json', 'tsconfig.json', 'vite.config.ts', 'public', 'src'];

function files(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => files(join(path, name)));
}

/** A hash of everything the build reads from the console's own sources. */
export function sourceHash(): string {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap((input) => files(join(CONSOLE_DIR, input)))) {
    hash.update(relative(CONSOLE_DIR, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

function read(path: string): string | null {
  return existsSync(path) ? readFileSync(path, 'utf8') : null;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
  const result = spawnSync(command, args, { cwd: CONSOLE_DIR, stdio: 'inherit', env });
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed with ${result.status ?? result.signal}`);
}

/** Installs the console's dependencies if needed and builds it if its sources changed; says which. */
export function ensureConsoleBuilt(log: (line: string) => void = () => {}): 'fresh' | 'built' {
  const lockHash = createHash('sha256').update(readFileSync(LOCK)).digest('hex');
  if (read(INSTALL_STAMP) !== lockHash) {
    log('console: installing its dependencies (npm ci in console/)');
    // npm_config_* of an enclosing `npm install` (global, prefix, omit…) must not steer this install.
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    run(npm, ['ci', '--no-audit', '--no-fund', '--include=dev', '--include=optional']);
    writeFileSync(INSTALL_STAMP, lockHash);
  }
  const hash = sourceHash();
  if (read(STAMP) === hash && existsSync(join(DIST, 'index.html'))) return 'fresh';
  log('console: building (vite build)');
  // Always the production bundle, even when called from a test runner that set NODE_ENV=test.
  const vite = join(CONSOLE_DIR, 'node_modules', 'vite', 'bin', 'vite.js');
  run(process.execPath, [vite, 'build', '--logLevel', 'warn'], { ...process.env, NODE_ENV: 'production' });
  writeFileSync(STAMP, hash);
  return 'built';
}

if (import.meta.main) {
  const started = performance.now();
  const outcome = ensureConsoleBuilt((line) => process.stdout.write(`${line}\n`));
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stdout.write(
    outcome === 'fresh' ? 'console: up to date\n' : `console: built into console/dist in ${seconds} s\n`,
  );
}
