/**
 * Static checks on outbound destinations given by users (remote MCP servers, webhooks): public HTTPS, no
 * credentials, no fragment, and no literal address in a private, loopback, link-local, CGNAT, multicast,
 * documentation or metadata range. WHATWG URL parsing already normalises decimal, octal and hex IPv4 forms to
 * dotted quads. Resolving names and pinning the checked address belong to the egress guard (`egress.ts`).
 */
import { BlockList, isIP } from 'node:net';

const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT; also holds Alibaba's metadata service (100.100.100.200)
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local; holds the AWS/GCP/Azure metadata service (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments; holds Oracle's metadata service (192.0.0.192)
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 96], // unspecified, loopback and the deprecated IPv4-compatible form
  ['64:ff9b:1::', 48], // local-use NAT64: translates into the operator's own network
  ['100::', 64],
  ['2001::', 23], // IETF protocol assignments, including Teredo (whose IPv4 is obfuscated)
  ['2001:db8::', 32],
  ['fc00::', 7], // unique local; holds the AWS IPv6 metadata service (fd00:ec2::254)
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** The eight 16-bit groups of a valid IPv6 address (URL serialisation turns a dotted tail into hex groups). */
function ipv6Groups(address: string): number[] {
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = '', tail] = canonical.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The IPv4 address an IPv6 address stands for, when it is one of the forms that reach an IPv4 host:
 * IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
 */
function embeddedIpv4(groups: number[]): string | null {
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  const quad = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  const zeroPrefix = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0;
  if (zeroPrefix && ((g4 === 0 && g5 === 0xffff) || (g4 === 0xffff && g5 === 0))) return quad(g6, g7);
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return quad(g6, g7);
  if (g0 === 0x2002 && g1 !== undefined && g2 !== undefined) return quad(g1, g2);
  return null;
}

/**
 * True when a literal IP address is not publicly routable. IPv6 forms that embed an IPv4 address are judged by
 * that address; brackets and an IPv6 zone (`%eth0`) are ignored. Anything that is not an IP literal is false.
 */
export function isPrivateAddress(address: string): boolean {
  const unbracketed = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const bare = unbracketed.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family !== 6) return false;
  const ipv4 = embeddedIpv4(ipv6Groups(bare));
  return ipv4 !== null ? blocked.check(ipv4, 'ipv4') : blocked.check(bare, 'ipv6');
}

const LOCAL_NAMES = /(^|\.)(localhost|local|internal|localdomain)$/i;

/** Said with every refusal a development setup meets first (a receiver on localhost, plain http). */
const INSECURE_HINT =
  ' (for local development, AGENTRY_ALLOW_INSECURE_DESTINATIONS=true allows http and private addresses)';

/** Why a URL is refused: `invalid` for its shape (scheme, credentials, fragment), `blocked` for where it points. */
export interface DestinationUrlProblem {
  kind: 'invalid' | 'blocked';
  message: string;
}

/**
 * The static verdict on a destination URL, or null when acceptable. With `allowInsecure` (local development and
 * tests) http and private destinations pass; credentials and fragments never do. `allowHttp` lets plain http to a
 * public destination pass (the agent's network tools, like the sandbox's proxy, speak both); the address rules
 * are the same.
 */
export function destinationUrlProblem(
  raw: string,
  allowInsecure: boolean,
  options: { allowHttp?: boolean | undefined } = {},
): DestinationUrlProblem | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { kind: 'invalid', message: 'must be an absolute URL' };
  }
  if (url.username !== '' || url.password !== '') return { kind: 'invalid', message: 'must not embed credentials' };
  if (url.hash !== '' || raw.includes('#')) return { kind: 'invalid', message: 'must not have a fragment' };
  if (allowInsecure) {
    return url.protocol === 'https:' || url.protocol === 'http:'
      ? null
      : { kind: 'invalid', message: 'must use https' };
  }
  if (url.protocol !== 'https:' && !(options.allowHttp === true && url.protocol === 'http:')) {
    return {
      kind: 'invalid',
      message: options.allowHttp === true ? 'must use http or https' : `must use https${INSECURE_HINT}`,
    };
  }
  // A trailing dot names the same host ("localhost." is localhost).
  const host = url.hostname.replace(/\.$/, '');
  if (isPrivateAddress(host)) {
    return {
      kind: 'blocked',
      message: `must not point to a private, loopback or link-local address${INSECURE_HINT}`,
    };
  }
  if (isIP(host.replace(/^\[|\]$/g, '')) === 0 && (LOCAL_NAMES.test(host) || !host.includes('.'))) {
    return { kind: 'blocked', message: `must name a public host${INSECURE_HINT}` };
  }
  return null;
}

/** Returns why `raw` is not an acceptable public HTTPS destination, or null when it is. */
export function publicHttpsUrlProblem(raw: string, allowInsecure: boolean): string | null {
  return destinationUrlProblem(raw, allowInsecure)?.message ?? null;
}
