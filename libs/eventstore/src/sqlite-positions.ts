import Database from 'better-sqlite3';
import { PositionStore } from './leases';

/**
 * Relay positions in the SQLite event store's file (table `relay_positions`, created here when
 * missing), on a connection of their own: a read-store loss does not republish history. Same
 * fencing rule as PostgreSQL (`PostgresCoordination.save`); standalone's writers are unfenced (0).
 */
export class SqlitePositions implements PositionStore {
  private readonly db: Database.Database;
  private readonly select: Database.Statement<[string], { position: number }>;
  private readonly upsert: Database.Statement<[string, number, number]>;

  constructor(filename: string) {
    this.db = new Database(filename);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec('CREATE TABLE IF NOT EXISTS relay_positions (name TEXT PRIMARY KEY, position INTEGER NOT NULL, fence INTEGER NOT NULL)');
    this.select = this.db.prepare('SELECT position FROM relay_positions WHERE name = ?');
    this.upsert = this.db.prepare(
      `INSERT INTO relay_positions (name, position, fence) VALUES (?, ?, ?)
        ON CONFLICT (name) DO UPDATE SET position = excluded.position, fence = max(fence, excluded.fence)
        WHERE excluded.fence = 0 OR fence <= excluded.fence`,
    );
  }

  async get(name: string): Promise<number | null> {
    const row = this.select.get(name);
    return row ? Number(row.position) : null;
  }

  async save(name: string, position: number, fence: number): Promise<boolean> {
    return this.upsert.run(name, position, fence).changes > 0;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
