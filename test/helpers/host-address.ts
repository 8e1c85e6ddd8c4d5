/**
 * A public-range address of this very host, for tests of the egress guard's rule that the host's own addresses are
 * refused: it sits on one end of a veth pair in the host's own namespace (no namespace, no route: only local
 * delivery), so a service listening on all interfaces answers there, as it would on a public eth0. The address is
 * `1.3.A.B`, picked so that no interface has it yet. Needs root and `ip`; `addHostAddress` returns why not otherwise.
 * `remove` deletes the pair (and with it the address).
 */
import { spawnSync } from 'node:child_process';

export interface HostAddress {
  address: string;
  remove(): void;
}

function run(args: string[]): string | null {
  const result = spawnSync(args[0] ?? 'false', args.slice(1), { encoding: 'utf8', timeout: 20_000 });
  if (result.status === 0) return null;
  return `${args.join(' ')}: ${(result.stderr || result.error?.message || `exit ${result.status}`).trim()}`;
}

export function addHostAddress(): HostAddress | string {
  if (process.getuid?.() !== 0) return 'adding an address to this host needs root';
  if (run(['ip', '-V']) !== null) return 'the ip command (iproute2) is not installed';
  const present = spawnSync('ip', ['-o', '-4', 'addr', 'show'], { encoding: 'utf8' }).stdout ?? '';
  let address = '';
  do {
    address = `1.3.${1 + Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
  } while (present.includes(` ${address}/`));
  const tag = Math.random().toString(16).slice(2, 8);
  const side = `ha${tag}`;
  const remove = () => {
    run(['ip', 'link', 'del', side]);
  };
  for (const step of [
    ['ip', 'link', 'add', side, 'type', 'veth', 'peer', 'name', `hb${tag}`],
    ['ip', 'addr', 'add', `${address}/32`, 'dev', side],
    ['ip', 'link', 'set', side, 'up'],
  ]) {
    const problem = run(step);
    if (problem !== null) {
      remove();
      return problem;
    }
  }
  return { address, remove };
}
