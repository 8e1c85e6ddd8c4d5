/**
 * Keeps the turn's code readable: no function in src/engine/ (the loop), src/domain/turns/ (the turn's front door,
 * the only writer of its tables) or src/domain/elicitations/ (the answers that resume a suspended turn) longer than
 * 60 lines or taking more than 5 parameters (an options object counts as one). A function that outgrows this wants a context object or smaller steps (src/engine/ARCHITECTURE.md). Parsed
 * with the TypeScript compiler, so a comment or a string never counts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const MAX_LINES = 60;
const MAX_PARAMETERS = 5;

const srcDir = join(import.meta.dirname, '..', 'src');
/**
 * The folders held to the rule, relative to src/ (their own files, not their subfolders), each with the fewest
 * functions it holds: a parse that finds fewer has gone wrong.
 */
const FOLDERS: Readonly<Record<string, number>> = { engine: 20, 'domain/turns': 20, 'domain/elicitations': 4 };

interface FunctionShape {
  /** `folder/file:line name`, as the failure names it. */
  where: string;
  lines: number;
  parameters: number;
}

/** The name a function is known by: its own, or the variable, property or class member it is assigned to. */
function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(source);
  if (ts.isBinaryExpression(parent) && parent.operatorToken.kind === ts.SyntaxKind.EqualsToken)
    return parent.left.getText(source);
  return '(anonymous)';
}

function isFunctionWithBody(node: ts.Node): node is ts.FunctionLikeDeclaration {
  const functionLike =
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node);
  return functionLike && node.body !== undefined;
}

/**
 * Every function-like node of a file (declarations, methods, accessors, constructors, arrows, expressions); `file`
 * is its path under src/.
 */
function functionsOf(file: string): FunctionShape[] {
  const text = readFileSync(join(srcDir, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: FunctionShape[] = [];
  const visit = (node: ts.Node): void => {
    if (isFunctionWithBody(node)) {
      const fn = node;
      // From the function's first token (its JSDoc excluded) to its last.
      const first = source.getLineAndCharacterOfPosition(fn.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(fn.getEnd()).line;
      const parameters = fn.parameters.filter((p) => p.name.getText(source) !== 'this').length;
      found.push({ where: `${file}:${first + 1} ${nameOf(fn, source)}`, lines: last - first + 1, parameters });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const files = Object.keys(FOLDERS).flatMap((folder) =>
  readdirSync(join(srcDir, folder))
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts'))
    .map((name) => `${folder}/${name}`),
);

describe('the shape of src/engine/, src/domain/turns/ and src/domain/elicitations/', () => {
  it('finds the files of each folder and their functions', () => {
    expect(files).toContain('engine/turn.ts');
    expect(files).toContain('engine/engine.ts');
    expect(files).toContain('domain/turns/accept.ts');
    expect(files).toContain('domain/turns/message-service.ts');
    expect(files).toContain('domain/elicitations/elicitations.ts');
    for (const [folder, fewest] of Object.entries(FOLDERS)) {
      const inFolder = files.filter((file) => file.startsWith(`${folder}/`));
      expect(inFolder.flatMap(functionsOf).length, folder).toBeGreaterThanOrEqual(fewest);
    }
  });

  it(`has no function longer than ${MAX_LINES} lines`, () => {
    const long = files
      .flatMap(functionsOf)
      .filter((fn) => fn.lines > MAX_LINES)
      .map((fn) => `${fn.where}: ${fn.lines} lines`);
    expect(long).toEqual([]);
  });

  it(`has no function with more than ${MAX_PARAMETERS} parameters`, () => {
    const wide = files
      .flatMap(functionsOf)
      .filter((fn) => fn.parameters > MAX_PARAMETERS)
      .map((fn) => `${fn.where}: ${fn.parameters} parameters`);
    expect(wide).toEqual([]);
  });
});
