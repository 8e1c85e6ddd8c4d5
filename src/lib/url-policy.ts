/**
 * Static checks on outbound destinations given by users (remote MCP servers, later webhooks): public HTTPS,
 * no credentials, no fragment, and no literal address in a private, loopback, link-local, CGNAT, multicast or
 * metadata range. WHATWG URL parsing already normalises decimal, octal and hex IPv4 forms to dotted quads.
 * Resolution of names and pinning the checked address belong to the egress guard used at connection time.
 */
import { BlockList, isIP } from 'node:net';

const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** True when a literal IP address is not publicly routable (IPv4-mapped IPv6 is judged by its IPv4 part). */
export function isPrivateAddress(address: string): boolean {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(?:0:)?(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
    if (mapped?.[1] !== undefined) return blocked.check(mapped[1], 'ipv4');
    const hexMapped = /^::ffff:(?:0:)?([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(bare);
    if (hexMapped?.[1] !== undefined && hexMapped[2] !== undefined) {
      const high = Number.parseInt(hexMapped[1], 16);
      const low = Number.parseInt(hexMapped[2], 16);
      return blocked.check(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, 'ipv4');
    }
    return blocked.check(bare, 'ipv6');
  }
  return false;
}

const LOCAL_NAMES = /(^|\.)(localhost|local|internal|localdomain)$/i;

/** Returns why `raw` is not an acceptable public HTTPS destination, or null when it is. */
export function publicHttpsUrlProblem(raw: string, allowInsecure: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.username !== '' || url.password !== '') return 'must not embed credentials';
  if (url.hash !== '' || raw.includes('#')) return 'must not have a fragment';
  if (allowInsecure) {
    return url.protocol === 'https:' || url.protocol === 'http:' ? null : 'must use https';
  }
  if (url.protocol !== 'https:') return 'must use https';
  // A trailing dot names the same host ("localhost." is localhost).
  const host = url.hostname.replace(/\.$/, '');
  if (isPrivateAddress(host)) return 'must not point to a private, loopback or link-local address';
  if (isIP(host.replace(/^\[|\]$/g, '')) === 0 && (LOCAL_NAMES.test(host) || !host.includes('.'))) {
    return 'must name a public host';
  }
  return null;
}
