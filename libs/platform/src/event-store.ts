import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import {
  ChainCheckpointer,
  DEFAULT_DATABASE_URL,
  DEFAULT_EVENT_SCHEMA,
  EncryptingEventStore,
  EventStore,
  EventStoreLogger,
  HashChainingEventStore,
  KurrentEventStore,
  PostgresEventStore,
  SqliteEventStore,
  checkSchemaName,
} from '@svc/eventstore';
import { Keyring } from '@svc/security';

/** Where the event store is (README.md, "Running modes and settings"): the variables the service and the audit CLI read alike. */
export interface EventStoreSettings {
  eventStore: 'sqlite' | 'postgres' | 'esdb';
  dataDir: string;
  databaseUrl: string;
  eventStoreSchema: string;
  esdbConnectionString: string;
}

const DEFAULT_ESDB = 'kurrentdb://localhost:2113?tls=false';

/**
 * The event store settings alone, read from the environment with the rules of `loadConfig`
 * (EVENT_STORE, SVC_DATA_DIR, DATABASE_URL, EVENT_STORE_SCHEMA, ESDB_CONNECTION_STRING; an empty
 * variable counts as unset), for tools that need the store and nothing else of the service's settings.
 */
export function eventStoreSettings(raw: NodeJS.ProcessEnv = process.env): EventStoreSettings {
  const env = (name: string) => (raw[name] === undefined || raw[name] === '' ? undefined : raw[name]);
  const kind = env('EVENT_STORE') ?? 'sqlite';
  if (kind !== 'sqlite' && kind !== 'postgres' && kind !== 'esdb') throw new Error('EVENT_STORE must be one of sqlite, postgres, esdb');
  let schema: string;
  try {
    schema = checkSchemaName(env('EVENT_STORE_SCHEMA') ?? DEFAULT_EVENT_SCHEMA);
  } catch {
    throw new Error('EVENT_STORE_SCHEMA must be lower-case letters, digits and _, not starting with a digit, at most 48 characters');
  }
  return {
    eventStore: kind,
    dataDir: resolve(env('SVC_DATA_DIR') ?? './data'),
    databaseUrl: env('DATABASE_URL') ?? DEFAULT_DATABASE_URL,
    eventStoreSchema: schema,
    esdbConnectionString: env('ESDB_CONNECTION_STRING') ?? DEFAULT_ESDB,
  };
}

export interface OpenEventStoreOptions {
  logger?: EventStoreLogger;
  /**
   * Opened by a tool beside the service (the audit CLI): nothing is created (a missing SQLite file
   * or PostgreSQL schema is an error, not a new empty store), SQLite writes on the calling thread
   * without a checkpoint worker, PostgreSQL does not LISTEN and keeps a small pool.
   */
  tool?: boolean;
}

/** The adapter the settings name, without decorators: events as stored (data sealed, chain fields in metadata). */
export async function openRawEventStore(settings: EventStoreSettings, options: OpenEventStoreOptions = {}): Promise<EventStore> {
  const { logger, tool } = options;
  if (settings.eventStore === 'esdb') return new KurrentEventStore(settings.esdbConnectionString, { logger });
  if (settings.eventStore === 'postgres') {
    if (tool && !(await schemaExists(settings.databaseUrl, settings.eventStoreSchema))) {
      throw new Error(`no event store in schema ${settings.eventStoreSchema} of the PostgreSQL database at DATABASE_URL`);
    }
    // Connects, creates or migrates its schema (and listens, for the service) before it answers.
    return PostgresEventStore.open({
      connectionString: settings.databaseUrl,
      schema: settings.eventStoreSchema,
      logger,
      ...(tool ? { listen: false, poolSize: 2 } : {}),
    });
  }
  const file = join(settings.dataDir, 'events.sqlite');
  if (tool && !existsSync(file)) throw new Error(`no event store at ${file} (set SVC_DATA_DIR to the service's data dir)`);
  return new SqliteEventStore(file, { logger, ...(tool ? { writerThread: false, backgroundCheckpoint: false } : {}) });
}

/**
 * The store as the services use it: encryption at rest (docs/decisions.md, "Encryption at rest") over the per-stream hash
 * chain (docs/audit.md) over the adapter. The chain is beneath encryption, so it covers the sealed
 * bytes as stored and can be verified without the master key.
 */
export function serviceEventStore(raw: EventStore, keyring: Keyring): EventStore {
  return new EncryptingEventStore(new HashChainingEventStore(raw), (envId) => keyring.encryptionKey(envId));
}

/**
 * The background job that writes checkpoints of the global log (docs/audit.md, "Checkpoints") for
 * one service process, over a chaining decorator of its own on the raw adapter (checkpoint events
 * are chained, and their data is not encrypted: it holds positions and hashes only). Every process
 * of a deployment runs one; the store's concurrency control lets exactly one write each checkpoint.
 * `now` (the service's clock) dates the checkpoint events; the job is scheduled on real time.
 */
export function chainCheckpointer(
  raw: EventStore,
  settings: { everyEvents: number; intervalS: number },
  now: () => Date,
  logger?: { warn(message: string, meta: Record<string, unknown>): void },
): ChainCheckpointer {
  return new ChainCheckpointer(new HashChainingEventStore(raw), { everyEvents: settings.everyEvents, intervalMs: settings.intervalS * 1000, now, logger });
}

/**
 * The master key if there is one, never a new one: SVC_MASTER_KEY (base64), else the standalone
 * key file `<data dir>/master.key`; null when neither exists.
 */
export function readMasterKey(settings: { dataDir: string }, raw: NodeJS.ProcessEnv = process.env): Buffer | null {
  if (raw.SVC_MASTER_KEY) return Buffer.from(raw.SVC_MASTER_KEY, 'base64');
  const file = join(settings.dataDir, 'master.key');
  if (!existsSync(file)) return null;
  return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
}

async function schemaExists(connectionString: string, schema: string): Promise<boolean> {
  const c = new Client({ connectionString, connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    const r = await c.query('SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2', [schema, 'events']);
    return (r.rowCount ?? 0) > 0;
  } finally {
    await c.end().catch(() => undefined);
  }
}
