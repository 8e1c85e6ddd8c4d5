import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { NetworkPolicy } from '../tool-config.ts';
import { egressEnabled, normalizeHost, PACKAGE_MANAGER_DOMAINS, policyAllows } from './network-policy.ts';

const policy = (overrides: Partial<NetworkPolicy>): NetworkPolicy => ({
  allow_network_egress: true,
  domain_allowlist: 'none',
  additional_allowed_domains: [],
  allow_public_traffic: false,
  ...overrides,
});

describe('policyAllows', () => {
  it('allows nothing without a policy (the default) or with egress off, whatever the allowlist says', () => {
    expect(policyAllows(null, 'registry.npmjs.org')).toBe(false);
    expect(policyAllows(undefined, 'example.com')).toBe(false);
    const off = policy({ allow_network_egress: false, domain_allowlist: 'all_domains' });
    expect(policyAllows(off, 'example.com')).toBe(false);
    expect(egressEnabled(off)).toBe(false);
    expect(egressEnabled(null)).toBe(false);
    // The positive case: the same allowlist with egress on lets it through.
    expect(policyAllows({ ...off, allow_network_egress: true }, 'example.com')).toBe(true);
  });

  it('all_domains allows any well-formed host, but not garbage', () => {
    const all = policy({ domain_allowlist: 'all_domains' });
    expect(policyAllows(all, 'example.com')).toBe(true);
    expect(policyAllows(all, 'EXAMPLE.com.')).toBe(true);
    expect(policyAllows(all, '93.184.216.34')).toBe(true);
    expect(policyAllows(all, '[2001:4860::8888]')).toBe(true);
    for (const bad of [
      '',
      ' ',
      'exa mple.com',
      'example.com:443',
      'example.com/path',
      'a..b',
      `${'a'.repeat(64)}.com`,
    ]) {
      expect(policyAllows(all, bad), bad).toBe(false);
    }
  });

  it('package_managers_only allows the listed registries and nothing else', () => {
    const packages = policy({ domain_allowlist: 'package_managers_only' });
    for (const host of [
      'registry.npmjs.org',
      'pypi.org',
      'files.pythonhosted.org',
      'crates.io',
      'static.crates.io',
      'index.crates.io',
      'proxy.golang.org',
      'sum.golang.org',
      'deb.debian.org',
      'de.archive.ubuntu.com',
      'dl-cdn.alpinelinux.org',
      'github.com',
      'objects.githubusercontent.com',
      'raw.githubusercontent.com',
      'codeload.github.com',
    ]) {
      expect(policyAllows(packages, host), host).toBe(true);
    }
    for (const host of [
      'example.com',
      'evil-npmjs.org',
      'registry.npmjs.org.evil.com',
      'api.github.com',
      'gist.github.com',
    ]) {
      expect(policyAllows(packages, host), host).toBe(false);
    }
    expect(egressEnabled(packages)).toBe(true);
  });

  it('additional_allowed_domains: exact names, and *. wildcards for subdomains only', () => {
    const extra = policy({ additional_allowed_domains: ['api.example.com', '*.corp.example.org', 'Bücher.example'] });
    expect(policyAllows(extra, 'api.example.com')).toBe(true);
    expect(policyAllows(extra, 'API.Example.Com.')).toBe(true);
    expect(policyAllows(extra, 'www.example.com')).toBe(false);
    expect(policyAllows(extra, 'a.corp.example.org')).toBe(true);
    expect(policyAllows(extra, 'a.b.corp.example.org')).toBe(true);
    expect(policyAllows(extra, 'corp.example.org')).toBe(false);
    expect(policyAllows(extra, 'xcorp.example.org')).toBe(false);
    expect(policyAllows(extra, 'corp.example.org.evil.com')).toBe(false);
    expect(policyAllows(extra, 'xn--bcher-kva.example')).toBe(true);
    // With "none" the extra names are all there is; with packages they add to the list.
    expect(policyAllows(extra, 'registry.npmjs.org')).toBe(false);
    expect(policyAllows({ ...extra, domain_allowlist: 'package_managers_only' }, 'api.example.com')).toBe(true);
  });

  it('ignores wildcard entries that would match far too much', () => {
    const broad = policy({ additional_allowed_domains: ['*.com', '*', '*.', '*.10.0.0.1'] });
    expect(policyAllows(broad, 'example.com')).toBe(false);
    expect(policyAllows(broad, 'x.10.0.0.1')).toBe(false);
    expect(egressEnabled(broad)).toBe(true);
    expect(egressEnabled(policy({}))).toBe(false);
  });

  it('normalizes hosts the way URLs and CONNECT lines spell them', () => {
    expect(normalizeHost('[::1]')).toBe('::1');
    expect(normalizeHost('Example.COM.')).toBe('example.com');
    expect(normalizeHost('bücher.example')).toBe('xn--bcher-kva.example');
    expect(normalizeHost('under_score.example.com')).toBe('under_score.example.com');
    expect(normalizeHost('a/b')).toBeNull();
  });
});

describe('docs/sandbox.md', () => {
  it('lists every package-manager host', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', '..', 'docs', 'sandbox.md'), 'utf8');
    for (const host of PACKAGE_MANAGER_DOMAINS) expect(doc, host).toContain(`\`${host}\``);
  });
});
