/**
 * Event store append throughput: SqliteEventStore (group commit) at 1, 16 and 64 concurrent
 * writers, beside the baseline measured in the same run on the same disk: raw better-sqlite3
 * single-row INSERTs, each its own transaction, with WAL + synchronous=FULL.
 *
 *   npm run build && node dist/bench/eventstore-append.js [--seconds 5] [--writers 1,16,64] [--dir /path] [--writer-thread on|off|both] [--chain off|on|both]
 *
 * --writer-thread: the store's group commit on its writer thread (on, the default, as the service
 * runs it), on the calling thread (off), or each in turn (both), every store run beside its own raw run.
 * --chain: the store alone (off, the default), under the per-stream hash chain as the service runs it
 * (on: `HashChainingEventStore`, docs/audit.md), or each in turn (both).
 *
 * Each writer appends one event at a time to its own stream with the exact expected revision,
 * waiting for each append to be durable before the next. A benchmark, not a test: never in CI.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventStore, HashChainingEventStore, SqliteEventStore } from '@svc/eventstore';
import { Row, metadata, payload } from './append-support';

interface Args {
  seconds: number;
  writers: number[];
  dir?: string;
  /** Which writers of the store to measure: on its writer thread, on this thread, or both. */
  writerThread: boolean[];
  /** Which stores to measure: alone, under the hash chain, or both. */
  chain: boolean[];
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 5, writers: [1, 16, 64], writerThread: [true], chain: [false] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--seconds') args.seconds = Number(next());
    else if (a === '--writers') args.writers = next().split(',').map(Number);
    else if (a === '--dir') args.dir = next();
    else if (a === '--writer-thread') {
      const v = next();
      if (!['on', 'off', 'both'].includes(v)) throw new Error('--writer-thread on, off or both');
      args.writerThread = v === 'both' ? [true, false] : [v === 'on'];
    } else if (a === '--chain') {
      const v = next();
      if (!['on', 'off', 'both'].includes(v)) throw new Error('--chain on, off or both');
      args.chain = v === 'both' ? [false, true] : [v === 'on'];
    } else if (a === '--help' || a === '-h') {
      console.log(
        'usage: node dist/bench/eventstore-append.js [--seconds N] [--writers 1,16,64] [--dir PATH] [--writer-thread on|off|both] [--chain off|on|both]',
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!(args.seconds > 0) || args.writers.some((w) => !(w >= 1))) throw new Error('bad --seconds or --writers');
  return args;
}

/** Baseline: every INSERT is its own autocommit transaction (one WAL fsync each). */
function rawSingleRowInserts(file: string, seconds: number): Row {
  const db = new Database(file);
  // Same page size as the store's files (its default), so both sides write the same page format.
  db.pragma('page_size = 2048');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE events (
    position INTEGER PRIMARY KEY, event_id TEXT NOT NULL, stream_id TEXT NOT NULL,
    revision INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL,
    UNIQUE (stream_id, revision))`);
  const insert = db.prepare('INSERT INTO events (event_id, stream_id, revision, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)');
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let n = 0;
  while (process.hrtime.bigint() < deadline) {
    const m = metadata();
    insert.run(m.eventId, 'raw-1', n, 'BenchEvent', JSON.stringify(payload(n)), JSON.stringify(m));
    n++;
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  db.close();
  return { label: 'raw better-sqlite3, 1 INSERT per commit', writers: 1, appends: n, seconds: elapsed, perSecond: n / elapsed };
}

async function storeWriters(file: string, writers: number, seconds: number, writerThread: boolean, chain: boolean): Promise<Row> {
  const sqlite = new SqliteEventStore(file, { writerThread });
  const store: EventStore = chain ? new HashChainingEventStore(sqlite) : sqlite;
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let total = 0;
  const writer = async (w: number) => {
    const stream = `bench-${w}`;
    for (let revision = -1; process.hrtime.bigint() < deadline; revision++) {
      await store.append(stream, [{ type: 'BenchEvent', data: payload(revision + 1), metadata: metadata() }], revision < 0 ? 'no_stream' : revision);
      total++;
    }
  };
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  const used = process.cpuUsage(cpu);
  const { commits, appends } = sqlite.stats;
  await store.close();
  return {
    label: `SqliteEventStore (group commit, ${writerThread ? 'writer thread' : 'calling thread'}${chain ? ', hash chain' : ''})`,
    writers,
    appends: total,
    seconds: elapsed,
    perSecond: total / elapsed,
    avgBatch: commits ? appends / commits : 0,
    cpuUsPerAppend: total ? (used.user + used.system) / total : 0,
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const base = mkdtempSync(join(args.dir ?? tmpdir(), 'bench-eventstore-'));
  try {
    console.log(`eventstore append bench: ${args.seconds}s per run, data dir ${base}, node ${process.version}`);
    // The baseline is measured right before each store run (same disk, same minute): a shared
    // virtual disk's fsync rate drifts, and an adjacent baseline keeps each ratio honest.
    const rows: Row[] = [];
    const pairs: { raw: Row; store: Row }[] = [];
    for (const [i, w] of args.writers.entries()) {
      for (const thread of args.writerThread) {
        for (const chain of args.chain) {
          const raw = rawSingleRowInserts(join(base, `raw-${i}-${thread}-${chain}.db`), args.seconds);
          const store = await storeWriters(join(base, `store-${i}-${w}-${thread}-${chain}.db`), w, args.seconds, thread, chain);
          rows.push(raw, store);
          pairs.push({ raw, store });
        }
      }
    }

    const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
    const header = ['run', 'writers', 'appends', 'seconds', 'appends/s', 'avg batch', 'x raw', 'CPU µs/append'];
    const table = rows.map((r, i) => [
      r.label,
      String(r.writers),
      fmt(r.appends),
      fmt(r.seconds, 2),
      fmt(r.perSecond),
      r.avgBatch === undefined ? '-' : fmt(r.avgBatch, 1),
      r.avgBatch === undefined ? '1.0' : fmt(r.perSecond / rows[i - 1].perSecond, 1),
      r.cpuUsPerAppend === undefined ? '-' : fmt(r.cpuUsPerAppend, 1),
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t[i].length)));
    const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
    console.log(line(header));
    console.log(widths.map((w) => '-'.repeat(w)).join('  '));
    for (const t of table) console.log(line(t));

    const rawMean = pairs.reduce((a, p) => a + p.raw.perSecond, 0) / pairs.length;
    console.log(`raw baseline: mean ${fmt(rawMean)} commits/s over ${pairs.length} runs`);
    for (const at64 of pairs.filter((p) => p.store.writers === 64)) {
      const ratio = at64.store.perSecond / at64.raw.perSecond;
      console.log(
        `ratio at 64 writers (${at64.store.label}): ${fmt(ratio, 1)}x the adjacent raw run, ${fmt(at64.store.perSecond / rawMean, 1)}x the mean raw` +
          ` (target >= 10x): ${ratio >= 10 ? 'MET' : 'NOT MET'}`,
      );
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
