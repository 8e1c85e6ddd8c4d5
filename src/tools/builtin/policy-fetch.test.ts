import { describe, expect, it } from 'vitest';
import type { NetworkPolicy } from '../tool-config.ts';
import { destinationRefusal } from './policy-fetch.ts';

const policy: NetworkPolicy = {
  allow_network_egress: true,
  domain_allowlist: 'none',
  additional_allowed_domains: ['api.example.com', '*.cdn.example.com'],
  allow_public_traffic: false,
};
const ports = [80, 443];

describe('destinationRefusal', () => {
  it('allows listed names on allowed ports, over http and https', () => {
    expect(destinationRefusal('https://api.example.com/v1', policy, ports)).toBeNull();
    expect(destinationRefusal('http://API.example.com./v1', policy, ports)).toBeNull();
    expect(destinationRefusal('https://a.b.cdn.example.com/x', policy, ports)).toBeNull();
  });

  it('refuses other names, addresses, ports, schemes and credentials, saying why', () => {
    expect(destinationRefusal('https://example.com/', policy, ports)).toBe(
      "example.com is not allowed by the agent's network policy",
    );
    expect(destinationRefusal('https://cdn.example.com/', policy, ports)).toMatch(/not allowed/);
    expect(destinationRefusal('http://93.184.215.14/', policy, ports)).toMatch(/93\.184\.215\.14 is not allowed/);
    expect(destinationRefusal('https://api.example.com:8443/', policy, ports)).toBe(
      'port 8443 is not allowed (allowed: 80, 443)',
    );
    expect(destinationRefusal('ftp://api.example.com/', policy, ports)).toBe('only http and https URLs can be fetched');
    expect(destinationRefusal('https://u:p@api.example.com/', policy, ports)).toMatch(/credentials/);
    expect(destinationRefusal('not a url', policy, ports)).toBe('not a url is not an absolute URL');
  });

  it('refuses everything without egress', () => {
    for (const off of [null, { ...policy, allow_network_egress: false }]) {
      expect(destinationRefusal('https://api.example.com/', off, ports)).toBe(
        "the agent's network policy allows no network access",
      );
    }
  });
});
