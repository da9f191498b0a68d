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

-- One group commit, in one statement (so no client round trip happens while the transaction holds
-- its id): locks the batch's streams (advisory transaction locks taken in key order, so two
-- batches never wait for each other in a cycle; a writer that held one committed before releasing
-- it), reads their heads, checks each append's expected revision in order against the stream as it
-- stands, earlier appends of the batch included (-2 any, -1 no stream, else the last revision),
-- allocates positions for the accepted rows and inserts them. One answer per append, in order: ok,
-- the stream's revision after it (or, refused, the actual one, -1 for none), and the position of
-- the stream's last event after it (null when refused).
-- ids: the batch's distinct streams; app_stream: each append's index in ids (1-based);
-- app_count: each append's event count; ev_*: the events of all appends, in order.
CREATE FUNCTION ${s}.append_batch(
  ids text[], app_stream integer[], app_expected integer[], app_count integer[],
  ev_id text[], ev_type text[], ev_data text[], ev_metadata text[])
RETURNS TABLE (out_ok boolean, out_revision integer, out_position bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  n_ids constant integer := coalesce(cardinality(ids), 0);
  n_apps constant integer := coalesce(cardinality(app_stream), 0);
  k bigint;
  head_rev integer[];
  head_pos bigint[];
  last_row integer[];
  app_ok boolean[];
  app_rev integer[];
  app_last integer[];
  sel_row integer[] := '{}';
  sel_stream text[] := '{}';
  sel_rev integer[] := '{}';
  i integer;
  j integer;
  si integer;
  cur integer;
  expected integer;
  row_at integer := 0;
  accepted integer := 0;
  alloc_tx xid8;
  first_pos bigint;
BEGIN
  IF coalesce(cardinality(app_expected), 0) <> n_apps OR coalesce(cardinality(app_count), 0) <> n_apps
     OR coalesce((SELECT sum(c) FROM unnest(app_count) AS c), 0) <> coalesce(cardinality(ev_id), 0)
     OR coalesce(cardinality(ev_id), 0) <> coalesce(cardinality(ev_type), 0)
     OR coalesce(cardinality(ev_id), 0) <> coalesce(cardinality(ev_data), 0)
     OR coalesce(cardinality(ev_id), 0) <> coalesce(cardinality(ev_metadata), 0) THEN
    RAISE EXCEPTION 'append_batch: arrays of different lengths';
  END IF;
  FOR k IN SELECT DISTINCT hashtextextended(${streamPrefix} || u.id, 0) AS h FROM unnest(ids) AS u(id) ORDER BY h LOOP
    PERFORM pg_advisory_xact_lock(k);
  END LOOP;
  -- A fresh snapshot (each statement of a volatile function takes one): commits of the lock holders are seen.
  SELECT array_agg(coalesce(l.revision, -1) ORDER BY u.ord), array_agg(coalesce(l.position, 0) ORDER BY u.ord)
    INTO head_rev, head_pos
    FROM unnest(ids) WITH ORDINALITY AS u(id, ord)
    LEFT JOIN LATERAL (
      SELECT e.revision, e.position FROM ${s}.events AS e WHERE e.stream_id = u.id ORDER BY e.revision DESC LIMIT 1
    ) AS l ON true;
  last_row := array_fill(0, ARRAY[n_ids]);
  app_ok := array_fill(false, ARRAY[n_apps]);
  app_rev := array_fill(0, ARRAY[n_apps]);
  app_last := array_fill(0, ARRAY[n_apps]);
  FOR i IN 1..n_apps LOOP
    si := app_stream[i];
    IF si IS NULL OR si < 1 OR si > n_ids THEN
      RAISE EXCEPTION 'append_batch: stream index out of range';
    END IF;
    cur := head_rev[si];
    expected := app_expected[i];
    IF expected = -2 OR (expected = -1 AND cur = -1) OR (expected >= 0 AND cur = expected) THEN
      FOR j IN 1..app_count[i] LOOP
        row_at := row_at + 1;
        accepted := accepted + 1;
        cur := cur + 1;
        sel_row[accepted] := row_at;
        sel_stream[accepted] := ids[si];
        sel_rev[accepted] := cur;
        last_row[si] := accepted;
      END LOOP;
      head_rev[si] := cur;
      app_ok[i] := true;
      app_rev[i] := cur;
      app_last[i] := last_row[si];
    ELSE
      row_at := row_at + app_count[i];
      app_rev[i] := cur;
    END IF;
  END LOOP;
  IF accepted > 0 THEN
    SELECT a.tx, a.first_position INTO alloc_tx, first_pos FROM ${s}.allocate(accepted) AS a;
    INSERT INTO ${s}.events (position, tx, stream_id, revision, event_id, type, data, metadata)
      SELECT first_pos + t.ord - 1, alloc_tx, t.stream_id, t.rev, v.event_id, v.event_type, v.event_data, v.event_metadata
      FROM unnest(sel_row, sel_stream, sel_rev) WITH ORDINALITY AS t(rn, stream_id, rev, ord)
      JOIN unnest(ev_id, ev_type, ev_data, ev_metadata) WITH ORDINALITY AS v(event_id, event_type, event_data, event_metadata, rn)
        ON v.rn = t.rn;
  END IF;
  RETURN QUERY
    SELECT app_ok[x], app_rev[x],
      CASE WHEN NOT app_ok[x] THEN NULL WHEN app_last[x] > 0 THEN first_pos + app_last[x] - 1 ELSE head_pos[app_stream[x]] END
    FROM generate_series(1, n_apps) AS x ORDER BY x;
END
$fn$;
`;
    },
  },
  {
    version: 2,
    sql: (schema) => {
      const s = escapeIdentifier(schema);
      return `
-- Leases of the jobs that run in one process of the cluster at a time (docs/scaling.md): the
-- holder, its fencing token (raised by one on each new acquisition, never reset) and the expiry,
-- on the database's clock.
CREATE TABLE ${s}.leases (
  name       text        NOT NULL PRIMARY KEY,
  holder     text        NOT NULL,
  token      bigint      NOT NULL,
  expires_at timestamptz NOT NULL
);

-- Relay positions (the last event published, with everything before it), next to the log they
-- point into; a write carries its writer's fencing token and is refused below the stored one.
CREATE TABLE ${s}.relay_positions (
  name     text   NOT NULL PRIMARY KEY,
  position bigint NOT NULL,
  fence    bigint NOT NULL
);
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
    // Only when missing: CREATE SCHEMA checks the database's CREATE right even with IF NOT EXISTS,
    // and a role that lost it after the first start must still open the store.
    const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
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
