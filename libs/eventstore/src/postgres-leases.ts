import { Pool, escapeIdentifier } from 'pg';
import { LeaseBackend, PositionStore } from './leases';
import { DEFAULT_DATABASE_URL } from './postgres-event-store';
import { checkSchemaName } from './postgres-schema';

export interface PostgresCoordinationOptions {
  connectionString?: string;
  /** The event store's schema (its tables `leases` and `relay_positions`, created by the store's migrations). */
  schema: string;
  logger?: { warn(message: string, meta: Record<string, unknown>): void };
}

/**
 * Leases and relay positions in the event store's PostgreSQL schema (docs/scaling.md), on a small
 * pool of their own: a renewal never waits behind the store's appends for a connection.
 *
 * - `claim`: one statement for all of a holder's leases. A lease row is taken when it is missing,
 *   when its holder is the claimer (a renewal: same token), or when it has expired by the
 *   database's `now()` (a new acquisition: token + 1). Tokens live in the database with the log,
 *   so they never go back, whatever happens to Redis.
 * - `save`: a relay position, written only when the stored fence is not above the writer's token.
 */
export class PostgresCoordination implements LeaseBackend, PositionStore {
  private readonly pool: Pool;
  private readonly s: string;

  constructor(options: PostgresCoordinationOptions) {
    this.s = escapeIdentifier(checkSchemaName(options.schema));
    this.pool = new Pool({ connectionString: options.connectionString ?? DEFAULT_DATABASE_URL, max: 2, connectionTimeoutMillis: 5000, keepAlive: true });
    this.pool.on('error', (err) => options.logger?.warn('leases: idle postgres connection failed', { error: err?.name ?? 'error' }));
  }

  async claim(names: string[], holder: string, ttlMs: number): Promise<Map<string, number>> {
    const r = await this.pool.query<{ name: string; token: string }>({
      text: `INSERT INTO ${this.s}.leases AS l (name, holder, token, expires_at)
        SELECT n, $2, 1, now() + $3 * interval '1 millisecond' FROM unnest($1::text[]) AS n
        ON CONFLICT (name) DO UPDATE
          SET holder = EXCLUDED.holder,
              token = CASE WHEN l.holder = EXCLUDED.holder THEN l.token ELSE l.token + 1 END,
              expires_at = EXCLUDED.expires_at
          WHERE l.holder = EXCLUDED.holder OR l.expires_at <= now()
        RETURNING l.name, l.token`,
      values: [names, holder, ttlMs],
    });
    return new Map(r.rows.map((row) => [row.name, Number(row.token)]));
  }

  /** The holder is cleared too, so that whoever takes the lease next (this process included) gets a new token. */
  async release(names: string[], holder: string): Promise<void> {
    await this.pool.query(`UPDATE ${this.s}.leases SET holder = '', expires_at = now() WHERE name = ANY($1::text[]) AND holder = $2`, [names, holder]);
  }

  async get(name: string): Promise<number | null> {
    const r = await this.pool.query<{ position: string }>(`SELECT position FROM ${this.s}.relay_positions WHERE name = $1`, [name]);
    return r.rows.length ? Number(r.rows[0].position) : null;
  }

  async save(name: string, position: number, fence: number): Promise<boolean> {
    const r = await this.pool.query(
      `INSERT INTO ${this.s}.relay_positions AS p (name, position, fence) VALUES ($1, $2, $3)
        ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, fence = GREATEST(p.fence, EXCLUDED.fence)
        WHERE EXCLUDED.fence = 0 OR p.fence <= EXCLUDED.fence`,
      [name, position, fence],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
