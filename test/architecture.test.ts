/**
 * The import layers of src/ (src/ARCHITECTURE.md explains them): reads every non-test module under src/, follows
 * each relative import (`import`, `import type`, `export … from`, dynamic `import()`, `import('…')` types, and the
 * module a worker thread loads through `new URL('./x.ts', import.meta.url)`) and fails, naming file, line and rule,
 * on an import that climbs a layer, an import cycle between top-level areas, or an import of another domain
 * feature's internals. Type-only imports count: a type that a lower layer needs belongs in that layer.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '..', 'src');

/**
 * The layers, lowest first. An area is a folder of src/ or one of its top-level files (`config.ts` and the
 * `config/` folder are both the area `config`). A module may import from its own area and from the areas of lower
 * tiers; areas of one tier know nothing of each other.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['lib'],
  ['errors'],
  ['config'],
  ['storage', 'workers'],
  ['events'],
  ['logger', 'models', 'bus'],
  ['tools'],
  ['domain'],
  ['observability'],
  ['engine', 'webhooks'],
  ['deps'],
  ['http'],
  ['app'],
  ['main'],
  ['cli'],
];

/**
 * The modules each feature of src/domain/ offers the other features; every other module of a feature is its own
 * (its stores, views, validation, runners). The domain's top-level modules (outbox, idempotency, pagination) are
 * shared by every feature and follow the same rule. The layers above the domain compose features and may use any
 * of their modules.
 */
const DOMAIN_EXPOSES: Readonly<Record<string, readonly string[]>> = {
  a2a: [],
  agents: ['agent-repo.ts', 'agent-service.ts', 'agent-types.ts'],
  apply: [],
  approvals: ['approvals.ts'],
  audit: ['audit-log.ts'],
  auth: ['scopes.ts'],
  billing: ['budgets.ts', 'credits.ts'],
  'chat-completions': [],
  elicitations: ['elicitations.ts'],
  files: ['file-retention.ts', 'image-import.ts'],
  limits: ['limit-store.ts'],
  'mcp-servers': ['mcp-server-service.ts', 'mcp-server-types.ts'],
  memories: [],
  'protocol-turns': [],
  orgs: [],
  reports: [],
  retention: [],
  responses: ['agent-ref.ts', 'openai-items.ts', 'response-settings.ts', 'response-stream.ts', 'response-view.ts'],
  runs: ['cursor.ts', 'preview.ts', 'spans.ts'],
  schedules: ['schedule-service.ts', 'schedule-types.ts'],
  sessions: ['new-sessions.ts', 'session-service.ts'],
  tasks: ['task-events.ts'],
  threads: ['thread-service.ts'],
  turns: [
    'accept.ts',
    'client-outputs.ts',
    'context-builder.ts',
    'history-items.ts',
    'item-store.ts',
    'items.ts',
    'local-claims.ts',
    'message-options.ts',
    'message-service.ts',
    'message-types.ts',
    'message-view.ts',
    'message-wait.ts',
    'pending-calls.ts',
    'retention.ts',
    'session-rows.ts',
    'transitions.ts',
    'turn-hooks.ts',
    'turn-store.ts',
  ],
  usage: [],
  webhooks: [
    'endpoint-service.ts',
    'subscriptions.ts',
    'webhook-events.ts',
    'webhook-retention.ts',
    'webhook-types.ts',
  ],
  workflows: ['workflow-service.ts'],
};

interface ModuleImport {
  specifier: string;
  line: number;
}

/** Every module a source text refers to, with the line it does so on. */
function importsOf(fileName: string, text: string): ModuleImport[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: ModuleImport[] = [];
  const add = (node: ts.Node, literal: ts.Node | undefined) => {
    if (literal === undefined) return;
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    // A specifier the check cannot read is reported rather than skipped.
    found.push({ specifier: ts.isStringLiteralLike(literal) ? literal.text : `<${literal.getText(source)}>`, line });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node, node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
      add(node, node.moduleReference.expression);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword)
      add(node, node.arguments[0]);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal);
    else if (ts.isNewExpression(node) && isModuleUrl(node)) add(node, node.arguments?.[0]);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `new URL('./module.ts', import.meta.url)`: the module a worker thread is started on. */
function isModuleUrl(node: ts.NewExpression): boolean {
  const [first, second] = node.arguments ?? [];
  return (
    ts.isIdentifier(node.expression) &&
    node.expression.text === 'URL' &&
    first !== undefined &&
    ts.isStringLiteralLike(first) &&
    first.text.endsWith('.ts') &&
    second !== undefined &&
    second.getText() === 'import.meta.url'
  );
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return sourceFiles(path);
      return name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts') ? [path] : [];
    });
}

/** `config.ts` and `config/x.ts` → config; `domain/turns/items.ts` → domain. */
const areaOf = (path: string): string => (path.split('/')[0] ?? '').replace(/\.ts$/, '');

/** `domain/turns/items.ts` → turns; a top-level domain module → null. */
const featureOf = (path: string): string | null => {
  const parts = path.split('/');
  return parts[0] === 'domain' && parts.length > 2 ? (parts[1] ?? null) : null;
};

const TIER = new Map(LAYERS.flatMap((areas, tier) => areas.map((area) => [area, tier] as const)));

interface Edge {
  from: string;
  to: string;
  line: number;
  specifier: string;
}

/** Every relative import between modules of src/ (paths relative to src/), and the ones that lead nowhere. */
function importGraph(root: string): { edges: Edge[]; unresolved: string[] } {
  const edges: Edge[] = [];
  const unresolved: string[] = [];
  for (const file of sourceFiles(root)) {
    const from = relative(root, file);
    for (const { specifier, line } of importsOf(file, readFileSync(file, 'utf8'))) {
      if (specifier.startsWith('<')) {
        unresolved.push(`src/${from}:${line}: import of ${specifier}, which the check cannot follow`);
        continue;
      }
      if (!specifier.startsWith('.')) continue;
      const target = resolve(dirname(file), specifier);
      if (!existsSync(target) || !statSync(target).isFile()) {
        unresolved.push(`src/${from}:${line}: '${specifier}' is no file`);
        continue;
      }
      const to = relative(root, target);
      if (to.startsWith('..')) continue; // outside src/ (package.json, the console's build): no layer
      edges.push({ from, to, line, specifier });
    }
  }
  return { edges, unresolved };
}

/** Rule (a): an import into an area of a higher tier, or of the same tier. */
function climbingImports(edges: readonly Edge[]): string[] {
  const problems: string[] = [];
  for (const edge of edges) {
    const from = areaOf(edge.from);
    const to = areaOf(edge.to);
    if (from === to) continue;
    const fromTier = TIER.get(from);
    const toTier = TIER.get(to);
    if (fromTier === undefined || toTier === undefined) continue; // reported by the areas test
    if (toTier >= fromTier)
      problems.push(
        `src/${edge.from}:${edge.line}: '${edge.specifier}': ${from} (tier ${fromTier}) may not import ${to} (tier ${toTier}): ${toTier === fromTier ? 'areas of one tier know nothing of each other' : 'the import climbs a layer'}`,
      );
  }
  return problems;
}

/** Rule (b): cycles in the graph of areas, each named with one import per step. */
function areaCycles(edges: readonly Edge[]): string[] {
  const example = new Map<string, Edge>();
  const next = new Map<string, Set<string>>();
  for (const edge of edges) {
    const from = areaOf(edge.from);
    const to = areaOf(edge.to);
    if (from === to) continue;
    if (!example.has(`${from} ${to}`)) example.set(`${from} ${to}`, edge);
    next.set(from, (next.get(from) ?? new Set()).add(to));
  }
  // Tarjan's strongly connected components: every component of more than one area holds a cycle.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const components: string[][] = [];
  const connect = (area: string) => {
    index.set(area, index.size);
    low.set(area, index.get(area) ?? 0);
    stack.push(area);
    for (const to of next.get(area) ?? []) {
      if (!index.has(to)) {
        connect(to);
        low.set(area, Math.min(low.get(area) ?? 0, low.get(to) ?? 0));
      } else if (stack.includes(to)) low.set(area, Math.min(low.get(area) ?? 0, index.get(to) ?? 0));
    }
    if (low.get(area) === index.get(area)) {
      const component: string[] = [];
      for (let top = stack.pop(); top !== undefined; top = top === area ? undefined : stack.pop()) component.push(top);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const area of [...next.keys()].sort()) if (!index.has(area)) connect(area);
  // Each component is reported as the shortest cycle through each of its areas, with one import per step.
  const cycles = new Map<string, string[]>();
  for (const component of components) {
    const inside = new Set(component);
    for (const start of component) {
      const previous = new Map<string, string>();
      const queue = [start];
      for (let at = 0; at < queue.length && !previous.has(start); at++) {
        const area = queue[at] ?? '';
        for (const to of [...(next.get(area) ?? [])].sort()) {
          if (!inside.has(to) || previous.has(to)) continue;
          previous.set(to, area);
          queue.push(to);
        }
      }
      const path = [start];
      for (let area = previous.get(start); area !== undefined && area !== start; area = previous.get(area))
        path.unshift(area);
      const first = path.indexOf([...path].sort()[0] ?? start);
      const cycle = [...path.slice(first), ...path.slice(0, first)];
      cycles.set(cycle.join(' '), cycle);
    }
  }
  return [...cycles.values()].map((cycle) => {
    const steps = cycle.map((from, at) => {
      const edge = example.get(`${from} ${cycle[(at + 1) % cycle.length]}`);
      return edge === undefined ? '' : `src/${edge.from}:${edge.line} imports '${edge.specifier}'`;
    });
    return `import cycle ${[...cycle, cycle[0]].join(' -> ')}: ${steps.join('; ')}`;
  });
}

/** Rule (c): a domain module importing a module another feature keeps to itself. */
function internalImports(edges: readonly Edge[]): string[] {
  const problems: string[] = [];
  for (const edge of edges) {
    if (areaOf(edge.from) !== 'domain') continue;
    const feature = featureOf(edge.to);
    if (feature === null || feature === featureOf(edge.from)) continue;
    const module = edge.to.split('/').slice(2).join('/');
    const exposed = DOMAIN_EXPOSES[feature];
    if (exposed?.includes(module)) continue;
    problems.push(
      `src/${edge.from}:${edge.line}: '${edge.specifier}': domain/${feature}/${module} is internal to domain/${feature} (DOMAIN_EXPOSES lists what it offers other features)`,
    );
  }
  return problems;
}

describe('import layers of src/', () => {
  const { edges, unresolved } = importGraph(SRC);

  it('reads every form of import', () => {
    const text = [
      "import a from './a.ts';",
      "import type { B } from './b.ts';",
      "import { type C, d } from './c.ts';",
      "import './side-effect.ts';",
      "export { e } from './e.ts';",
      "export type { F } from './f.ts';",
      "export * from './g.ts';",
      "const h = await import('./h.ts');",
      "type I = typeof import('./i.ts');",
      "let j: import('./j.ts').J;",
      "const worker = new URL('./k.ts', import.meta.url);",
      'const dynamic = await import(name);',
    ].join('\n');
    expect(importsOf('probe.ts', text)).toEqual([
      { specifier: './a.ts', line: 1 },
      { specifier: './b.ts', line: 2 },
      { specifier: './c.ts', line: 3 },
      { specifier: './side-effect.ts', line: 4 },
      { specifier: './e.ts', line: 5 },
      { specifier: './f.ts', line: 6 },
      { specifier: './g.ts', line: 7 },
      { specifier: './h.ts', line: 8 },
      { specifier: './i.ts', line: 9 },
      { specifier: './j.ts', line: 10 },
      { specifier: './k.ts', line: 11 },
      { specifier: '<name>', line: 12 },
    ]);
  });

  it('sees the imports of the whole tree', () => {
    // A scanner that stopped finding imports would pass every rule below.
    expect(edges.length).toBeGreaterThan(1000);
    expect(unresolved).toEqual([]);
  });

  it('places every area of src/ in one tier', () => {
    const areas = new Set(sourceFiles(SRC).map((file) => areaOf(relative(SRC, file))));
    expect([...areas].filter((area) => !TIER.has(area))).toEqual([]);
    const listed = LAYERS.flat();
    expect(listed.filter((area, at) => listed.indexOf(area) !== at)).toEqual([]);
    expect(listed.filter((area) => !areas.has(area))).toEqual([]);
  });

  it('lists every feature of src/domain/ and only modules it has', () => {
    const features = readdirSync(join(SRC, 'domain')).filter((name) =>
      statSync(join(SRC, 'domain', name)).isDirectory(),
    );
    expect(Object.keys(DOMAIN_EXPOSES).sort()).toEqual(features.sort());
    const missing = Object.entries(DOMAIN_EXPOSES).flatMap(([feature, modules]) =>
      modules.filter((module) => !existsSync(join(SRC, 'domain', feature, module))).map((m) => `${feature}/${m}`),
    );
    expect(missing).toEqual([]);
  });

  it('(a) imports only from lower layers', () => {
    expect(climbingImports(edges)).toEqual([]);
  });

  it('(b) has no import cycle between areas', () => {
    expect(areaCycles(edges)).toEqual([]);
  });

  it("(c) imports no other domain feature's internals", () => {
    expect(internalImports(edges)).toEqual([]);
  });
});
