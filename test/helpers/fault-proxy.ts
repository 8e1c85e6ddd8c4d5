/**
 * A TCP proxy (node:net) between a server under test and a service (Postgres, Redis) that the test turns into an
 * outage of the kind it wants, without touching the service itself (other tests share it):
 * - `pass`: forwards both ways;
 * - `blackhole`: a network partition: nothing flows either way on open connections, and new ones are accepted but
 *   get no answer; what was held back flows again when the mode changes back to `pass`, as TCP delivers it after a
 *   partition heals;
 * - `reset`: every open connection is reset, and new ones are accepted and reset at once;
 * - `refuse`: every open connection is reset and the port refuses connections (the service is down).
 */
import { connect, createServer, type Socket } from 'node:net';

export type FaultMode = 'pass' | 'blackhole' | 'reset' | 'refuse';

export interface FaultProxy {
  port: number;
  mode(): FaultMode;
  set(mode: FaultMode): Promise<void>;
  /** Local ends of the proxy's connections to the service: `client_addr` and `client_port` of proxied backends. */
  upstreamEnds(): { address: string; port: number }[];
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | null;
  /** Bytes from the client while the upstream connection is not open yet. */
  early: Buffer[];
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let current: FaultMode = 'pass';
  const pairs = new Set<Pair>();

  const kill = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.resetAndDestroy();
    pair.upstream?.resetAndDestroy();
  };

  const flow = (pair: Pair) => {
    const { client, upstream } = pair;
    if (upstream === null) return;
    client.pipe(upstream);
    upstream.pipe(client);
  };

  const hold = (pair: Pair) => {
    const { client, upstream } = pair;
    client.unpipe();
    upstream?.unpipe();
    client.pause();
    upstream?.pause();
  };

  const openUpstream = (pair: Pair) => {
    const upstream = connect(target.port, target.host);
    pair.upstream = upstream;
    upstream.on('error', () => kill(pair));
    upstream.on('close', () => kill(pair));
    upstream.once('connect', () => {
      for (const chunk of pair.early.splice(0)) upstream.write(chunk);
      pair.client.off('data', keepEarly(pair));
      if (current === 'pass') flow(pair);
      else hold(pair);
    });
  };

  const earlyListeners = new WeakMap<Pair, (chunk: Buffer) => void>();
  const keepEarly = (pair: Pair) => {
    let listener = earlyListeners.get(pair);
    if (listener === undefined) {
      listener = (chunk: Buffer) => pair.early.push(chunk);
      earlyListeners.set(pair, listener);
    }
    return listener;
  };

  const server = createServer((client) => {
    const pair: Pair = { client, upstream: null, early: [] };
    pairs.add(pair);
    client.on('error', () => kill(pair));
    client.on('close', () => kill(pair));
    if (current === 'reset' || current === 'refuse') {
      kill(pair);
      return;
    }
    client.on('data', keepEarly(pair));
    // Black-holed: the connection is accepted, and nothing answers until the partition heals.
    if (current === 'pass') openUpstream(pair);
    else client.pause();
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        const address = server.address();
        resolve(typeof address === 'object' && address !== null ? address.port : port);
      });
    });
  const stopListening = () => new Promise<void>((resolve) => server.close(() => resolve()));
  const port = await listen(0);

  return {
    port,
    mode: () => current,
    async set(mode) {
      const before = current;
      current = mode;
      if (mode === 'reset' || mode === 'refuse') for (const pair of [...pairs]) kill(pair);
      if (mode === 'blackhole') for (const pair of pairs) hold(pair);
      if (mode === 'pass') {
        for (const pair of pairs) {
          if (pair.upstream === null) {
            pair.client.resume();
            openUpstream(pair);
          } else flow(pair);
        }
      }
      if (mode === 'refuse' && before !== 'refuse') await stopListening();
      if (mode !== 'refuse' && before === 'refuse') await listen(port);
    },
    upstreamEnds: () =>
      [...pairs].flatMap(({ upstream }) =>
        upstream?.localAddress === undefined || upstream.localPort === undefined
          ? []
          : [{ address: upstream.localAddress, port: upstream.localPort }],
      ),
    async close() {
      for (const pair of [...pairs]) kill(pair);
      if (current !== 'refuse') await stopListening();
    },
  };
}
