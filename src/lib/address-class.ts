/**
 * What an IP address reaches, the one classification every egress path judges by (`egress.ts` applies it):
 * - `host-local`: this host itself: loopback, unspecified (`0.0.0.0/8`, `::`, which Linux connects to the host)
 *   and every address of the host's own interfaces, public ones included (a service listening on all interfaces
 *   answers there: Agentry's own API, its database, the cloud agent);
 * - `private`: not publicly routable: RFC 1918, CGNAT, link-local (cloud metadata), multicast, documentation,
 *   reserved, unique-local IPv6, Teredo, local-use NAT64;
 * - `public`: anything else.
 * IPv6 forms that carry an IPv4 address are judged by that address: IPv4-mapped (`::ffff:7f00:1` is 127.0.0.1),
 * IPv4-translated, NAT64 (`64:ff9b::/96`), 6to4 (`2002::/16`) and the deprecated IPv4-compatible form (never
 * public). WHATWG URL parsing has already turned decimal, octal and hex IPv4 spellings into dotted quads.
 *
 * The host's addresses change (DHCP, containers, VPNs), so they are read from the system again whenever the copy
 * is older than a second (`readHostAddresses`: tens of microseconds).
 */
import { readFileSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { type Clock, systemClock } from './clock.ts';

export type AddressClass = 'host-local' | 'private' | 'public';

const hostLocalRanges = new BlockList();
hostLocalRanges.addSubnet('0.0.0.0', 8, 'ipv4');
hostLocalRanges.addSubnet('127.0.0.0', 8, 'ipv4');
hostLocalRanges.addAddress('::', 'ipv6');
hostLocalRanges.addAddress('::1', 'ipv6');

const privateRanges = new BlockList();
for (const [network, prefix] of [
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT; also holds Alibaba's metadata service (100.100.100.200)
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
  privateRanges.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 96], // the deprecated IPv4-compatible form
  ['64:ff9b:1::', 48], // local-use NAT64: translates into the operator's own network
  ['100::', 64],
  ['2001::', 23], // IETF protocol assignments, including Teredo (whose IPv4 is obfuscated)
  ['2001:db8::', 32],
  ['fc00::', 7], // unique local; holds the AWS IPv6 metadata service (fd00:ec2::254)
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  privateRanges.addSubnet(network, prefix, 'ipv6');
}

/** An IPv6 address in its canonical text (lower case, zeros compressed, no dotted tail), as URLs print it. */
function canonicalIpv6(address: string): string {
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

/** The eight 16-bit groups of a canonical IPv6 address. */
function ipv6Groups(canonical: string): number[] {
  const [head = '', tail] = canonical.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/** The IPv4 address an IPv6 address carries, and whether it is the IPv4-compatible form; null for none. */
function embeddedIpv4(groups: number[]): { ipv4: string; compatible: boolean } | null {
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  const quad = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  const zeroPrefix = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0;
  if (zeroPrefix && ((g4 === 0 && g5 === 0xffff) || (g4 === 0xffff && g5 === 0))) {
    return { ipv4: quad(g6, g7), compatible: false };
  }
  if (zeroPrefix && g4 === 0 && g5 === 0) return { ipv4: quad(g6, g7), compatible: true };
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return { ipv4: quad(g6, g7), compatible: false };
  }
  if (g0 === 0x2002 && g1 !== undefined && g2 !== undefined) return { ipv4: quad(g1, g2), compatible: false };
  return null;
}

/** This host's own addresses: `has` takes a canonical address (IPv4 dotted, IPv6 as URLs print it, no zone). */
export interface HostAddresses {
  has(canonical: string): boolean;
}

export interface HostAddressOptions {
  clock?: Clock | undefined;
  /** A copy older than this is read again before it is used (default 1000 ms). */
  maxAgeMs?: number | undefined;
  /** The host's addresses and local prefixes (`a.b.c.d/n`); default `readHostAddresses`. */
  read?: (() => string[]) | undefined;
}

/** Beyond this, /proc/net/fib_trie holds a router's full table: its local entries are not looked for there. */
const MAX_FIB_TRIE_BYTES = 4 * 1024 * 1024;

function readProc(path: string, limit: number): string {
  try {
    const text = readFileSync(path, 'latin1');
    return text.length <= limit ? text : '';
  } catch {
    return '';
  }
}

/**
 * This host's addresses as the kernel sees them, not only as `os.networkInterfaces` does: libuv leaves out
 * interfaces without carrier (a Docker bridge with no container, a veth whose peer is down), whose addresses still
 * answer local connections. On Linux, IPv4 comes from the kernel's local routes (`/proc/net/fib_trie`: `host
 * LOCAL` entries, including whole local prefixes) and IPv6 from `/proc/net/if_inet6`; elsewhere only libuv's view.
 */
export function readHostAddresses(): string[] {
  const out: string[] = [];
  for (const entry of Object.values(networkInterfaces()).flat()) {
    if (entry !== undefined) out.push(entry.address);
  }
  let current = '';
  for (const line of readProc('/proc/net/fib_trie', MAX_FIB_TRIE_BYTES).split('\n')) {
    const node = /^[\s|+-]*-- (\d+\.\d+\.\d+\.\d+)$/.exec(line);
    if (node?.[1] !== undefined) current = node[1];
    const local = /^\s*\/(\d+) host LOCAL$/.exec(line);
    if (local?.[1] !== undefined && current !== '') out.push(`${current}/${local[1]}`);
  }
  for (const line of readProc('/proc/net/if_inet6', MAX_FIB_TRIE_BYTES).split('\n')) {
    const hex = /^([0-9a-f]{32})\s/i.exec(line)?.[1];
    if (hex !== undefined) out.push(hex.match(/.{4}/g)?.join(':') ?? '');
  }
  return out;
}

export function createHostAddresses(options: HostAddressOptions = {}): HostAddresses {
  const clock = options.clock ?? systemClock;
  const maxAgeMs = options.maxAgeMs ?? 1000;
  const read = options.read ?? readHostAddresses;
  let addresses = new Set<string>();
  let prefixes = new BlockList();
  let readAt = Number.NEGATIVE_INFINITY;
  const refresh = () => {
    const nextAddresses = new Set<string>();
    const nextPrefixes = new BlockList();
    for (const entry of read()) {
      const [raw = '', bits] = entry.replace(/%[^/]*/, '').split('/');
      const family = isIP(raw);
      if (family === 0) continue;
      const address = family === 4 ? raw : canonicalIpv6(raw);
      const prefix = bits === undefined ? (family === 4 ? 32 : 128) : Number(bits);
      if (prefix === (family === 4 ? 32 : 128)) nextAddresses.add(address);
      else nextPrefixes.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
    }
    addresses = nextAddresses;
    prefixes = nextPrefixes;
  };
  return {
    has(canonical) {
      const now = clock.now();
      if (now - readAt >= maxAgeMs) {
        refresh();
        readAt = now;
      }
      if (addresses.has(canonical)) return true;
      return prefixes.check(canonical, isIP(canonical) === 6 ? 'ipv6' : 'ipv4');
    },
  };
}

/**
 * The process's view of its host's addresses. One per process, like the addresses themselves; guards that need
 * another view (tests driving the clock) pass their own.
 */
export const systemHostAddresses: HostAddresses = createHostAddresses();

function classifyIpv4(address: string, host: HostAddresses | null): AddressClass {
  if (hostLocalRanges.check(address, 'ipv4') || host?.has(address) === true) return 'host-local';
  return privateRanges.check(address, 'ipv4') ? 'private' : 'public';
}

/**
 * The class of a literal IP address (brackets and an IPv6 zone are ignored); null when it is not one. `host`
 * gives this host's interface addresses; without it only loopback and unspecified addresses are `host-local`.
 */
export function classifyAddress(address: string, host: HostAddresses | null): AddressClass | null {
  const unbracketed = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const bare = unbracketed.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return classifyIpv4(bare, host);
  if (family !== 6) return null;
  const canonical = canonicalIpv6(bare);
  if (hostLocalRanges.check(canonical, 'ipv6') || host?.has(canonical) === true) return 'host-local';
  const embedded = embeddedIpv4(ipv6Groups(canonical));
  if (embedded !== null) {
    const judged = classifyIpv4(embedded.ipv4, host);
    // The compatible form reaches no IPv4 host by itself: never public, whatever it carries.
    return embedded.compatible && judged === 'public' ? 'private' : judged;
  }
  return privateRanges.check(canonical, 'ipv6') ? 'private' : 'public';
}
