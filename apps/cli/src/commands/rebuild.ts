import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { EventStore, RecordedEvent } from '@svc/eventstore';
import type { Projection, ReadStore, RebuiltReadModel } from '@svc/read-store';
import { Context } from '../context';
import { CliError, Output } from '../output';
import { serviceProjections } from '../projections';

export interface RebuildOptions {
  all?: boolean;
  list?: boolean;
  force?: boolean;
  json?: boolean;
  progress?: boolean;
}

/**
 * Events read from the log per page, and pages read ahead of the one being applied. Small pages:
 * a page read ahead lives until it is applied, and pages of 5,000 outlived V8's young generation
 * (promoted, then collected by full collections): 500 takes 15% off the rebuild's CPU (bench/README.md).
 */
const PAGE = 500;
const PAGES_AHEAD = 2;
/** How often a --json run writes a progress record. */
const JSON_PROGRESS_MS = 1000;

/** The projections to look at (names, streams, collections) without the master key: nothing is sealed with this one. */
async function projectionsToList(): Promise<Projection[]> {
  const { Keyring } = await import('@svc/security');
  return serviceProjections(new Keyring(randomBytes(32)));
}

/** The arguments name known projections (checked before any store is opened). */
export async function checkSelection(names: string[], options: RebuildOptions): Promise<void> {
  selectProjections(await projectionsToList(), names, options);
}

/** `svc rebuild --list`: the projections, their streams and collections (no store, no key needed). */
export async function listProjections(out: Output): Promise<number> {
  const projections = await projectionsToList();
  if (out.json) {
    for (const p of projections)
      await out.record({ kind: 'projection', name: p.name, streamPrefixes: p.streamPrefixes ?? [], collections: p.collections ?? [] });
    return 0;
  }
  await out.line(
    out.table(
      ['Projection', 'Streams', 'Collections'],
      projections.map((p) => [p.name, (p.streamPrefixes ?? ['(all)']).join('\n'), (p.collections ?? []).join('\n')]),
    ),
  );
  return 0;
}

/** Which projections the arguments name (unknown names are a usage problem, exit code 2). */
export function selectProjections(all: Projection[], names: string[], options: RebuildOptions): Projection[] {
  if (options.all && names.length) throw new CliError('give projection names or --all, not both');
  if (options.all) return all;
  if (!names.length) throw new CliError('name the projections to rebuild, or --all (svc rebuild --list shows them)');
  const known = new Map(all.map((p) => [p.name, p]));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length)
    throw new CliError(
      `unknown projection${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (svc rebuild --list shows them: ${all.map((p) => p.name).join(', ')})`,
    );
  return [...new Set(names)].map((n) => known.get(n) as Projection);
}

/**
 * The read store the service is configured for (READ_STORE, SVC_DATA_DIR, REDIS_URL,
 * REDIS_KEY_PREFIX), taken for the rebuild alone. SQLite: the file is opened in exclusive mode,
 * which fails while any other process has it open (a running service keeps it open all its life)
 * and keeps everything else out until the rebuild is done. Redis: a running service cannot be
 * seen that way; the rebuild refuses while any other client is connected to the same Redis
 * database, unless --force.
 */
async function openReadStore(ctx: Context, options: RebuildOptions): Promise<{ store: ReadStore; where: string }> {
  const env = (name: string) => (process.env[name] === undefined || process.env[name] === '' ? undefined : process.env[name]);
  const kind = env('READ_STORE') ?? 'sqlite';
  const rs = await import('@svc/read-store');
  if (kind === 'sqlite') {
    const file = join(ctx.dataDir, 'read-models.sqlite');
    const { ensurePrivateFile } = await import('@svc/platform');
    ensurePrivateFile(file);
    try {
      return { store: new rs.SqliteReadStore(file, { exclusive: true, backgroundCheckpoint: false }), where: `SQLite ${file}` };
    } catch (err) {
      if (err instanceof rs.ReadStoreInUseError) {
        throw new CliError(
          `the read store ${file} is open in another process: a running service keeps it open. Stop the service (every process on this data dir), then run svc rebuild again`,
        );
      }
      throw new CliError(`cannot open the read store ${file}: ${(err as Error).message}`);
    }
  }
  if (kind !== 'redis') throw new CliError('READ_STORE must be sqlite or redis');
  const url = env('REDIS_URL') ?? 'redis://127.0.0.1:6379';
  const prefix = env('REDIS_KEY_PREFIX') ?? 'svc';
  const { default: Redis } = await import('ioredis');
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    if (!options.force) {
      let others: number;
      try {
        const me = Number(await redis.client('ID'));
        const db = Number(/\/(\d+)\s*$/.exec(new URL(url).pathname)?.[1] ?? 0);
        const list = String(await redis.call('CLIENT', 'LIST', 'TYPE', 'normal'));
        others = list
          .split('\n')
          .filter((l) => l.trim())
          .filter((l) => Number(/\bid=(\d+)/.exec(l)?.[1]) !== me && Number(/\bdb=(\d+)/.exec(l)?.[1] ?? 0) === db).length;
      } catch {
        throw new CliError('cannot tell whether a service uses the Redis read store (CLIENT LIST refused): stop the service, then run svc rebuild --force');
      }
      if (others > 0) {
        throw new CliError(
          `${others} other client(s) are connected to the Redis read store's database: a running service may be using it. Stop the service, then run svc rebuild again (--force if those clients are not the service)`,
        );
      }
    }
  } catch (err) {
    redis.disconnect();
    if (err instanceof CliError) throw err;
    throw new CliError(`cannot reach the Redis read store at REDIS_URL: ${(err as Error).message}`);
  }
  // The store takes the connection over (and closes it).
  const store = new rs.RedisReadStore(redis, prefix);
  const close = store.close.bind(store);
  store.close = async () => {
    await close();
    await redis.quit().catch(() => undefined);
  };
  return { store, where: `Redis prefix ${prefix}` };
}

/** The master key (the projections read payloads in clear and seal what they store). */
async function serviceMasterKey(ctx: Context): Promise<Buffer> {
  const { readMasterKey } = await import('@svc/platform');
  const { Keyring } = await import('@svc/security');
  const key = readMasterKey({ dataDir: ctx.dataDir }, process.env);
  if (!key)
    throw new CliError(
      `rebuild needs the master key (projections read payloads and seal what they store): set SVC_MASTER_KEY (base64), or run where ${ctx.dataDir}/master.key is readable`,
    );
  try {
    new Keyring(key);
  } catch (err) {
    throw new CliError(`the master key cannot be used: ${(err as Error).message}`);
  }
  return key;
}

export interface RebuildResult {
  head: number;
  events: number;
  seconds: number;
  /** Of which: reading and applying the log, and putting the models in place. */
  replaySeconds: number;
  replaceSeconds: number;
  /** CPU time of the process (every thread), and of the main thread alone (null where the OS does not tell). */
  cpuSeconds: number;
  mainThreadCpuSeconds: number | null;
  projections: { name: string; events: number; documents: number; collections: readonly string[] }[];
}

/** What the replay reads the log through. */
export interface RebuildSource {
  /** The log as stored (the raw adapter: sealed payloads, chain fields). */
  events: EventStore;
  /** A page's payloads opened, as the service's read path opens them (PayloadCrypto.open). */
  open(page: RecordedEvent[]): Promise<RecordedEvent[]>;
  /** The projections' key ring when it defers sealing (DeferredSealingKeyring), else null. */
  sealing: { flush(): void; settle(): Promise<void>; models(models: RebuiltReadModel[]): RebuiltReadModel[] } | null;
}

/**
 * Replays the log (position 1 to `head`) through `projections` in memory and puts the read
 * models in place in one step. Pages are read ahead (up to PAGES_AHEAD being opened while one is
 * applied); `onProgress(position, events)` after each page.
 */
export async function rebuildReadModels(
  source: RebuildSource,
  readStore: ReadStore,
  projections: Projection[],
  head: number,
  onProgress: (position: number, events: number) => void = () => undefined,
): Promise<RebuildResult> {
  const { ProjectionReplay } = await import('@svc/read-store');
  if (!readStore.replaceReadModels) throw new CliError('this read store cannot replace read models');
  const replay = new ProjectionReplay(projections);
  const started = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  const mainCpu = mainThreadCpuSeconds();
  let from = 0;
  let count = 0;
  /** Pages read and being opened, in log order. */
  const ahead: Promise<RecordedEvent[]>[] = [];
  let more = true;
  const readAhead = async () => {
    while (more && ahead.length < PAGES_AHEAD) {
      const raw = await source.events.readAll(from, PAGE);
      const page = raw.filter((e) => e.position <= head);
      if (page.length < raw.length || raw.length < PAGE) more = false;
      if (!page.length) break;
      from = page[page.length - 1].position;
      if (from >= head) more = false;
      const opened = source.open(page);
      opened.catch(() => undefined); // awaited in order below; a failure is thrown there
      ahead.push(opened);
    }
  };
  /** The reads of the log, one after the other; they go on while a page is applied (a failure is thrown below). */
  let reading: Promise<void> = readAhead();
  reading.catch(() => undefined);
  try {
    for (;;) {
      if (!ahead.length) {
        await reading;
        if (!ahead.length) break;
      }
      const page = await (ahead.shift() as Promise<RecordedEvent[]>);
      // Read on while this page is applied: a remote store's round trips overlap the replay.
      reading = reading.then(readAhead);
      reading.catch(() => undefined);
      for (const e of page) {
        await replay.apply(e);
        count++;
      }
      source.sealing?.flush();
      onProgress(page[page.length - 1].position, count);
    }
    await source.sealing?.settle();
  } finally {
    more = false;
    await reading.catch(() => undefined);
    await Promise.allSettled(ahead);
  }
  const replayed = process.hrtime.bigint();
  const models: RebuiltReadModel[] = replay.readModels(head);
  await readStore.replaceReadModels(source.sealing ? source.sealing.models(models) : models);
  const done = process.hrtime.bigint();
  const seconds = Number(done - started) / 1e9;
  const used = process.cpuUsage(cpu);
  const mainUsed = mainCpu === null ? null : (mainThreadCpuSeconds() ?? mainCpu) - mainCpu;
  return {
    head,
    events: count,
    seconds,
    replaySeconds: Number(replayed - started) / 1e9,
    replaceSeconds: Number(done - replayed) / 1e9,
    cpuSeconds: (used.user + used.system) / 1e6,
    mainThreadCpuSeconds: mainUsed,
    projections: replay.summary(),
  };
}

/**
 * CPU seconds of the calling thread so far (Linux: /proc/thread-self/stat, in clock ticks of 1/100 s),
 * or null elsewhere: on a shared machine, what bounds the rebuild when its threads each have a core.
 */
function mainThreadCpuSeconds(): number | null {
  try {
    const fields = readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

export async function rebuildCommand(ctx: Context, names: string[], options: RebuildOptions): Promise<number> {
  const { out } = ctx;
  const masterKey = await serviceMasterKey(ctx);
  const { PayloadCrypto } = await import('@svc/eventstore');
  const { Keyring } = await import('@svc/security');
  const { DeferredSealingKeyring } = await import('./rebuild-sealing');
  const keyring = new Keyring(masterKey);
  // AES-GCM (opening payloads, sealing stored fields) on threads beside the replay: one per core but one.
  const crypto = new PayloadCrypto((keyId) => keyring.encryptionKey(keyId), { threads: cryptoThreads() });
  const sealing = new DeferredSealingKeyring(masterKey, crypto);
  const selected = selectProjections(await serviceProjections(sealing), names, options);
  // Read as the service reads (EncryptingEventStore over the hash chain): payloads opened with the
  // key ring, the chain fields passed over (the rebuild trusts the log; `svc verify` checks it).
  const source: RebuildSource = { events: ctx.store, open: (page) => crypto.open(page), sealing };
  let store: ReadStore;
  let where: string;
  try {
    ({ store, where } = await openReadStore(ctx, options));
  } catch (err) {
    await crypto.close();
    throw err;
  }
  try {
    const head = await ctx.store.headPosition();
    out.note(`rebuilding ${selected.map((p) => p.name).join(', ')} from ${ctx.where} (log head ${head}) into ${where}`);
    const bar = out.json ? null : out.progress('rebuild', 0, head);
    let lastRecord = 0;
    const started = Date.now();
    const onProgress = (position: number, events: number) => {
      bar?.update(position, events);
      if (out.json && (Date.now() - lastRecord >= JSON_PROGRESS_MS || position >= head)) {
        lastRecord = Date.now();
        const seconds = Math.max(0.001, (lastRecord - started) / 1000);
        const rate = events / seconds;
        const left = head - position;
        // ETA from the positions still to read at the rate positions were read so far.
        const eta = position > 0 ? Math.round((left * seconds) / position) : null;
        void out.record({ kind: 'progress', position, head, events, eventsPerSecond: Math.round(rate), etaSeconds: eta });
      }
    };
    let result: RebuildResult;
    try {
      result = await rebuildReadModels(source, store, selected, head, onProgress);
    } catch (err) {
      bar?.stop();
      const { ProjectionReplayError } = await import('@svc/read-store');
      if (err instanceof ProjectionReplayError) throw new CliError(`${err.message}; nothing was replaced`);
      throw err;
    }
    bar?.stop();
    const rate = Math.round(result.events / Math.max(result.seconds, 0.001));
    if (out.json) {
      for (const p of result.projections)
        await out.record({ kind: 'rebuilt', projection: p.name, position: head, events: p.events, documents: p.documents, collections: p.collections });
      await out.record({
        kind: 'summary',
        projections: result.projections.length,
        position: head,
        events: result.events,
        seconds: Number(result.seconds.toFixed(3)),
        replaySeconds: Number(result.replaySeconds.toFixed(3)),
        replaceSeconds: Number(result.replaceSeconds.toFixed(3)),
        eventsPerSecond: rate,
        cpuSeconds: Number(result.cpuSeconds.toFixed(3)),
        mainThreadCpuSeconds: result.mainThreadCpuSeconds === null ? null : Number(result.mainThreadCpuSeconds.toFixed(2)),
      });
      return 0;
    }
    await out.line(
      out.table(
        ['Projection', 'Events applied', 'Documents', 'Checkpoint'],
        result.projections.map((p) => [p.name, p.events.toLocaleString('en-US'), p.documents.toLocaleString('en-US'), String(head)]),
      ),
    );
    await out.line(
      `${out.c.green('rebuilt')} ${result.projections.length} read models from ${result.events.toLocaleString('en-US')} events in ${result.seconds.toFixed(2)} s (${rate.toLocaleString('en-US')} events/s)`,
    );
    return 0;
  } finally {
    await crypto.close();
    await store.close().catch(() => undefined);
  }
}

/** Threads for AES-GCM beside the replay: SVC_REBUILD_CRYPTO_THREADS, else one per core but one (at least one). */
function cryptoThreads(): number {
  const set = process.env.SVC_REBUILD_CRYPTO_THREADS;
  if (set !== undefined && set !== '') {
    const n = Number(set);
    if (!Number.isInteger(n) || n < 0 || n > 64) throw new CliError('SVC_REBUILD_CRYPTO_THREADS must be a whole number from 0 to 64');
    return n;
  }
  return Math.max(1, availableParallelism() - 1);
}
