#!/usr/bin/env node
// Entry point of the `agentry` command and of `npm start`. Plain JavaScript that every Node.js can parse, so that
// a Node.js too old to run TypeScript hears why at once, before any .ts file is loaded (static imports would be
// resolved first, hence the dynamic one).
const MINIMUM = { major: 22, minor: 18 };
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);

if (major < MINIMUM.major || (major === MINIMUM.major && minor < MINIMUM.minor)) {
  process.stderr.write(
    `Agentry needs Node.js ${MINIMUM.major}.${MINIMUM.minor} or newer; you have ${process.versions.node}.\n` +
      'Install Node.js 24: with nvm, run `nvm install` here (it reads .nvmrc); otherwise see https://nodejs.org/en/download\n',
  );
  process.exit(1);
}

await import('../src/cli/main.ts');
