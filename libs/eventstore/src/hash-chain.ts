// Over 400 lines: the hash chain: computed at append, verified on read, for every store kind.
import { sha256Hex } from '@svc/security';
import type { MigrationAnchor } from './chain-migration';
import { AppendResult, EventStore, ExpectedRevision, NewEvent, RecordedEvent, SubscribeOptions, Subscription, WrongExpectedRevisionError } from './types';

/**
 * Tamper evidence (docs/audit.md): every event carries, in its metadata, the SHA-256 `hash` of
 * the previous event's hash (`prevHash`) and its own content as stored: stream id, revision, type,
 * data (sealed, when encryption at rest seals it) and every other metadata field, in canonical
 * JSON. A chain per stream; the first chained event of a stream has `prevHash: null`.
 */
export const CHAIN_TAG = 'svc-chain:v1';

/** The fields the chain adds to an event's metadata. */
export interface ChainFields {
  prevHash: string | null;
  hash: string;
}

/** The part of an event the hash covers. */
export interface ChainedContent {
  streamId: string;
  revision: number;
  type: string;
  data: unknown;
  metadata: unknown;
}

/**
 * The canonical JSON of what the hash covers: `{ data, metadata, revision, streamId, type }` of
 * the event as a store keeps it, its metadata without the chain fields themselves. The text is
 * exactly `canonicalJson` (libs/security: keys sorted at every level) of that object as JSON
 * stores it (`JSON.parse(JSON.stringify(...))`: dates become strings, undefined members go), so
 * the hash computed at append equals the one recomputed from the stored text. Written out in one
 * pass, without the round trip (under half the cost of `canonicalJson` on a sealed event).
 */
export function chainContent(e: ChainedContent): string {
  return `{"data":${storedCanonical(e.data) ?? 'null'},"metadata":${canonicalMetadata(e.metadata)},"revision":${storedCanonical(e.revision) ?? 'null'},"streamId":${storedCanonical(e.streamId) ?? 'null'},"type":${storedCanonical(e.type) ?? 'null'}}`;
}

function canonicalMetadata(metadata: unknown): string {
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) return storedCanonical(metadata ?? {}) ?? '{}';
  return canonicalObject(metadata as Record<string, unknown>, true);
}

/**
 * Canonical JSON of a value as `JSON.stringify` would store it (toJSON applied, undefined,
 * functions and symbols left out of objects and null in arrays, non-finite numbers null); undefined
 * when JSON.stringify would write nothing.
 */
function storedCanonical(value: unknown): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function')
    value = (value as { toJSON(): unknown }).toJSON();
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    case 'bigint':
      return JSON.stringify(value); // throws, as the store's own JSON.stringify would
  }
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += `${i ? ',' : ''}${storedCanonical(value[i]) ?? 'null'}`;
    return `${out}]`;
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) return storedCanonical(value.valueOf());
  return canonicalObject(value as Record<string, unknown>, false);
}

function canonicalObject(obj: Record<string, unknown>, withoutChainFields: boolean): string {
  const keys = Object.keys(obj).sort();
  let out = '{';
  for (const k of keys) {
    if (withoutChainFields && (k === 'prevHash' || k === 'hash')) continue;
    const v = storedCanonical(obj[k]);
    if (v === undefined) continue;
    out += `${out.length > 1 ? ',' : ''}${JSON.stringify(k)}:${v}`;
  }
  return `${out}}`;
}

/** SHA-256 (hex) of the previous event's hash and this event's canonical content. */
export function chainHash(prevHash: string | null, content: string): string {
  return sha256Hex(`${CHAIN_TAG}\n${prevHash ?? ''}\n${content}`);
}

/** The event's own hash, or null for an event written without the chain. */
export function storedHash(e: { metadata?: unknown }): string | null {
  const h = (e.metadata as { hash?: unknown } | undefined)?.hash;
  return typeof h === 'string' ? h : null;
}

/** The head of a stream as this process last knew it: a revision and its event's hash (null: unchained). */
interface Head {
  revision: number;
  hash: string | null;
}

export interface HashChainingOptions {
  /** Streams whose last (revision, hash) is kept to spare a read before an append (default 10,000). */
  rememberHeads?: number;
  /** Attempts of an append with the `any` expectation against writers in other processes (default 100). */
  maxAnyRetries?: number;
}

/**
 * The per-stream hash chain, as a decorator over the raw store (beneath encryption at rest, so
 * hashes cover the stored, sealed bytes and verification needs no key).
 *
 * The chain holds under the store's own concurrency control, in every adapter: an append is
 * chained to the event at its expected revision, and the store accepts it only if that event is
 * still the stream's last. `no_stream` chains from nothing. `any` is turned into the exact
 * revision of the stream's head (read, or remembered) and retried on a conflict, so two writers
 * can never both chain to the same event. Appends to one stream go through this decorator one
 * after another, in call order (as an in-process store applies appends of one tick), so the
 * remembered head is nearly always the real one; appends to different streams still share a
 * group commit.
 *
 * What this process remembers is a small map of (revision, hash) per stream, set from its own
 * appends and from stream reads: an event's hash never changes, so an entry is never wrong, only
 * possibly behind (another process appended): the store then refuses the append and the entry is
 * dropped. An append whose expected revision is behind a remembered head fails without a write.
 */
export class HashChainingEventStore implements EventStore {
  private readonly heads = new Map<string, Head>();
  private readonly turns = new Map<string, Promise<unknown>>();
  private readonly maxHeads: number;
  private readonly maxAnyRetries: number;
  /** Counters for benchmarks and diagnostics. */
  readonly stats = { remembered: 0, reads: 0, conflicts: 0, anyRetries: 0 };

  constructor(
    readonly inner: EventStore,
    options: HashChainingOptions = {},
  ) {
    this.maxHeads = Math.max(0, Math.floor(options.rememberHeads ?? 10_000));
    this.maxAnyRetries = Math.max(0, Math.floor(options.maxAnyRetries ?? 100));
  }

  append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    const valid =
      expectedRevision === 'any' ||
      expectedRevision === 'no_stream' ||
      (typeof expectedRevision === 'number' && Number.isSafeInteger(expectedRevision) && expectedRevision >= 0);
    // An invalid expectation or a stream id that is not a string: the store's own answer.
    if (!valid || typeof streamId !== 'string') return this.inner.append(streamId, events, expectedRevision);
    return this.inTurn(streamId, () =>
      expectedRevision === 'any' ? this.appendAny(streamId, events) : this.appendExpected(streamId, events, expectedRevision),
    );
  }

  async readStream(streamId: string, fromRevision?: number): Promise<RecordedEvent[]> {
    const events = await this.inner.readStream(streamId, fromRevision);
    if (events.length) this.learn(events[events.length - 1]);
    return events;
  }

  readAll(fromPosition: number, limit: number): Promise<RecordedEvent[]> {
    return this.inner.readAll(fromPosition, limit);
  }

  subscribeToAll(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void>): Subscription {
    return this.inner.subscribeToAll(options, handler);
  }

  headPosition(): Promise<number> {
    return this.inner.headPosition();
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  /** An exact expectation: chained to the event at that revision (or to nothing for `no_stream`). */
  private appendExpected(streamId: string, events: NewEvent[], expected: 'no_stream' | number): Promise<AppendResult> {
    const head = this.heads.get(streamId);
    if (expected === 'no_stream') {
      if (head) return Promise.reject(new WrongExpectedRevisionError(streamId, expected, head.revision));
      return this.write(streamId, events, expected, null);
    }
    if (head && head.revision === expected) {
      this.stats.remembered++;
      return this.write(streamId, events, expected, head.hash);
    }
    if (head && head.revision > expected) return Promise.reject(new WrongExpectedRevisionError(streamId, expected, head.revision));
    return this.hashAt(streamId, expected).then((prev) => this.write(streamId, events, expected, prev));
  }

  /** `any`: the stream's head as the exact expectation, again after each conflict (another process appended). */
  private async appendAny(streamId: string, events: NewEvent[]): Promise<AppendResult> {
    for (let attempt = 0; ; attempt++) {
      const head = this.heads.get(streamId) ?? (await this.readHead(streamId, 0));
      try {
        return await this.write(streamId, events, head ? head.revision : 'no_stream', head ? head.hash : null);
      } catch (err) {
        if (!(err instanceof WrongExpectedRevisionError)) throw err;
        if (attempt >= this.maxAnyRetries) throw new WrongExpectedRevisionError(streamId, 'any', err.actual);
        this.stats.anyRetries++;
        // Read on from the revision known to exist; a short random pause once writers keep colliding.
        await this.readHead(streamId, head ? head.revision : 0);
        if (attempt >= 3) await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 10)));
      }
    }
  }

  /** Chains the events to `prev`, appends them with the exact expectation, and remembers the new head. */
  private write(streamId: string, events: NewEvent[], expected: 'no_stream' | number, prev: string | null): Promise<AppendResult> {
    let revision = expected === 'no_stream' ? 0 : expected + 1;
    let hash = prev;
    const chained: NewEvent[] = new Array(events.length);
    try {
      for (let i = 0; i < events.length; i++) {
        const e = events[i];
        const prevHash = hash;
        hash = chainHash(prevHash, chainContent({ streamId, revision: revision++, type: e.type, data: e.data, metadata: e.metadata }));
        chained[i] = { type: e.type, data: e.data, metadata: { ...e.metadata, prevHash, hash } };
      }
    } catch (err) {
      return Promise.reject(err);
    }
    return this.inner.append(streamId, chained, expected).then(
      (result) => {
        if (events.length) this.remember(streamId, { revision: result.nextExpectedRevision, hash });
        return result;
      },
      (err) => {
        if (err instanceof WrongExpectedRevisionError) {
          this.stats.conflicts++;
          this.heads.delete(streamId);
        }
        throw err;
      },
    );
  }

  /**
   * The hash of the event at `revision`, which must be the stream's last: otherwise the append
   * could never succeed, and it is refused here without a write (with the stream's actual head).
   */
  private async hashAt(streamId: string, revision: number): Promise<string | null> {
    this.stats.reads++;
    const tail = await this.inner.readStream(streamId, revision);
    if (tail.length && tail[0].revision === revision) {
      const last = tail[tail.length - 1];
      this.learn(last);
      if (tail.length > 1) throw new WrongExpectedRevisionError(streamId, revision, last.revision);
      return storedHash(last);
    }
    // The stream ends before `revision` (or does not exist).
    const all = tail.length ? tail : await this.inner.readStream(streamId);
    const last = all[all.length - 1];
    if (last) this.learn(last);
    throw new WrongExpectedRevisionError(streamId, revision, last ? last.revision : 'no_stream');
  }

  /** Reads the stream from `fromRevision` (a revision known to exist, or 0) and returns its head (null: no stream). */
  private async readHead(streamId: string, fromRevision: number): Promise<Head | null> {
    this.stats.reads++;
    let events = await this.inner.readStream(streamId, fromRevision);
    if (!events.length && fromRevision > 0) events = await this.inner.readStream(streamId);
    if (!events.length) {
      this.heads.delete(streamId);
      return null;
    }
    const last = events[events.length - 1];
    this.learn(last);
    return { revision: last.revision, hash: storedHash(last) };
  }

  private learn(e: RecordedEvent): void {
    this.remember(e.streamId, { revision: e.revision, hash: storedHash(e) });
  }

  private remember(streamId: string, head: Head): void {
    if (this.maxHeads === 0) return;
    const known = this.heads.get(streamId);
    if (known && known.revision > head.revision) return;
    this.heads.delete(streamId); // re-inserted last: the map stays in order of last use
    this.heads.set(streamId, head);
    if (this.heads.size > this.maxHeads) this.heads.delete(this.heads.keys().next().value as string);
  }

  /** Runs `work` after every append given earlier for the stream has settled (a failed one does not stop the next). */
  private inTurn<T>(streamId: string, work: () => Promise<T>): Promise<T> {
    const before = this.turns.get(streamId);
    const run = before ? before.then(work, work) : work();
    this.turns.set(streamId, run);
    const settled = () => {
      if (this.turns.get(streamId) === run) this.turns.delete(streamId);
    };
    run.then(settled, settled);
    return run;
  }
}

/** The first event of a stream that breaks its chain, and why. */
export interface ChainIssue {
  streamId: string;
  revision: number;
  position: number;
  eventId: string | null;
  reason: string;
}

/** What verification found in one stream. */
export interface StreamChainReport {
  streamId: string;
  events: number;
  /** Events written before the chain existed (a prefix of the stream). */
  unchained: number;
  /** Of those, the ones the chain migration anchored and that still match its anchor. */
  anchored: number;
  chained: number;
  lastRevision: number;
  lastHash: string | null;
  issue: ChainIssue | null;
}

/** A stream's head as an auditor saved it earlier (`svc verify --save-anchor`): that event must still carry that hash. */
export interface ChainAnchor {
  revision: number;
  hash: string;
}

export interface ChainVerifierOptions {
  /**
   * Position from which every event must be chained (the log's chained era). `'first-chained'`
   * (the default): the position of the first chained event met. `null`: no such rule (one stream).
   */
  chainStart?: number | 'first-chained' | null;
  /** Heads saved earlier: each stream must still reach its anchor's revision, with that hash there. */
  anchors?: Map<string, ChainAnchor>;
  /**
   * The chain migration's anchors (`readMigrationAnchors`, chain-migration.ts) by stream, in order of
   * revision: the stream's unchained events up to each anchor's revision must hash to it.
   */
  migrationAnchors?: Map<string, MigrationAnchor[]>;
}

/** A stream's verification state: its report, and the chain over its unchained events when the migration anchored them. */
interface StreamState extends StreamChainReport {
  prefixHash: string | null;
  nextAnchor: number;
}

/**
 * Recomputes the chains from events as stored, fed in log order (or one stream in revision order).
 * A stream's first bad event is its issue; later events of that stream are not judged (everything
 * after a break is suspect). Events written before the chain existed are counted as unchained, not
 * as faults, while they form a stream's prefix and lie before the chained era.
 */
export class ChainVerifier {
  private readonly streams = new Map<string, StreamState>();
  private chainStart: number | null;
  private readonly autoStart: boolean;
  events = 0;

  constructor(private readonly options: ChainVerifierOptions = {}) {
    const start = options.chainStart === undefined ? 'first-chained' : options.chainStart;
    this.autoStart = start === 'first-chained';
    this.chainStart = typeof start === 'number' ? start : null;
  }

  /** Where the chained era began (null: no chained event met yet, or no such rule). */
  get chainedFrom(): number | null {
    return this.chainStart;
  }

  /** Checks one event; returns the issue when this event is its stream's first bad one. */
  add(e: RecordedEvent): ChainIssue | null {
    this.events++;
    let s = this.streams.get(e.streamId);
    if (!s) {
      s = {
        streamId: e.streamId,
        events: 0,
        unchained: 0,
        anchored: 0,
        chained: 0,
        lastRevision: -1,
        lastHash: null,
        issue: null,
        prefixHash: null,
        nextAnchor: 0,
      };
      this.streams.set(e.streamId, s);
    }
    s.events++;
    if (s.issue) return null;
    const fail = (reason: string): ChainIssue => {
      const eventId = (e.metadata as { eventId?: unknown } | undefined)?.eventId;
      s!.issue = { streamId: e.streamId, revision: e.revision, position: e.position, eventId: typeof eventId === 'string' ? eventId : null, reason };
      return s!.issue;
    };
    if (e.revision !== s.lastRevision + 1) {
      return fail(
        e.revision > s.lastRevision + 1
          ? `revision ${s.lastRevision + 1} is missing: the next event found is revision ${e.revision}`
          : `revision ${e.revision} comes after revision ${s.lastRevision}`,
      );
    }
    const m = (e.metadata ?? {}) as { prevHash?: unknown; hash?: unknown };
    const migrated = this.options.migrationAnchors?.get(e.streamId);
    if (typeof m.hash !== 'string') {
      if (s.chained > 0) return fail('no chain fields (hash, prevHash) after chained events of the stream');
      if (this.chainStart !== null && e.position > this.chainStart)
        return fail(`no chain fields, in the chained part of the log (every event after position ${this.chainStart} is chained)`);
      s.unchained++;
      s.lastRevision = e.revision;
      s.lastHash = null;
      if (migrated && s.nextAnchor < migrated.length) {
        s.prefixHash = chainHash(s.prefixHash, chainContent(e));
        const anchor = migrated[s.nextAnchor];
        if (anchor.toRevision === e.revision) {
          if (anchor.hash !== s.prefixHash) {
            return fail(
              `the events written before the chain, revisions 0-${anchor.toRevision}, do not match what the chain migration anchored (${short(anchor.hash)}, ChainAnchored at position ${anchor.position}): one of them was changed since (computed ${short(s.prefixHash)})`,
            );
          }
          s.anchored = e.revision + 1;
          while (s.nextAnchor < migrated.length && migrated[s.nextAnchor].toRevision <= e.revision) s.nextAnchor++;
        }
      }
      return null;
    }
    if (migrated && s.nextAnchor < migrated.length) {
      return fail(
        `carries chain fields, but the chain migration anchored revisions 0-${migrated[s.nextAnchor].toRevision} of the stream as written before the chain (ChainAnchored at position ${migrated[s.nextAnchor].position})`,
      );
    }
    if (this.autoStart && this.chainStart === null) this.chainStart = e.position;
    const prevHash = m.prevHash === undefined ? undefined : m.prevHash;
    if (prevHash !== s.lastHash) {
      return fail(
        s.lastHash === null
          ? `prevHash should be null (the first chained event of the stream), found ${short(prevHash)}`
          : `prevHash ${short(prevHash)} is not the hash of revision ${s.lastRevision} (${short(s.lastHash)})`,
      );
    }
    const computed = chainHash(s.lastHash, chainContent(e));
    if (computed !== m.hash)
      return fail(
        `hash does not match the event as stored (its data, metadata, type, stream or revision changed): stored ${short(m.hash)}, computed ${short(computed)}`,
      );
    const anchor = this.options.anchors?.get(e.streamId);
    if (anchor && anchor.revision === e.revision && anchor.hash !== m.hash)
      return fail(`differs from the saved anchor (${short(anchor.hash)} at revision ${anchor.revision}): the chain was rewritten`);
    s.chained++;
    s.lastRevision = e.revision;
    s.lastHash = m.hash;
    return null;
  }

  /**
   * After the last event: anchored streams that no longer reach their anchor (events removed from
   * their end, or the whole stream gone). `expectAllAnchors`: every anchored stream was in the
   * verified set (a whole-log check); otherwise only the streams seen are judged.
   */
  finish(expectAllAnchors: boolean): ChainIssue[] {
    const issues: ChainIssue[] = [];
    for (const [streamId, list] of this.options.migrationAnchors ?? []) {
      const s = this.streams.get(streamId);
      if (!s && !expectAllAnchors) continue;
      if (s?.issue) continue;
      const pending = s ? list[s.nextAnchor] : list[0];
      if (!pending) continue;
      const issue: ChainIssue = {
        streamId,
        revision: s ? s.lastRevision + 1 : 0,
        position: 0,
        eventId: null,
        reason: s
          ? `the stream ends at revision ${s.lastRevision}, but the chain migration anchored its revisions 0-${pending.toRevision} (ChainAnchored at position ${pending.position}): events were removed`
          : `the stream is gone, but the chain migration anchored its revisions 0-${pending.toRevision} (ChainAnchored at position ${pending.position})`,
      };
      if (s) s.issue = issue;
      issues.push(issue);
    }
    for (const [streamId, anchor] of this.options.anchors ?? []) {
      const s = this.streams.get(streamId);
      if (!s && !expectAllAnchors) continue;
      if (s?.issue) continue;
      if (!s || s.lastRevision < anchor.revision) {
        const issue: ChainIssue = {
          streamId,
          revision: s ? s.lastRevision + 1 : 0,
          position: 0,
          eventId: null,
          reason: s
            ? `the stream ends at revision ${s.lastRevision}, but the saved anchor has revision ${anchor.revision}: events were removed`
            : `the stream is gone, but the saved anchor has revision ${anchor.revision}`,
        };
        if (s) s.issue = issue;
        issues.push(issue);
      }
    }
    return issues;
  }

  reports(): StreamChainReport[] {
    return [...this.streams.values()].map(({ prefixHash: _h, nextAnchor: _n, ...report }) => report);
  }

  issues(): ChainIssue[] {
    return this.reports()
      .map((s) => s.issue)
      .filter((i): i is ChainIssue => i !== null)
      .sort((a, b) => (a.position || Infinity) - (b.position || Infinity));
  }
}

function short(h: unknown): string {
  return typeof h === 'string' ? (h.length > 16 ? `${h.slice(0, 16)}…` : h) : String(h);
}
