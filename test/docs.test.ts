import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');

describe('documentation stays in step with the code', () => {
  it('docs/configuration.md lists every variable config.ts reads', () => {
    const names = [...read('src/config.ts').matchAll(/\(env, '([A-Z_0-9]+)'/g)].map((match) => match[1]);
    expect(names.length).toBeGreaterThan(15);
    const doc = read('docs/configuration.md');
    for (const name of names) expect(doc, name).toContain(`\`${name}\``);
  });

  it('never tells to run the CLI as `npx agentry …`, which outside the project runs an unrelated npm package', () => {
    const files = [
      'README.md',
      ...['docs', 'src', 'console/src'].flatMap((dir) =>
        readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
          .filter((name) => /\.(md|ts|tsx)$/.test(name))
          .map((name) => join(dir, name)),
      ),
    ];
    expect(files).toContain(join('src', 'main.ts'));
    expect(files.filter((file) => /npx agentry [a-z-]/.test(read(file)))).toEqual([]);
  });

  it('the README links every page in docs/', () => {
    const readme = read('README.md');
    for (const page of [
      'docs/configuration.md',
      'docs/errors.md',
      'docs/agents.md',
      'docs/sessions.md',
      'docs/models.md',
      'docs/runs.md',
      'docs/usage.md',
      'docs/responses.md',
      'docs/files.md',
      'docs/webhooks.md',
      'docs/operations.md',
      'docs/tools.md',
      'docs/console.md',
      'docs/sandbox.md',
      'docs/observability.md',
    ]) {
      expect(readme, page).toContain(page);
    }
  });
});
