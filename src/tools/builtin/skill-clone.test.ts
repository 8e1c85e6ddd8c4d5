import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.ts';
import type { Resolver } from '../../lib/egress.ts';
import { cloneRepository, MAX_REPO_FILES, pinnedCloneUrl, treeSize } from './skill-clone.ts';

const GIT = '/usr/bin/git';
const root = mkdtempSync(join(tmpdir(), 'agentry-skill-clone-'));
const identity = ['-c', 'user.email=test@example.com', '-c', 'user.name=test'];

/** A bare repository `<root>/<name>.git` holding `files` (path to content) in one commit. */
function repository(name: string, files: Record<string, string | Buffer>): string {
  const work = join(root, `${name}-work`);
  mkdirSync(work, { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(work, path, '..'), { recursive: true });
    writeFileSync(join(work, path), content);
  }
  execFileSync(GIT, ['init', '-q', work]);
  execFileSync(GIT, ['-C', work, 'add', '.']);
  execFileSync(GIT, [...identity, '-C', work, 'commit', '-qm', 'skills']);
  const bare = join(root, `${name}.git`);
  execFileSync(GIT, ['clone', '-q', '--bare', work, bare]);
  return bare;
}

/** A bare repository with `count` files of one tiny blob, written with fast-import (a checkout is never made). */
function manyFiles(name: string, count: number): string {
  const bare = join(root, `${name}.git`);
  execFileSync(GIT, ['init', '-q', '--bare', bare]);
  const lines = [
    'blob',
    'mark :1',
    'data 2',
    'x',
    'commit refs/heads/main',
    'committer t <t@t> 0 +0000',
    'data 1',
    'x',
  ];
  for (let index = 0; index < count; index++) lines.push(`M 100644 :1 f${index}`);
  execFileSync(GIT, ['-C', bare, 'fast-import', '--quiet'], { input: `${lines.join('\n')}\n` });
  execFileSync(GIT, ['-C', bare, 'symbolic-ref', 'HEAD', 'refs/heads/main']);
  return bare;
}

/** Git's smart HTTP protocol on 127.0.0.1 (git http-backend as CGI); `/moved/…` redirects to the real path. */
async function gitHttpServer(): Promise<{ server: http.Server; port: number; requests: string[] }> {
  const requests: string[] = [];
  const server = http.createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://git');
    requests.push(`${request.method} ${url.pathname}`);
    if (url.pathname.startsWith('/moved/')) {
      response.writeHead(302, { location: `${url.pathname.slice('/moved'.length)}${url.search}` });
      response.end();
      return;
    }
    const cgi = spawn(GIT, ['http-backend'], {
      env: {
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: request.method ?? 'GET',
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: request.headers['content-type'] ?? '',
        GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
      },
    });
    request.pipe(cgi.stdin);
    const chunks: Buffer[] = [];
    cgi.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    cgi.on('close', () => {
      const output = Buffer.concat(chunks);
      const split = output.indexOf('\r\n\r\n');
      const head = output.subarray(0, split).toString().split('\r\n');
      const status = Number(/^Status: (\d+)/m.exec(head.join('\n'))?.[1] ?? 200);
      const headers = Object.fromEntries(
        head.filter((line) => !line.startsWith('Status:')).map((line) => line.split(/:\s*/, 2) as [string, string]),
      );
      response.writeHead(status, headers);
      response.end(output.subarray(split + 4));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, requests };
}

const names: Resolver = {
  async lookup(hostname) {
    if (hostname !== 'skills.example.test') throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return [{ address: '127.0.0.1', family: 4 }];
  },
};

let scratch = 0;
function clone(url: string, extra: { maxBytes?: number; resolver?: Resolver } = {}) {
  const into = join(root, `clone-${++scratch}`);
  const done = cloneRepository({
    git: GIT,
    url,
    into,
    home: root,
    timeoutMs: 30_000,
    maxBytes: extra.maxBytes ?? 10 * 1024 * 1024,
    resolver: extra.resolver,
    signal: new AbortController().signal,
  });
  return { into, done };
}

let git: { server: http.Server; port: number; requests: string[] };
beforeAll(async () => {
  repository('small', { 'writing/SKILL.md': '# Writing\n' });
  git = await gitHttpServer();
});
afterAll(async () => {
  await new Promise<void>((resolve) => git.server.close(() => resolve()));
  rmSync(root, { recursive: true, force: true });
});

describe('cloneRepository', () => {
  it('clones and checks out a repository within bounds', async () => {
    const { into, done } = clone(`file://${root}/small.git`);
    await done;
    expect(readFileSync(join(into, 'writing', 'SKILL.md'), 'utf8')).toBe('# Writing\n');
  });

  it('connects over http to the address the guard checked, which git could not resolve itself', async () => {
    const { into, done } = clone(`http://skills.example.test:${git.port}/small.git`, { resolver: names });
    await done;
    expect(readFileSync(join(into, 'writing', 'SKILL.md'), 'utf8')).toBe('# Writing\n');
    expect(git.requests).toContain('GET /small.git/info/refs');
  });

  it('does not follow a redirect', async () => {
    const before = git.requests.length;
    const { into, done } = clone(`http://skills.example.test:${git.port}/moved/small.git`, { resolver: names });
    await expect(done).rejects.toThrow();
    expect(existsSync(join(into, 'writing'))).toBe(false);
    expect(git.requests.slice(before)).toEqual(['GET /moved/small.git/info/refs']);
  });

  it('refuses a download larger than maxBytes', async () => {
    repository('noisy', { 'big.bin': randomBytes(512 * 1024) });
    const { done } = clone(`file://${root}/noisy.git`, { maxBytes: 128 * 1024 });
    await expect(done).rejects.toThrow('the repository is larger than 131072 bytes');
  });

  it('refuses a checkout larger than maxBytes, however small the download', async () => {
    repository('zeros', { 'zeros.bin': Buffer.alloc(1024 * 1024) });
    const { into, done } = clone(`file://${root}/zeros.git`, { maxBytes: 128 * 1024 });
    await expect(done).rejects.toThrow('the repository is larger than 131072 bytes');
    expect(existsSync(join(into, 'zeros.bin'))).toBe(false);
  });

  it('refuses a repository with more files than MAX_REPO_FILES', async () => {
    manyFiles('crowded', MAX_REPO_FILES + 1);
    const { into, done } = clone(`file://${root}/crowded.git`);
    await expect(done).rejects.toThrow(`more than ${MAX_REPO_FILES} files`);
    expect(existsSync(join(into, 'f0'))).toBe(false);
  });
});

describe('pinnedCloneUrl', () => {
  it('has a host the operator chose: AGENTRY_SKILLS_GIT_URL keeps {repo} out of it', () => {
    for (const url of ['https://{repo}.example.com/x.git', 'https://git.{repo}/x.git']) {
      expect(() => loadConfig({ AGENTRY_SKILLS_GIT_URL: url }), url).toThrow('must have {repo} in its path');
    }
    expect(loadConfig({ AGENTRY_SKILLS_GIT_URL: 'https://github.com/{repo}.git' }).skills.gitUrl).toBe(
      'https://github.com/{repo}.git',
    );
  });

  it('pins http(s) names with curl, names the address in git:// URLs and allows only the URL scheme', async () => {
    const https = await pinnedCloneUrl('https://skills.example.test/acme/skills.git', names);
    expect(https.url).toBe('https://skills.example.test/acme/skills.git');
    expect(https.config).toEqual([
      '-c',
      'protocol.allow=never',
      '-c',
      'protocol.https.allow=always',
      '-c',
      'http.followRedirects=false',
      '-c',
      'http.curloptResolve=skills.example.test:443:127.0.0.1',
    ]);
    const daemon = await pinnedCloneUrl('git://skills.example.test:9418/acme/skills.git', names);
    expect(daemon.url).toBe('git://127.0.0.1:9418/acme/skills.git');
    expect(daemon.config).toContain('protocol.git.allow=always');
    await expect(pinnedCloneUrl('https://unknown.example.test/x.git', names)).rejects.toThrow('could not resolve');
  });

  it('counts the files and bytes a checkout writes from ls-tree', () => {
    const listing = [
      '100644 blob 45b983be36b73c0788dc9cbcb76cbb80fc7bb057       3\ta/f.txt',
      '120000 blob 3594e94c04db171e2767224db355f514b13715c5      11\tlink',
      '160000 commit 3594e94c04db171e2767224db355f514b13715c5       -\tsub',
      '',
    ].join('\0');
    expect(treeSize(listing)).toEqual({ files: 2, bytes: 14 });
  });
});
