import { escapeIdentifier, escapeLiteral } from 'pg';
import type { ClientBase } from 'pg';

/** Default schema of the PostgreSQL event store. */
export const DEFAULT_EVENT_SCHEMA = 'svc_events';

/**
 * A schema name the store accepts: lower-case letters, digits and `_`, starting with a letter or
 * `_`, at most 48 characters (so that `<schema>_appended`, the NOTIFY channel, stays within
 * PostgreSQL's 63-character identifiers).
 */
export function checkSchemaName(schema: string): string {
  if (typeof schema !== 'string' || !/^[a-z_][a-z0-9_]{0,47}$/.test(schema)) {
    throw new Error('event store schema must match [a-z_][a-z0-9_]{0,47}');
  }
  return schema;
}

/** Key strings of the store's advisory locks (hashed with hashtextextended; per schema and database). */
export const lockKeys = {
  migrate: (schema: string) => `${schema}/migrate`,
  allocate: (schema: string) => `${schema}/allocate`,
  streamPrefix: (schema: string) => `${schema}/stream/`,
};

/** The LISTEN/NOTIFY channel on which every store of the schema announces its commits. */
export function channelName(schema: string): string {
  return `${schema}_appended`;
}

interface Migration {
  version: number;
  sql(schema: string): string;
}

/**
 * The schema's migrations, applied in order, each once (recorded in `<schema>.schema_migrations`).
 * A migration never changes once released: a change is a new version.
 */
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    sql: (schema) => {
      const s = escapeIdentifier(schema);
      const allocateKey = escapeLiteral(lockKeys.allocate(schema));
      const streamPrefix = escapeLiteral(lockKeys.streamPrefix(schema));
      const sequence = escapeLiteral(`${s}.events_position`);
      return `
-- Global positions. CACHE 1 (the default): values must be handed out in call order across sessions.
CREATE SEQUENCE ${s}.events_position AS bigint MINVALUE 1 CACHE 1;

-- One row per event. tx is the writing transaction's id (pg_current_xact_id()): readers deliver only
-- rows whose transaction lies below every transaction still running (see allocate and the store).
-- data and metadata are JSON text, stored as written (no jsonb: it refuses \\u0000 and reorders keys).
CREATE TABLE ${s}.events (
  position  bigint  NOT NULL,
  tx        xid8    NOT NULL,
  stream_id text    NOT NULL,
  revision  integer NOT NULL,
  event_id  text    NOT NULL,
  type      text    NOT NULL,
  data      text    NOT NULL,
  metadata  text    NOT NULL,
  CONSTRAINT events_pkey PRIMARY KEY (position),
  CONSTRAINT events_stream_revision UNIQUE (stream_id, revision)
);

-- Locks the given streams for the rest of the transaction (advisory locks, taken in key order so
-- that two batches never wait for each other in a cycle), then reads each one's head with a fresh
-- snapshot: a writer that held a lock committed before releasing it, so its rows are seen.
CREATE FUNCTION ${s}.lock_streams(ids text[])
RETURNS TABLE (stream text, last_revision integer, last_position bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  k bigint;
BEGIN
  FOR k IN SELECT DISTINCT hashtextextended(${streamPrefix} || i.id, 0) AS h FROM unnest(ids) AS i(id) ORDER BY h LOOP
    PERFORM pg_advisory_xact_lock(k);
  END LOOP;
  RETURN QUERY
    SELECT i.id, l.revision, l.position
    FROM (SELECT DISTINCT u.id FROM unnest(ids) AS u(id)) AS i
    CROSS JOIN LATERAL (
      SELECT e.revision, e.position FROM ${s}.events AS e
      WHERE e.stream_id = i.id ORDER BY e.revision DESC LIMIT 1
    ) AS l;
END
$fn$;

-- Hands the calling transaction its transaction id and n consecutive positions, both under one
-- short lock, before the transaction writes anything. Transaction ids and positions are therefore
-- handed out in the same order: a transaction with a lower id always holds lower positions. The
-- lock is a session lock released at the end of this function (not at COMMIT), so writers
-- serialize only for this call, never for their INSERT or their commit's flush.
CREATE FUNCTION ${s}.allocate(n integer)
RETURNS TABLE (tx xid8, first_position bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  k constant bigint := hashtextextended(${allocateKey}, 0);
  last_position bigint;
BEGIN
  IF n IS NULL OR n < 1 THEN
    RAISE EXCEPTION 'allocate: n must be at least 1';
  END IF;
  IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
    RAISE EXCEPTION 'allocate must run before the transaction writes anything';
  END IF;
  PERFORM pg_advisory_lock(k);
  BEGIN
    tx := pg_current_xact_id();
    last_position := setval(${sequence}, nextval(${sequence}) + n - 1);
  EXCEPTION WHEN OTHERS OR query_canceled THEN
    PERFORM pg_advisory_unlock(k);
    RAISE;
  END;
  PERFORM pg_advisory_unlock(k);
  first_position := last_position - n + 1;
  RETURN NEXT;
END
$fn$;
`;
    },
  },
];

/** The newest schema version this code knows. */
export const EVENT_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/**
 * Creates the schema and applies the missing migrations in one transaction, under an advisory
 * lock of the schema: two processes starting at once apply them once, one after the other, and a
 * database shared with other applications is touched only inside this schema. Idempotent.
 */
export async function migrateEventSchema(client: ClientBase, schema: string): Promise<void> {
  checkSchemaName(schema);
  const s = escapeIdentifier(schema);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKeys.migrate(schema)]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const applied = new Set<number>((await client.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations`)).rows.map((r) => r.version));
    for (const m of MIGRATIONS) {
      if (applied.has(m.version)) continue;
      await client.query(m.sql(schema));
      await client.query(`INSERT INTO ${s}.schema_migrations (version) VALUES ($1)`, [m.version]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
