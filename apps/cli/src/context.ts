import { randomUUID } from 'node:crypto';
import { hostname, userInfo } from 'node:os';
import type { EventStore, RecordedEvent } from '@svc/eventstore';
import { CliError, Output, Progress } from './output';

/** What a command works with: the store the service is configured for, as stored (sealed data, chain fields). */
export interface Context {
  out: Output;
  /** The adapter without decorators. */
  store: EventStore;
  /** Where the store is, for messages (never a password). */
  where: string;
  dataDir: string;
  close(): Promise<void>;
}

/** Opens the event store named by the service's variables (EVENT_STORE, SVC_DATA_DIR, DATABASE_URL, EVENT_STORE_SCHEMA, ESDB_CONNECTION_STRING). */
export async function openContext(out: Output): Promise<Context> {
  // Loaded here, after the arguments were parsed: `--help` stays quick.
  const { eventStoreSettings, openRawEventStore } = await import('@svc/platform');
  let settings;
  try {
    settings = eventStoreSettings(process.env);
  } catch (err) {
    throw new CliError((err as Error).message);
  }
  const logger = { warn: (message: string, meta: Record<string, unknown>) => out.note(`warning: ${message} ${JSON.stringify(meta)}`) };
  let store: EventStore;
  try {
    store = await openRawEventStore(settings, { tool: true, logger });
  } catch (err) {
    throw new CliError(`cannot open the event store: ${(err as Error).message}`);
  }
  const where =
    settings.eventStore === 'sqlite'
      ? `SQLite ${settings.dataDir}/events.sqlite`
      : settings.eventStore === 'postgres'
        ? `PostgreSQL schema ${settings.eventStoreSchema}`
        : 'KurrentDB';
  return { out, store, where, dataDir: settings.dataDir, close: () => store.close() };
}

export interface ScanOptions {
  /** Events with a position above this (default 0). */
  after?: number;
  /** Events up to this position (the log's head when the command started). */
  upTo: number;
  pageSize?: number;
  progress?: Progress;
}

/** The log in position order within (after, upTo], page by page. */
export async function* scanLog(store: EventStore, options: ScanOptions): AsyncGenerator<RecordedEvent> {
  const pageSize = options.pageSize ?? 1000;
  let from = options.after ?? 0;
  let seen = 0;
  while (from < options.upTo) {
    const page = await store.readAll(from, pageSize);
    if (!page.length) break;
    for (const e of page) {
      if (e.position > options.upTo) {
        options.progress?.update(options.upTo, seen);
        return;
      }
      seen++;
      yield e;
    }
    from = page[page.length - 1].position;
    options.progress?.update(from, seen);
  }
}

/** A position argument: a whole number >= 0. */
export function parsePosition(value: string, name: string): number {
  if (!/^\d+$/.test(value.trim())) throw new CliError(`${name} must be a log position (a whole number)`);
  const n = Number(value.trim());
  if (!Number.isSafeInteger(n)) throw new CliError(`${name} is too large`);
  return n;
}

/** `--since`: an ISO 8601 date or date-time. */
export function parseSince(value: string): string {
  const t = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(t))
    throw new CliError('--since must be an ISO 8601 date or date-time (2026-05-01, 2026-05-01T12:00:00Z)');
  return new Date(t).toISOString();
}

/** Decrypting: the key ring of the master key, or a refusal when there is no key. */
export async function keyringFor(ctx: Context): Promise<(keyId: string) => Buffer> {
  const { readMasterKey } = await import('@svc/platform');
  const { Keyring } = await import('@svc/security');
  const key = readMasterKey({ dataDir: ctx.dataDir }, process.env);
  if (!key) throw new CliError(`--decrypt needs the master key: set SVC_MASTER_KEY (base64), or run where ${ctx.dataDir}/master.key is readable`);
  let keyring;
  try {
    keyring = new Keyring(key);
  } catch (err) {
    throw new CliError(`the master key cannot be used: ${(err as Error).message}`);
  }
  return (keyId) => keyring.encryptionKey(keyId);
}

/** Who runs a decrypting read: `--actor`, else SVC_AUDIT_ACTOR; required. */
export function auditActor(option: string | undefined): string {
  const actor = (option ?? process.env.SVC_AUDIT_ACTOR ?? '').trim();
  if (!actor) throw new CliError('--decrypt needs to know who you are: --actor <name> or SVC_AUDIT_ACTOR (recorded in the audit stream with your OS user)');
  if (actor.length > 200 || /[\u0000-\u001f]/.test(actor)) throw new CliError('--actor must be at most 200 characters, without control characters');
  return actor;
}

/** The stream holding the decrypting reads of one month (UTC). */
export function auditStream(at: Date): string {
  return `audit-decrypt-${at.toISOString().slice(0, 7)}`;
}

export interface DecryptingRead {
  actor: string;
  command: string;
  /** What was asked for, as given (stream, category, positions, subject). */
  selection: Record<string, unknown>;
  /** The streams whose payloads the run opens, when known before it starts (else null: the selection says). */
  streams: string[] | null;
  /** Nothing after this position is read: with the selection, it fixes exactly what the run may open. */
  upToPosition: number;
}

const MAX_LISTED_STREAMS = 1000;

/**
 * Records a decrypting read (decisions 15) in the audit stream BEFORE anything is opened or shown:
 * who (the actor given, the OS user, host and process), when, which streams (listed, or the
 * selection and the position bound that determine them). Appended through the hash chain, data in
 * clear (it holds no PHI): an auditor reads it without the key. If the append fails, the command
 * stops here and shows nothing.
 */
export async function recordDecryptingRead(ctx: Context, read: DecryptingRead): Promise<{ streamId: string; position: number; runId: string }> {
  const { HashChainingEventStore } = await import('@svc/eventstore');
  const now = new Date();
  const runId = randomUUID();
  let osUser: string;
  try {
    osUser = userInfo().username;
  } catch {
    osUser = process.env.USER ?? `uid:${process.getuid?.() ?? 'unknown'}`;
  }
  const streams = read.streams === null ? null : read.streams.slice(0, MAX_LISTED_STREAMS);
  const data = {
    runId,
    actor: read.actor,
    osUser,
    host: hostname(),
    pid: process.pid,
    command: read.command,
    selection: read.selection,
    streams,
    streamCount: read.streams === null ? null : read.streams.length,
    upToPosition: read.upToPosition,
    startedAt: now.toISOString(),
  };
  const streamId = auditStream(now);
  const chained = new HashChainingEventStore(ctx.store);
  try {
    const r = await chained.append(
      streamId,
      [
        {
          type: 'DecryptingReadRecorded',
          data,
          metadata: {
            eventId: randomUUID(),
            correlationId: runId,
            causationId: null,
            organizationId: null,
            environmentId: null,
            actor: `auditor:${read.actor}`,
            recordedAt: now.toISOString(),
          },
        },
      ],
      'any',
    );
    return { streamId, position: r.position, runId };
  } catch (err) {
    throw new CliError(`the decrypting read could not be recorded in ${streamId}, so nothing is shown: ${(err as Error).message}`);
  }
}
