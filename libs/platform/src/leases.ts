import { join } from 'node:path';
import { InProcessLeaseBackend, LeaseBackend, Leases, PositionStore, PostgresCoordination, SqlitePositions } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import type { ServiceConfig } from './config';

/** This process's leases (docs/scaling.md): one `Leases` for its projections, relays and timers. */
export const LEASES = Symbol('LEASES');
/** Where relays keep their positions, next to the event store; null: in the read store (KurrentDB). */
export const RELAY_POSITIONS = Symbol('RELAY_POSITIONS');

/**
 * Leases and relay positions for the configured stores:
 * - PostgreSQL event store: both in the event store's schema (`leases`, `relay_positions`), any
 *   number of replicas;
 * - SQLite event store: leases in this process (one process owns the file), positions in the
 *   event store's file;
 * - KurrentDB: leases in this process and positions in the read store (one replica per app).
 */
export function openCoordination(config: ServiceConfig): { leases: Leases; positions: (PositionStore & { close(): Promise<void> }) | null } {
  const log = getLogger();
  const logger = {
    warn: (meta: Record<string, unknown>, msg: string) => log.warn(meta, msg),
    info: (meta: Record<string, unknown>, msg: string) => log.info(meta, msg),
  };
  const timings = { ttlMs: config.leaseTtlMs, renewMs: config.leaseRenewMs, logger };
  if (config.eventStore === 'postgres') {
    const pg = new PostgresCoordination({
      connectionString: config.databaseUrl,
      schema: config.eventStoreSchema,
      logger: { warn: (msg, meta) => log.warn(meta, msg) },
    });
    // The pool is closed once, by the leases (after every job stopped); positions share it.
    return { leases: new Leases(pg, timings), positions: { get: (n) => pg.get(n), save: (n, p, f) => pg.save(n, p, f), close: async () => undefined } };
  }
  const backend: LeaseBackend = new InProcessLeaseBackend();
  const positions = config.eventStore === 'sqlite' ? new SqlitePositions(join(config.dataDir, 'events.sqlite')) : null;
  return { leases: new Leases(backend, timings), positions };
}
