import { describe, expect, it } from 'vitest';
import { classifyAddress, createHostAddresses, readHostAddresses } from './address-class.ts';

describe('classifyAddress', () => {
  it.each([
    '127.0.0.1',
    '127.9.9.9',
    '0.0.0.0',
    '0.1.2.3',
    '::1',
    '::',
    '[::1]',
    '::ffff:127.0.0.1',
    '[::ffff:7f00:1]',
    '::ffff:0.0.0.0',
    '::ffff:0:7f00:1',
    '64:ff9b::127.0.0.1',
    '64:ff9b::7f00:1',
    '2002:7f00:1::1',
    '::7f00:1',
    '0:0:0:0:0:ffff:7f00:1',
  ])('%s is this host (loopback or unspecified, in whatever form)', (address) => {
    expect(classifyAddress(address, null)).toBe('host-local');
  });

  it.each([
    '10.0.0.1',
    '169.254.169.254',
    '100.100.100.200',
    '192.0.2.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:a00:1::1',
    '::808:808',
    'fd00:ec2::254',
    'fe80::1%eth0',
    '64:ff9b:1::1',
    '2001:0:4136:e378::1',
  ])('%s is private', (address) => {
    expect(classifyAddress(address, null)).toBe('private');
  });

  it.each(['8.8.8.8', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2606:4700:4700::1111'])(
    '%s is public',
    (address) => {
      expect(classifyAddress(address, null)).toBe('public');
    },
  );

  it('is null for what is not an address', () => {
    expect(classifyAddress('example.com', null)).toBeNull();
  });

  it("judges every form of this host's interface addresses as the host, public ones included", () => {
    const host = createHostAddresses({
      read: () => ['1.2.3.4', '2606:4700:0::10', 'fe80::1%eth0', '127.0.0.1', '5.5.0.0/16'],
    });
    for (const address of [
      '1.2.3.4',
      '::ffff:1.2.3.4',
      '::ffff:102:304',
      '64:ff9b::102:304',
      '2002:102:304::9',
      '2606:4700::10',
      '[2606:4700:0:0:0:0:0:10]',
      '5.5.200.1',
    ]) {
      expect(classifyAddress(address, host), address).toBe('host-local');
    }
    expect(classifyAddress('1.2.3.5', host)).toBe('public');
    expect(classifyAddress('2606:4700::11', host)).toBe('public');
  });

  it('reads the interfaces again once its copy is older than maxAgeMs', () => {
    let now = 0;
    let addresses = ['1.2.3.4'];
    const host = createHostAddresses({ clock: { now: () => now }, maxAgeMs: 1000, read: () => addresses });
    expect(host.has('5.6.7.8')).toBe(false);
    addresses = ['1.2.3.4', '5.6.7.8'];
    now = 999;
    expect(host.has('5.6.7.8')).toBe(false);
    now = 1000;
    expect(host.has('5.6.7.8')).toBe(true);
  });

  it("reads loopback and the machine's other addresses from the system", () => {
    const read = readHostAddresses();
    expect(read).toContain('127.0.0.1');
    const host = createHostAddresses();
    expect(host.has('127.0.0.1')).toBe(true);
    expect(host.has('8.8.8.8')).toBe(false);
  });
});
