import { randomUUID } from 'node:crypto';
import { chainContent, chainHash, storedHash } from './hash-chain';
import { EventStore, EventMetadata, RecordedEvent, WrongExpectedRevisionError } from './types';

/**
 * The chain migration (docs/audit.md, "Existing data: the chain migration"). Events written before
 * the hash chain existed carry no chain fields, and the store is append-only: they are never
 * rewritten (a migration that edits stored events is the tampering the chain exists to expose).
 * Instead, for each stream that begins with such events, one `ChainAnchored` event in the stream
 * `audit-chain-anchor` records the hash those events would have chained to, computed from them as
 * stored: from that moment on, verify checks them against it like chained events.
 *
 * What it proves: those events are as they were when the migration ran. Nothing about before.
 */
export const CHAIN_ANCHOR_STREAM = 'audit-chain-anchor';
export const CHAIN_ANCHORED_TYPE = 'ChainAnchored';

/** The data of a `ChainAnchored` event: revisions 0..toRevision of a stream, unchained, as stored when anchored. */
export interface ChainAnchored {
  streamId: string;
  toRevision: number;
  /** toRevision + 1. */
  events: number;
  /** Position of the stream's event at toRevision. */
  lastPosition: number;
  /** The chain over those events as stored: h(r) = chainHash(h(r-1), chainContent(event r)), h(-1) = null. */
  hash: string;
}

/** An anchor read back, with the position of its `ChainAnchored` event. */
export interface MigrationAnchor extends ChainAnchored {
  position: number;
}

export function parseChainAnchored(e: RecordedEvent): ChainAnchored | string {
  if (e.type !== CHAIN_ANCHORED_TYPE) return `an event of type ${e.type} in ${CHAIN_ANCHOR_STREAM}`;
  const d = e.data as Partial<ChainAnchored> | null;
  const whole = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (
    !d ||
    typeof d.streamId !== 'string' ||
    !whole(d.toRevision) ||
    !whole(d.lastPosition) ||
    d.events !== (d.toRevision as number) + 1 ||
    typeof d.hash !== 'string' ||
    !/^[0-9a-f]{64}$/.test(d.hash)
  ) {
    return 'not a ChainAnchored entry (streamId, toRevision, events, lastPosition, hash)';
  }
  return d as ChainAnchored;
}

/** The migration's anchors by stream (each stream's in order of toRevision), up to `upTo` when given; `faults` lists entries that are not anchors. */
export async function readMigrationAnchors(
  store: EventStore,
  upTo = Infinity,
): Promise<{ anchors: Map<string, MigrationAnchor[]>; revision: number; faults: { position: number; reason: string }[] }> {
  const anchors = new Map<string, MigrationAnchor[]>();
  const faults: { position: number; reason: string }[] = [];
  let revision = -1;
  for (const e of await store.readStream(CHAIN_ANCHOR_STREAM)) {
    if (e.position > upTo) break;
    revision = e.revision;
    const a = parseChainAnchored(e);
    if (typeof a === 'string') {
      faults.push({ position: e.position, reason: a });
      continue;
    }
    const list = anchors.get(a.streamId) ?? [];
    list.push({ ...a, position: e.position });
    anchors.set(a.streamId, list);
  }
  for (const list of anchors.values()) list.sort((x, y) => x.toRevision - y.toRevision);
  return { anchors, revision, faults };
}

/** A stream's unchained beginning as the migration sees it. */
interface Prefix {
  next: number;
  open: boolean;
  broken: string | null;
  hash: string | null;
  lastPosition: number;
}

export interface ChainMigrationResult {
  /** Streams that begin with unchained events (up to the head the migration read). */
  unchainedStreams: number;
  /** Unchained events at the beginning of streams. */
  unchainedEvents: number;
  /** Streams whose unchained events an earlier run already anchored. */
  alreadyAnchored: number;
  /** The anchors appended by this run (none with `dryRun`). */
  anchored: ChainAnchored[];
  /** Streams not anchored because their unchained events do not follow one another from revision 0. */
  skipped: { streamId: string; reason: string }[];
  upToPosition: number;
  events: number;
}

export interface ChainMigrationOptions {
  /** Read the log up to here (default: its head when the migration starts). */
  upTo?: number;
  /** Who runs it (metadata actor), and the time written in its events' metadata. */
  actor: string;
  now?: () => Date;
  /** Anchors per append (default 200). */
  batchSize?: number;
  /** Compute, append nothing. */
  dryRun?: boolean;
  pageSize?: number;
  onProgress?: (position: number, events: number) => void;
}

/**
 * Anchors the unchained beginning of every stream that has one and no anchor for all of it yet
 * (idempotent: a second run appends nothing). `store` must chain its appends
 * (`HashChainingEventStore` over the raw adapter) and read events as stored. Appends go to
 * `audit-chain-anchor` with the exact expected revision; if another run appended in between, the
 * anchors are read again and only what is still missing is appended.
 */
export async function migrateChains(store: EventStore, options: ChainMigrationOptions): Promise<ChainMigrationResult> {
  const upTo = options.upTo ?? (await store.headPosition());
  const pageSize = options.pageSize ?? 1000;
  const prefixes = new Map<string, Prefix>();
  let events = 0;
  for (let from = 0; from < upTo;) {
    const page = await store.readAll(from, pageSize);
    if (!page.length) break;
    for (const e of page) {
      if (e.position > upTo) break;
      events++;
      let p = prefixes.get(e.streamId);
      if (!p) {
        p = { next: 0, open: true, broken: null, hash: null, lastPosition: 0 };
        prefixes.set(e.streamId, p);
      }
      if (!p.open) continue;
      if (storedHash(e) !== null) {
        p.open = false;
        continue;
      }
      if (e.revision !== p.next) {
        p.broken = `revision ${p.next} is missing: the next event found is revision ${e.revision}`;
        p.open = false;
        continue;
      }
      p.hash = chainHash(p.hash, chainContent(e));
      p.next++;
      p.lastPosition = e.position;
    }
    from = page[page.length - 1].position;
    options.onProgress?.(Math.min(from, upTo), events);
  }

  const skipped: ChainMigrationResult['skipped'] = [];
  const wanted: ChainAnchored[] = [];
  let unchainedEvents = 0;
  for (const [streamId, p] of prefixes) {
    if (p.broken) skipped.push({ streamId, reason: p.broken });
    else if (p.next > 0) {
      unchainedEvents += p.next;
      wanted.push({ streamId, toRevision: p.next - 1, events: p.next, lastPosition: p.lastPosition, hash: p.hash! });
    }
  }
  const result: ChainMigrationResult = {
    unchainedStreams: wanted.length + skipped.length,
    unchainedEvents,
    alreadyAnchored: 0,
    anchored: [],
    skipped,
    upToPosition: upTo,
    events,
  };
  const batchSize = Math.max(1, Math.floor(options.batchSize ?? 200));
  for (let attempt = 0; ; attempt++) {
    const existing = await readMigrationAnchors(store);
    const missing = wanted.filter((w) => !(existing.anchors.get(w.streamId) ?? []).some((a) => a.toRevision >= w.toRevision));
    result.alreadyAnchored = wanted.length - missing.length - result.anchored.length;
    if (options.dryRun || !missing.length) {
      if (options.dryRun) result.anchored = [];
      return result;
    }
    let expected: number | 'no_stream' = existing.revision >= 0 ? existing.revision : 'no_stream';
    try {
      for (let i = 0; i < missing.length; i += batchSize) {
        const batch = missing.slice(i, i + batchSize);
        const at = (options.now ? options.now() : new Date()).toISOString();
        const correlationId = randomUUID();
        const r = await store.append(
          CHAIN_ANCHOR_STREAM,
          batch.map((data) => ({
            type: CHAIN_ANCHORED_TYPE,
            data,
            metadata: {
              eventId: randomUUID(),
              correlationId,
              causationId: null,
              organizationId: null,
              environmentId: null,
              actor: options.actor,
              recordedAt: at,
            } satisfies EventMetadata,
          })),
          expected,
        );
        expected = r.nextExpectedRevision;
        result.anchored.push(...batch);
      }
      result.alreadyAnchored = wanted.length - result.anchored.length;
      return result;
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= 20) throw err;
      // Another run appended anchors: read them again and append only what is still missing.
    }
  }
}
