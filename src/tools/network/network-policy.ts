/**
 * An agent's `networkPolicy` as one decision: may this agent reach this host name? The sandbox's egress proxy
 * and the network tools (`http_request`, `web_browse`) ask the same function, so a destination is allowed or
 * refused the same way whichever way the agent tries. The decision is by name only; whether the name's
 * addresses are public is the egress guard's job (`src/lib/egress.ts`), applied after this.
 */
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import type { NetworkPolicy } from '../tool-config.ts';

/**
 * Hosts that `domain_allowlist: "package_managers_only"` allows: the registries and mirrors that package managers
 * download from, and GitHub's release and raw-file hosts. A `*.` entry matches any subdomain, not the name itself.
 * docs/sandbox.md lists the same names (a test keeps them in step).
 */
export const PACKAGE_MANAGER_DOMAINS = [
  // npm and Yarn
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'repo.yarnpkg.com',
  // PyPI
  'pypi.org',
  'files.pythonhosted.org',
  // crates.io
  'crates.io',
  'static.crates.io',
  'index.crates.io',
  // Go modules
  'proxy.golang.org',
  'sum.golang.org',
  // RubyGems
  'rubygems.org',
  'index.rubygems.org',
  // Maven Central
  'repo.maven.apache.org',
  'repo1.maven.org',
  // Debian
  'deb.debian.org',
  'security.debian.org',
  // Ubuntu
  'archive.ubuntu.com',
  '*.archive.ubuntu.com',
  'security.ubuntu.com',
  'ports.ubuntu.com',
  // Alpine
  'dl-cdn.alpinelinux.org',
  // GitHub releases, archives and raw files
  'github.com',
  'codeload.github.com',
  'objects.githubusercontent.com',
  'raw.githubusercontent.com',
  'release-assets.githubusercontent.com',
] as const;

/** The policy of an agent whose `networkPolicy` is null: no egress at all. */
export const DEFAULT_NETWORK_POLICY: NetworkPolicy = {
  allow_network_egress: false,
  domain_allowlist: 'none',
  additional_allowed_domains: [],
  allow_public_traffic: false,
};

/** The policy that applies: the agent's own, or the default (no egress) when it has none. */
export function effectivePolicy(policy: NetworkPolicy | null | undefined): NetworkPolicy {
  return policy ?? DEFAULT_NETWORK_POLICY;
}

/** True when the policy lets anything out at all, i.e. when a sandbox needs an egress proxy. */
export function egressEnabled(policy: NetworkPolicy | null | undefined): boolean {
  const effective = effectivePolicy(policy);
  if (!effective.allow_network_egress) return false;
  return effective.domain_allowlist !== 'none' || effective.additional_allowed_domains.length > 0;
}

// Underscores occur in real DNS names (SRV-style labels, some CDNs); a host name with one is still matchable.
const LABEL = /^[a-z0-9_-]{1,63}$/;

/**
 * A host name in the form policy entries are compared in: lower case, ASCII (IDNA), no trailing dot, no IPv6
 * brackets. Returns null for anything that is not a host name or an IP literal (empty, spaces, ports, paths...).
 */
export function normalizeHost(raw: string): string | null {
  let host = raw.trim();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (isIP(host) !== 0) return host.toLowerCase();
  host = host.replace(/\.$/, '');
  // URL delimiters would make the IDNA step below return just the part before them ("a/b" -> "a").
  if (host === '' || host.length > 253 || /[\s/\\:@?#%[\]*<>^|"'`{}]/.test(host)) return null;
  const ascii = domainToASCII(host);
  if (ascii === '') return null;
  const labels = ascii.split('.');
  return labels.every((label) => LABEL.test(label)) ? ascii : null;
}

/** An allowlist entry, normalised: `{exact}` or `{suffix}` for `*.` wildcards; null when it can match nothing. */
function parseEntry(raw: string): { exact: string } | { suffix: string } | null {
  const trimmed = raw.trim().toLowerCase();
  if (trimmed.startsWith('*.')) {
    const base = normalizeHost(trimmed.slice(2));
    // A wildcard over an IP literal or a single label ("*.com") would allow far more than anyone means.
    if (base === null || isIP(base) !== 0 || !base.includes('.')) return null;
    return { suffix: `.${base}` };
  }
  const exact = normalizeHost(trimmed);
  return exact === null ? null : { exact };
}

/** Whether `host` (already normalised) matches one allowlist entry. `*.example.com` matches `a.b.example.com`. */
export function hostMatches(host: string, entry: string): boolean {
  const parsed = parseEntry(entry);
  if (parsed === null) return false;
  if ('exact' in parsed) return host === parsed.exact;
  return host.endsWith(parsed.suffix) && host.length > parsed.suffix.length;
}

/**
 * The one policy decision: may an agent with `policy` (null = the default, no egress) reach `host`? `host` is a
 * name or an IP literal as it appears in a URL or a CONNECT line; it is normalised here. `all_domains` allows
 * any well-formed host (the egress guard still refuses private addresses); `package_managers_only` allows
 * PACKAGE_MANAGER_DOMAINS; both add `additional_allowed_domains`, which is all that `none` allows.
 */
export function policyAllows(policy: NetworkPolicy | null | undefined, host: string): boolean {
  const effective = effectivePolicy(policy);
  if (!effective.allow_network_egress) return false;
  const normalized = normalizeHost(host);
  if (normalized === null) return false;
  if (effective.domain_allowlist === 'all_domains') return true;
  if (effective.additional_allowed_domains.some((entry) => hostMatches(normalized, entry))) return true;
  return (
    effective.domain_allowlist === 'package_managers_only' &&
    PACKAGE_MANAGER_DOMAINS.some((entry) => hostMatches(normalized, entry))
  );
}
