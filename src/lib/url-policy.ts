/**
 * Static checks on outbound destinations given by users (remote MCP servers, webhooks): public HTTPS, no
 * credentials, no fragment, and no literal address in a private, loopback, link-local, CGNAT, multicast,
 * documentation or metadata range. WHATWG URL parsing already normalises decimal, octal and hex IPv4 forms to
 * dotted quads. Resolving names and pinning the checked address belong to the egress guard (`egress.ts`).
 */
import { isIP } from 'node:net';
import { classifyAddress } from './address-class.ts';

/**
 * True when a literal IP address is not publicly routable (`address-class.ts`: private, loopback or unspecified,
 * IPv6 forms judged by the IPv4 address they carry). Anything that is not an IP literal is false.
 */
export function isPrivateAddress(address: string): boolean {
  const verdict = classifyAddress(address, null);
  return verdict !== null && verdict !== 'public';
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
