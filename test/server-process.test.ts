/**
 * The server and CLI as separate processes: first start, bootstrap key, CLI beside a running server, graceful
 * shutdown, bad configuration and what reaches the logs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialects, testEnvironment, testKey } from './helpers/harness.ts';
import { runCli, type ServerProcess, startServerProcess, startsTimeout } from './helpers/server-process.ts';

async function call(url: string, key: string, method = 'GET', body?: unknown) {
  const response = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

describe.each(dialects())('server process (%s)', (dialect) => {
  let environment: ReturnType<typeof testEnvironment>;
  let server: ServerProcess;
  let adminKey: string;

  beforeAll(async () => {
    environment = testEnvironment(dialect);
    server = await startServerProcess(environment.env);
    const match = /(agk_[A-Za-z0-9]{40})/.exec(server.output());
    expect(match, 'the first start prints an admin key').not.toBeNull();
    adminKey = match?.[1] ?? '';
  });
  afterAll(async () => {
    await server.stop('SIGKILL');
    await environment.cleanup();
  });

  it('prints a working admin key once on first start', async () => {
    const agents = await call(`${server.url}/v1/agents`, adminKey);
    expect(agents.status).toBe(200);
    expect(agents.body.data).toHaveLength(1);
    expect(agents.body.data[0].isDefault).toBe(true);
  });

  it(
    'runs the CLI beside the running server',
    async () => {
      const created = runCli(['orgs', 'create', `acme-${dialect}`], environment.env);
      // Standard error names the database and carries nothing else.
      expect(created.stderr).toMatch(/^agentry: database \S[^\n]*\n$/);
      expect(created.status).toBe(0);

      const keyRun = runCli(['keys', 'create', '--org', `acme-${dialect}`, '--scopes', 'tasks:read'], environment.env);
      expect(keyRun.status).toBe(0);
      expect(keyRun.stdout).toMatch(/^agk_[A-Za-z0-9]{40}\n$/);
      const readKey = keyRun.stdout.trim();
      const list = await call(`${server.url}/v1/agents`, readKey);
      expect(list.status).toBe(200);
      expect(list.body.data.map((agent: { isDefault: boolean }) => agent.isDefault)).toEqual([true]);
      expect((await call(`${server.url}/v1/agents`, readKey, 'POST', { name: 'x' })).status).toBe(403);

      expect(runCli(['credits', 'set', '--org', `acme-${dialect}`, '12.5'], environment.env).status).toBe(0);
      expect(runCli(['migrate'], environment.env).status).toBe(0);

      const revoke = runCli(['keys', 'revoke', readKey.slice(0, 12)], environment.env);
      expect(revoke.status).toBe(0);
      expect((await call(`${server.url}/v1/agents`, readKey)).status).toBe(401);

      const unknown = runCli(['keys', 'create', '--org', 'nobody'], environment.env);
      expect(unknown.status).toBe(1);
      expect(unknown.stderr).toContain('nobody');
      expect(
        runCli(['keys', 'create', '--org', `acme-${dialect}`, '--scopes', 'root'], environment.env).stderr,
      ).toContain('unknown scopes');
    },
    startsTimeout(8),
  );

  it('never writes a key into a log line', async () => {
    await call(`${server.url}/v1/agents`, adminKey);
    await call(`${server.url}/v1/agents`, `agk_${'Z'.repeat(40)}`);
    const logLines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'));
    expect(logLines.length).toBeGreaterThan(3);
    for (const line of logLines) {
      expect(line).not.toContain(adminKey);
      expect(line).not.toContain('Z'.repeat(40));
      expect(JSON.parse(line)).toBeTypeOf('object');
    }
    const requestLines = logLines.map((line) => JSON.parse(line)).filter((entry) => entry.req !== undefined);
    expect(requestLines.length).toBeGreaterThan(0);
    for (const entry of requestLines) expect(entry.reqId).toBeTypeOf('string');
  });

  it('does not print a new key on the next start, and stops cleanly on SIGTERM', async () => {
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(server.output()).toContain('shutting down');
    const again = await startServerProcess(environment.env);
    try {
      expect(again.output()).not.toMatch(/agk_[A-Za-z0-9]{40}/);
      expect((await call(`${again.url}/v1/agents`, adminKey)).status).toBe(200);
    } finally {
      server = again;
    }
  });
});

describe('bootstrap key and configuration errors', () => {
  it('uses AGENTRY_BOOTSTRAP_KEY as the admin key of org default', async () => {
    const environment = testEnvironment('sqlite');
    const key = testKey();
    const server = await startServerProcess({ ...environment.env, AGENTRY_BOOTSTRAP_KEY: key });
    try {
      expect(server.output()).not.toContain(key);
      expect((await call(`${server.url}/v1/sessions`, key)).status).toBe(200);
    } finally {
      await server.stop();
      await environment.cleanup();
    }
  });

  it.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ AGENTRY_BOOTSTRAP_KEY: 'short' }, 'AGENTRY_BOOTSTRAP_KEY'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ AGENTRY_PROVIDERS: '{bad' }, 'AGENTRY_PROVIDERS'],
    [{ AGENTRY_DEFAULT_MODEL: 'nope/model' }, 'AGENTRY_DEFAULT_MODEL'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
  ])('refuses to start with %j, naming %s', async (env, variable) => {
    const environment = testEnvironment('sqlite');
    try {
      await expect(startServerProcess({ ...environment.env, ...env })).rejects.toThrow(
        new RegExp(`exited with 1[\\s\\S]*${variable}`),
      );
    } finally {
      await environment.cleanup();
    }
  });
});
