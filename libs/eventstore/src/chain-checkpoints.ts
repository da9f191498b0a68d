// Over 400 lines: the global-log checkpoints: writing, chaining and verifying them on each store kind.
import { Hash, createHash, randomUUID } from 'node:crypto';
import { chainContent, storedHash } from './hash-chain';
import { EventStore, RecordedEvent, WrongExpectedRevisionError } from './types';

/**
 * Checkpoints of the global log (docs/audit.md, "Checkpoints"): the per-stream hash chain says
 * nothing about the order of events of different streams, nor about events removed from the end of
 * a stream or whole streams removed. A checkpoint covers a range of the log, (afterPosition,
 * toPosition], with a digest over every event's hash in position order, and chains to the checkpoint
 * before it; the ranges follow one another from position 0 without a gap.
 *
 * Checkpoints are events of their own streams, 1,000 to a stream: checkpoint n is revision
 * n mod 1000 of `audit-checkpoint-<floor(n / 1000)>` (so the last one is found, and a stream read,
 * without reading every checkpoint ever written). They are chained like any other event, and the
 * store's own concurrency control decides who writes each one: checkpoint n is appended with the
 * expected revision of checkpoint n-1 in its stream (`no_stream` for the first of a stream), so of
 * several writers (the processes of distributed mode on one store) exactly one succeeds; the others
 * read it and go on from its end.
 */
export const CHECKPOINT_STREAM_PREFIX = 'audit-checkpoint-';
export const CHECKPOINTS_PER_STREAM = 1000;
export const CHECKPOINT_EVENT_TYPE = 'ChainCheckpointRecorded';
export const CHECKPOINT_TAG = 'svc-checkpoint:v1';
/** Events per block: a checkpoint keeps one digest per block, so verify narrows a mismatch down to one block. */
export const CHECKPOINT_BLOCK_EVENTS = 256;

/** One block of a checkpoint's range: (previous block's toPosition, toPosition], its event count and digest. */
export interface CheckpointBlock {
  toPosition: number;
  events: number;
  digest: string;
}

/** The stream holding checkpoint n. */
export function checkpointStream(n: number): string {
  return `${CHECKPOINT_STREAM_PREFIX}${Math.floor(n / CHECKPOINTS_PER_STREAM)}`;
}

/** The revision of checkpoint n in its stream. */
export function checkpointRevision(n: number): number {
  return n % CHECKPOINTS_PER_STREAM;
}

/** Whether an event is a checkpoint's (by its stream). */
export function isCheckpointStream(streamId: string): boolean {
  return streamId.startsWith(CHECKPOINT_STREAM_PREFIX);
}

/** The data of a `ChainCheckpointRecorded` event. */
export interface ChainCheckpoint {
  /** 0-based: revision n mod 1000 of `audit-checkpoint-<floor(n / 1000)>`. */
  checkpoint: number;
  /** The range covered: events with afterPosition < position <= toPosition. */
  afterPosition: number;
  toPosition: number;
  events: number;
  blocks: CheckpointBlock[];
  /** SHA-256 over the blocks (each block's digest is SHA-256 over its events' positions and hashes). */
  digest: string;
  /** The previous checkpoint's `hash` (null for checkpoint 0). */
  prevHash: string | null;
  /** SHA-256 over prevHash, the checkpoint's number, range, event count and digest. */
  hash: string;
}

/**
 * What one event contributes to a checkpoint: its position and its chain hash (`c`), or, for an
 * event written before the chain existed, a hash of its content as stored (`u`), so the two can
 * never be taken for one another.
 */
export function checkpointLeaf(e: RecordedEvent): string {
  const hash = storedHash(e);
  if (hash !== null) return `${e.position} c ${hash}\n`;
  return `${e.position} u ${createHash('sha256').update(`${CHECKPOINT_TAG}\n`).update(chainContent(e)).digest('hex')}\n`;
}

/** The digest of a range from its blocks. */
export function checkpointDigest(blocks: readonly CheckpointBlock[]): string {
  const h = createHash('sha256').update(`${CHECKPOINT_TAG}\nrange\n`);
  for (const b of blocks) h.update(`${b.toPosition} ${b.events} ${b.digest}\n`);
  return h.digest('hex');
}

/** The hash that chains checkpoints. */
export function checkpointHash(c: Pick<ChainCheckpoint, 'checkpoint' | 'afterPosition' | 'toPosition' | 'events' | 'digest' | 'prevHash'>): string {
  return createHash('sha256')
    .update(`${CHECKPOINT_TAG}\n${c.prevHash ?? ''}\n${c.checkpoint} ${c.afterPosition} ${c.toPosition} ${c.events} ${c.digest}`)
    .digest('hex');
}

/** Builds a checkpoint's blocks from the events of its range, in position order. */
export class CheckpointBuilder {
  readonly blocks: CheckpointBlock[] = [];
  events = 0;
  /** Events of the range that are not checkpoints themselves. */
  others = 0;
  lastPosition: number;
  private block: Hash | null = null;
  private blockEvents = 0;

  constructor(readonly afterPosition: number) {
    this.lastPosition = afterPosition;
  }

  add(e: RecordedEvent): void {
    if (e.position <= this.lastPosition) throw new Error(`checkpoint range: position ${e.position} after ${this.lastPosition}`);
    if (!this.block) this.block = createHash('sha256').update(`${CHECKPOINT_TAG}\nblock\n`);
    this.block.update(checkpointLeaf(e));
    this.blockEvents++;
    this.events++;
    if (!isCheckpointStream(e.streamId)) this.others++;
    this.lastPosition = e.position;
    if (this.blockEvents === CHECKPOINT_BLOCK_EVENTS) this.closeBlock();
  }

  /** The checkpoint of the events added so far. */
  finish(checkpoint: number, prevHash: string | null): ChainCheckpoint {
    this.closeBlock();
    const body = {
      checkpoint,
      afterPosition: this.afterPosition,
      toPosition: this.lastPosition,
      events: this.events,
      digest: checkpointDigest(this.blocks),
      prevHash,
    };
    return { ...body, blocks: this.blocks, hash: checkpointHash(body) };
  }

  private closeBlock(): void {
    if (!this.block) return;
    this.blocks.push({ toPosition: this.lastPosition, events: this.blockEvents, digest: this.block.digest('hex') });
    this.block = null;
    this.blockEvents = 0;
  }
}

/** A checkpoint read back: its number (from its stream and revision), its event's position, its data. */
export interface StoredCheckpoint {
  number: number;
  position: number;
  data: ChainCheckpoint;
}

/** The checkpoint number an event of a checkpoint stream stands at (NaN: not a checkpoint stream). */
export function checkpointNumberOf(e: RecordedEvent): number {
  const segment = e.streamId.slice(CHECKPOINT_STREAM_PREFIX.length);
  if (!isCheckpointStream(e.streamId) || !/^(0|[1-9]\d*)$/.test(segment)) return NaN;
  return Number(segment) * CHECKPOINTS_PER_STREAM + e.revision;
}

/** The checkpoint data of an event, or a reason why it is not one. */
export function parseCheckpoint(e: RecordedEvent): ChainCheckpoint | string {
  if (e.type !== CHECKPOINT_EVENT_TYPE) return `an event of type ${e.type} in the checkpoint stream ${e.streamId}`;
  const d = e.data as Partial<ChainCheckpoint> | null;
  const whole = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  const hex = (h: unknown) => typeof h === 'string' && /^[0-9a-f]{64}$/.test(h);
  if (!d || typeof d !== 'object') return 'checkpoint data is not an object';
  if (!whole(d.checkpoint) || !whole(d.afterPosition) || !whole(d.toPosition) || !whole(d.events)) return 'checkpoint number, range or event count missing';
  if (!hex(d.digest) || !hex(d.hash) || !(d.prevHash === null || hex(d.prevHash))) return 'checkpoint digest or hashes missing';
  if (!Array.isArray(d.blocks) || !d.blocks.every((b) => b && whole(b.toPosition) && whole(b.events) && hex(b.digest))) return 'checkpoint blocks missing';
  return d as ChainCheckpoint;
}

export interface ChainCheckpointerOptions {
  /** A checkpoint once this many events are past the last one (default 10,000; at most 100,000). */
  everyEvents?: number;
  /** A checkpoint once this much real time passed since the last one, if any event came (default 60 s). */
  intervalMs?: number;
  /** How often new events are read (default: 1 s, or the interval when shorter). */
  pollMs?: number;
  /** Time for the checkpoint event's `recordedAt` (the service's clock); never used for scheduling. */
  now?: () => Date;
  /** Page size of log reads (default 1000). */
  pageSize?: number;
  logger?: { warn(message: string, meta: Record<string, unknown>): void };
}

export const CHECKPOINT_DEFAULTS = { everyEvents: 10_000, intervalMs: 60_000 } as const;
export const CHECKPOINT_MAX_EVENTS = 100_000;

/**
 * Writes the checkpoints of one event store, in the background: reads the log past the last
 * checkpoint, page by page, below the store's safe read point (what `readAll` returns is a complete
 * prefix of the log: PostgreSQL's reads stop at its watermark), and appends a checkpoint once
 * `everyEvents` events are past the last one (cut exactly there) or `intervalMs` of real time
 * passed and at least one event other than a checkpoint came. It only reads and appends, so it
 * never blocks a writer; appending a checkpoint is one append to its own stream.
 *
 * Every process of a deployment can run one against the same store: each checkpoint is appended
 * with the expected revision of the one before it, so the first writer wins and the others read
 * what it wrote and go on from its end (counted in `stats.lost`).
 *
 * The store given must chain appends (`HashChainingEventStore` over the raw adapter): the
 * checkpoint events are chained like any other.
 */
export class ChainCheckpointer {
  readonly stats = { written: 0, lost: 0, failures: 0 };
  private readonly everyEvents: number;
  private readonly intervalMs: number;
  private readonly pollMs: number;
  private readonly pageSize: number;
  /** The last checkpoint known (null: none yet; data null: that entry is not a checkpoint). */
  private last: { number: number; position: number; data: ChainCheckpoint | null } | null = null;
  /** Whether the last full checkpoint stream was looked for (once, at the first round). */
  private found = false;
  private range: CheckpointBuilder | null = null;
  /** Real time (ms) the range started: the last checkpoint seen, or this process's start. */
  private rangeSince = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;
  private warnedBroken = false;

  constructor(
    private readonly store: EventStore,
    private readonly options: ChainCheckpointerOptions = {},
  ) {
    this.everyEvents = Math.min(CHECKPOINT_MAX_EVENTS, Math.max(1, Math.floor(options.everyEvents ?? CHECKPOINT_DEFAULTS.everyEvents)));
    this.intervalMs = Math.max(1, Math.floor(options.intervalMs ?? CHECKPOINT_DEFAULTS.intervalMs));
    this.pollMs = Math.max(10, Math.floor(options.pollMs ?? Math.min(1000, this.intervalMs)));
    this.pageSize = Math.max(1, Math.floor(options.pageSize ?? 1000));
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.rangeSince = Date.now();
    this.schedule();
  }

  /** Stops after the round in progress (nothing half written: a checkpoint is one append). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /**
   * One round: reads what came since the last round and writes every checkpoint that is due.
   * Returns how many this process wrote. `force`: a checkpoint of whatever came, without waiting
   * for the interval (tests, tools).
   */
  async runOnce(force = false): Promise<number> {
    let written = 0;
    for (;;) {
      await this.refreshLast();
      if (!this.lastUsable()) return written;
      const range = this.currentRange();
      const full = await this.readInto(range);
      const due = full || force || Date.now() - this.rangeSince >= this.intervalMs;
      if (!due || range.others === 0) return written;
      if (!(await this.write(range))) continue; // lost to another writer: go on from its checkpoint
      written++;
      if (!full) return written;
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.runOnce()
        .then(
          () => undefined,
          (err) => {
            this.stats.failures++;
            this.options.logger?.warn('chain checkpoint round failed; retrying', { error: err instanceof Error ? err.name : typeof err });
          },
        )
        .finally(() => {
          this.running = null;
          this.schedule();
        });
    }, this.pollMs);
    this.timer.unref?.();
  }

  /** Reads checkpoints written since the last one known (by this process or another). */
  private async refreshLast(): Promise<void> {
    if (!this.found) {
      const full = await lastFullCheckpointStream(this.store);
      if (full) this.learn(full);
      this.found = true;
    }
    for (;;) {
      const next = this.last ? this.last.number + 1 : 0;
      const fresh = await this.store.readStream(checkpointStream(next), checkpointRevision(next));
      if (!fresh.length) return;
      this.learn(fresh[fresh.length - 1]);
      // The stream is full: the next checkpoint is the first of the next stream.
      if (fresh[fresh.length - 1].revision < CHECKPOINTS_PER_STREAM - 1) return;
    }
  }

  private learn(e: RecordedEvent): void {
    const data = parseCheckpoint(e);
    this.last = { number: checkpointNumberOf(e), position: e.position, data: typeof data === 'string' ? null : data };
    this.range = null;
    this.rangeSince = Date.now();
  }

  /** A checkpoint stream whose last entry is not a checkpoint cannot be continued: said once, and nothing written. */
  private lastUsable(): boolean {
    const ok = this.last === null || (this.last.data !== null && this.last.data.checkpoint === this.last.number);
    if (!ok && !this.warnedBroken) {
      this.warnedBroken = true;
      this.options.logger?.warn(
        'chain checkpoints: the last entry of the checkpoint streams is not a checkpoint; none is written (svc verify --all names the fault)',
        { checkpoint: this.last?.number ?? null },
      );
    }
    return ok;
  }

  private currentRange(): CheckpointBuilder {
    const after = this.last?.data ? this.last.data.toPosition : 0;
    if (!this.range || this.range.afterPosition !== after) this.range = new CheckpointBuilder(after);
    return this.range;
  }

  /** Adds the events that came to the range, up to `everyEvents` of them; true when the range is full. */
  private async readInto(range: CheckpointBuilder): Promise<boolean> {
    for (;;) {
      if (range.events >= this.everyEvents && range.others > 0) return true;
      const want = Math.min(this.pageSize, Math.max(1, this.everyEvents - range.events));
      const page = await this.store.readAll(range.lastPosition, want);
      for (const e of page) {
        range.add(e);
        if (range.events >= this.everyEvents && range.others > 0) return true;
      }
      if (page.length < want) return false;
      // Between pages, the process's other work goes first (an in-process store reads synchronously).
      await new Promise((r) => setImmediate(r));
    }
  }

  /** Appends the checkpoint of the range; false when another writer appended this checkpoint first. */
  private async write(range: CheckpointBuilder): Promise<boolean> {
    const number = this.last ? this.last.number + 1 : 0;
    const checkpoint = range.finish(number, this.last?.data ? this.last.data.hash : null);
    const recordedAt = (this.options.now ? this.options.now() : new Date()).toISOString();
    try {
      const r = await this.store.append(
        checkpointStream(number),
        [
          {
            type: CHECKPOINT_EVENT_TYPE,
            data: checkpoint,
            metadata: {
              eventId: randomUUID(),
              correlationId: randomUUID(),
              causationId: null,
              organizationId: null,
              environmentId: null,
              actor: 'system',
              recordedAt,
            },
          },
        ],
        checkpointRevision(number) === 0 ? 'no_stream' : checkpointRevision(number) - 1,
      );
      this.stats.written++;
      this.last = { number, position: r.position, data: checkpoint };
      this.range = null;
      this.rangeSince = Date.now();
      return true;
    } catch (err) {
      this.range = null; // finished: its blocks are closed; read again from the new last checkpoint
      if (!(err instanceof WrongExpectedRevisionError)) throw err;
      this.stats.lost++;
      return false;
    }
  }
}

/**
 * The last event of the last full checkpoint stream (null: none is full), found with a few reads of
 * one event each: a stream is full when it has its last revision.
 */
async function lastFullCheckpointStream(store: EventStore): Promise<RecordedEvent | null> {
  const lastOf = async (segment: number): Promise<RecordedEvent | null> =>
    (await store.readStream(checkpointStream(segment * CHECKPOINTS_PER_STREAM), CHECKPOINTS_PER_STREAM - 1))[0] ?? null;
  let found = await lastOf(0);
  if (!found) return null;
  // Galloping: 1, 2, 4, ... until a stream is not full; then halving between the last full and it.
  let lo = 0;
  let hi = 1;
  for (;;) {
    const e = await lastOf(hi);
    if (!e) break;
    found = e;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    const e = await lastOf(mid);
    if (e) {
      found = e;
      lo = mid;
    } else hi = mid;
  }
  return found;
}

/**
 * The checkpoints up to a log position, one checkpoint stream at a time (`svc verify --all` holds no
 * more than about two streams of them at once).
 */
export class CheckpointReader {
  private next = 0;
  private ended = false;

  constructor(
    private readonly store: EventStore,
    private readonly upTo: number,
  ) {}

  get done(): boolean {
    return this.ended;
  }

  /** The next checkpoint stream's events up to `upTo` ([] once there are no more). */
  async read(): Promise<RecordedEvent[]> {
    if (this.ended) return [];
    const events = await this.store.readStream(checkpointStream(this.next * CHECKPOINTS_PER_STREAM));
    this.next++;
    const kept = events.filter((e) => e.position <= this.upTo);
    if (kept.length < CHECKPOINTS_PER_STREAM) this.ended = true;
    return kept;
  }
}

/** A checkpoint that does not match the log, with where. */
export interface CheckpointIssue {
  checkpoint: number;
  /** Position of the checkpoint's own event (0: unknown). */
  checkpointPosition: number;
  afterPosition: number;
  toPosition: number;
  /** The part of the range that does not match: one block, or the whole range. */
  fromPosition: number;
  throughPosition: number;
  /** The first event found in that part (null: none is left there). */
  firstEvent: { position: number; streamId: string; revision: number; eventId: string | null } | null;
  reason: string;
}

export interface CheckpointReport {
  /** Checkpoints at or below the verified head. */
  checkpoints: number;
  /** Events covered by a checkpoint that matched. */
  coveredEvents: number;
  /** The end of the last checkpoint's range (0: none). */
  coveredTo: number;
  /** Events after the last checkpoint's range (covered by the per-stream chains only). */
  uncoveredEvents: number;
  issues: CheckpointIssue[];
}

interface OpenBlock {
  from: number;
  block: CheckpointBlock;
  hash: Hash;
  events: number;
  first: CheckpointIssue['firstEvent'];
}

/** Where the verifier gets the checkpoints, a stream at a time (`CheckpointReader`). */
export interface CheckpointSource {
  read(): Promise<RecordedEvent[]>;
  readonly done: boolean;
}

/**
 * Recomputes the checkpoints from the log (`svc verify --all`): feed it every event of the log up to
 * the verified head, in position order, calling `load()` first whenever `needs(position)` says the
 * checkpoints read so far end before that event; then `finish()`. Checks that the checkpoints chain
 * (numbers following one another across their streams, ranges following one another from 0,
 * prevHash, hash), and that each range still holds exactly the events, in that order, whose hashes
 * it recorded, block by block. The first checkpoint that does not match ends the check: later ones
 * are not judged.
 */
export class CheckpointVerifier {
  /** Checkpoints read and not yet judged (those judged are dropped): the current one is `index`. */
  private checkpoints: StoredCheckpoint[] = [];
  private readonly issues: CheckpointIssue[] = [];
  private prev: ChainCheckpoint | null = null;
  private count = 0;
  private index = 0;
  private blockIndex = 0;
  private open: OpenBlock | null = null;
  private rangeEvents = 0;
  private covered = 0;
  private uncovered = 0;
  private done = false;

  constructor(private readonly source: CheckpointSource) {}

  /** True when the checkpoints read so far end before `position` and more may follow: `load()` before `add()`. */
  needs(position: number): boolean {
    if (this.done || this.source.done) return false;
    const last = this.checkpoints[this.checkpoints.length - 1];
    return !last || last.data.toPosition < position;
  }

  /** Reads the next checkpoint stream and checks that its checkpoints chain to the ones before. */
  async load(): Promise<void> {
    for (const e of await this.source.read()) {
      if (this.done) return;
      const data = parseCheckpoint(e);
      const number = checkpointNumberOf(e);
      const at = (reason: string, d?: ChainCheckpoint) => {
        this.fault({
          checkpoint: d?.checkpoint ?? number,
          checkpointPosition: e.position,
          afterPosition: d?.afterPosition ?? 0,
          toPosition: d?.toPosition ?? 0,
          fromPosition: d?.afterPosition ?? 0,
          throughPosition: d?.toPosition ?? 0,
          firstEvent: null,
          reason,
        });
      };
      const prev = this.prev;
      const after = prev ? prev.toPosition : 0;
      if (typeof data === 'string') at(data);
      else if (number !== this.count)
        at(`checkpoint ${this.count} is missing: the next one found is checkpoint ${number} (${e.streamId} revision ${e.revision})`, data);
      else if (data.checkpoint !== number) at(`${e.streamId} revision ${e.revision} holds checkpoint ${data.checkpoint}, not checkpoint ${number}`, data);
      else if (data.afterPosition !== after)
        at(
          `its range starts after position ${data.afterPosition}, but the checkpoint before ends at ${after}: part of the log is not covered, or covered twice`,
          data,
        );
      else if (data.toPosition < data.afterPosition || data.toPosition >= e.position)
        at(`its range (${data.afterPosition}, ${data.toPosition}] is not before the checkpoint itself (position ${e.position})`, data);
      else if (data.prevHash !== (prev ? prev.hash : null))
        at(
          `prevHash ${short(data.prevHash)} is not the hash of checkpoint ${data.checkpoint - 1} (${short(prev?.hash ?? null)}): the checkpoints were rewritten`,
          data,
        );
      else if (checkpointHash(data) !== data.hash) at('its hash does not match its own range, count and digest: the checkpoint was changed', data);
      else if (checkpointDigest(data.blocks) !== data.digest || data.blocks.reduce((n, b) => n + b.events, 0) !== data.events)
        at('its digest or event count does not match its blocks: the checkpoint was changed', data);
      else if (!blocksInRange(data)) at('its blocks do not follow one another inside its range: the checkpoint was changed', data);
      if (this.done) return;
      this.checkpoints.push({ number, position: e.position, data: data as ChainCheckpoint });
      this.prev = data as ChainCheckpoint;
      this.count++;
    }
  }

  /** Feeds one event of the log (every event up to the verified head, in position order). */
  add(e: RecordedEvent): void {
    for (;;) {
      if (this.done || this.index >= this.checkpoints.length) {
        this.uncovered++;
        return;
      }
      if (e.position <= this.checkpoints[this.index].data.toPosition) break;
      this.closeRange();
    }
    const c = this.checkpoints[this.index].data;
    while (this.blockIndex < c.blocks.length && e.position > c.blocks[this.blockIndex].toPosition) {
      this.closeBlock();
      if (this.done) return;
    }
    // Inside the range, its last block ends at the range's end (checked when it was read).
    if (!this.open) this.openBlock();
    const b = this.open!;
    b.hash.update(checkpointLeaf(e));
    b.events++;
    this.rangeEvents++;
    if (!b.first) b.first = { position: e.position, streamId: e.streamId, revision: e.revision, eventId: eventIdOf(e) };
  }

  /** After the last event: the checkpoints not reached yet are read and judged too (a log cut short before them). */
  async finish(): Promise<CheckpointReport> {
    for (;;) {
      while (!this.done && this.index < this.checkpoints.length) this.closeRange();
      if (this.done || this.source.done) break;
      await this.load();
    }
    return {
      checkpoints: this.count,
      coveredEvents: this.covered,
      coveredTo: this.prev ? this.prev.toPosition : 0,
      uncoveredEvents: this.uncovered,
      issues: this.issues,
    };
  }

  private openBlock(): void {
    const c = this.checkpoints[this.index].data;
    const from = this.blockIndex === 0 ? c.afterPosition : c.blocks[this.blockIndex - 1].toPosition;
    this.open = { from, block: c.blocks[this.blockIndex], hash: createHash('sha256').update(`${CHECKPOINT_TAG}\nblock\n`), events: 0, first: null };
  }

  /** Ends the current block (possibly one no event reached) and compares it with what was recorded. */
  private closeBlock(): void {
    if (!this.open) this.openBlock();
    const b = this.open!;
    this.open = null;
    this.blockIndex++;
    const digest = b.hash.digest('hex');
    if (b.events === b.block.events && digest === b.block.digest) return;
    const stored = this.checkpoints[this.index];
    const c = stored.data;
    const reason =
      b.events < b.block.events
        ? `${b.block.events - b.events} of the ${b.block.events} events it recorded in positions (${b.from}, ${b.block.toPosition}] are gone: events were removed`
        : b.events > b.block.events
          ? `positions (${b.from}, ${b.block.toPosition}] hold ${b.events} events, ${b.events - b.block.events} more than it recorded: events were inserted or moved`
          : `the events in positions (${b.from}, ${b.block.toPosition}] are not the ones it recorded (an event was replaced, moved, or its hash changed)`;
    this.fault({
      checkpoint: c.checkpoint,
      checkpointPosition: stored.position,
      afterPosition: c.afterPosition,
      toPosition: c.toPosition,
      fromPosition: b.from,
      throughPosition: b.block.toPosition,
      firstEvent: b.first,
      reason,
    });
  }

  private closeRange(): void {
    const c = this.checkpoints[this.index].data;
    while (!this.done && this.blockIndex < c.blocks.length) this.closeBlock();
    if (this.done) return;
    this.covered += this.rangeEvents;
    this.rangeEvents = 0;
    this.index++;
    this.blockIndex = 0;
    // Judged checkpoints are dropped, a stream's worth at a time.
    if (this.index >= CHECKPOINTS_PER_STREAM) {
      this.checkpoints = this.checkpoints.slice(this.index);
      this.index = 0;
    }
  }

  private fault(issue: CheckpointIssue): void {
    if (this.done) return;
    this.issues.push(issue);
    this.done = true;
  }
}

function blocksInRange(c: ChainCheckpoint): boolean {
  let at = c.afterPosition;
  for (const b of c.blocks) {
    if (b.toPosition <= at || b.events < 1) return false;
    at = b.toPosition;
  }
  return c.blocks.length === 0 ? c.toPosition === c.afterPosition && c.events === 0 : at === c.toPosition;
}

function eventIdOf(e: RecordedEvent): string | null {
  const id = (e.metadata as { eventId?: unknown } | undefined)?.eventId;
  return typeof id === 'string' ? id : null;
}

function short(h: string | null): string {
  return h === null ? 'null' : `${h.slice(0, 16)}…`;
}
