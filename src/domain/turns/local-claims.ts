/**
 * Claims at accept. A message accepted in a process whose engine has a free slot can take the session's lease in
 * the accepting transaction (the same UPDATE that marks its work pending), so the turn starts without a claim of
 * its own: one write and one round trip fewer per turn. Only a session with no lease at all is taken so; a
 * session leased by anyone, a lapsed lease included, is left to the claims of claims.ts, as is everything when the
 * engine has no free slot, drains, or limits of concurrent turns may be in force.
 *
 * The engine (engine/engine.ts) offers the lease and is handed it by the wake-up that follows the commit
 * (outbox.ts `afterCommit`). A lease whose wake-up never comes (the transaction rolled back, or its caller published
 * none) is given back by the engine after a while, so no session stays held by a process that does not run it.
 */
import type { Lease } from './leases.ts';

/** A lease the engine of this process would take for a session now. */
export interface LeaseOffer {
  owner: string;
  expiresAt: number;
  /** The accepting transaction took the lease (it holds once that transaction commits). */
  taken(lease: Lease): void;
  /** The accepting transaction did not take it (the session was leased). */
  declined(): void;
}

export interface LocalClaims {
  /** A lease for `sessionId` to take in the accepting transaction, or null when the engine takes none now. */
  offer(sessionId: string, now: number): LeaseOffer | null;
}

/**
 * Where the engine of this process, once it runs, puts its offers (src/deps.ts makes it; engine/engine.ts fills it
 * while it claims work). Empty in a process without an engine (`--role api`, the CLI).
 */
export interface LocalClaimsSlot {
  current: LocalClaims | null;
}
