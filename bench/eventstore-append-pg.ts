/**
 * PostgreSQL event store append throughput: PostgresEventStore (group commit, xid watermark
 * allocation) at 1 and 64 concurrent writers, beside the baseline measured in the same run against
 * the same server: raw single-row INSERTs, each its own autocommit transaction, on a table of the
 * same shape, from as many connections as there are writers.
 *
 *   npm run build && node dist/bench/eventstore-append-pg.js [--seconds 5] [--writers 1,64] [--stores 1,4] [--url postgres://…]
 *
 * --stores: how many store instances share the writers (each its own pool and group commit, as
 * separate processes of distributed mode would be); 4 shows what the allocation lock costs when
 * several stores' transactions run at once.
 *
 * Each writer appends one event at a time to its own stream with the exact expected revision,
 * waiting for each append to be committed before the next. Every run writes into a schema of its
 * own, dropped at the end. A benchmark, not a test: never in CI.
 */
import { randomUUID } from 'node:crypto';
import { Client, Pool } from 'pg';
import { DEFAULT_DATABASE_URL, PostgresEventStore } from '@svc/eventstore';
import { Row, metadata, payload } from './append-support';

interface Args {
  seconds: number;
  writers: number[];
  stores: number[];
  url: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 5, writers: [1, 64], stores: [1], url: process.env.DATABASE_URL || DEFAULT_DATABASE_URL };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--seconds') args.seconds = Number(next());
    else if (a === '--writers') args.writers = next().split(',').map(Number);
    else if (a === '--stores') args.stores = next().split(',').map(Number);
    else if (a === '--url') args.url = next();
    else if (a === '--help' || a === '-h') {
      console.log('usage: node dist/bench/eventstore-append-pg.js [--seconds N] [--writers 1,64] [--stores 1,4] [--url postgres://…]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!(args.seconds > 0) || args.writers.some((w) => !(w >= 1)) || args.stores.some((s) => !(s >= 1))) throw new Error('bad --seconds, --writers or --stores');
  return args;
}

async function sql(url: string, text: string): Promise<void> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

/**
 * Baseline: every INSERT is its own autocommit transaction (one commit, one WAL flush each, which
 * PostgreSQL itself groups across connections), one connection per writer.
 */
async function rawSingleRowInserts(url: string, schema: string, writers: number, seconds: number): Promise<Row> {
  await sql(
    url,
    `CREATE SCHEMA "${schema}";
     CREATE TABLE "${schema}".raw_events (
       position bigserial PRIMARY KEY, tx xid8 NOT NULL DEFAULT pg_current_xact_id(), stream_id text NOT NULL,
       revision integer NOT NULL, event_id text NOT NULL, type text NOT NULL, data text NOT NULL, metadata text NOT NULL,
       UNIQUE (stream_id, revision))`,
  );
  const pool = new Pool({ connectionString: url, max: writers });
  const clients = await Promise.all(Array.from({ length: writers }, () => pool.connect()));
  const text = `INSERT INTO "${schema}".raw_events (stream_id, revision, event_id, type, data, metadata) VALUES ($1, $2, $3, $4, $5, $6)`;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let n = 0;
  await Promise.all(
    clients.map(async (c, w) => {
      for (let revision = 0; process.hrtime.bigint() < deadline; revision++) {
        const m = metadata();
        await c.query({
          name: 'raw-insert',
          text,
          values: [`raw-${w}`, revision, m.eventId, 'BenchEvent', JSON.stringify(payload(revision)), JSON.stringify(m)],
        });
        n++;
      }
    }),
  );
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  for (const c of clients) c.release();
  await pool.end();
  return { label: 'raw pg, 1 INSERT per commit', writers, appends: n, seconds: elapsed, perSecond: n / elapsed };
}

async function storeWriters(url: string, schema: string, writers: number, storeCount: number, seconds: number): Promise<Row> {
  const stores = await Promise.all(
    Array.from({ length: storeCount }, () => PostgresEventStore.open({ connectionString: url, schema, listen: false, poolSize: 2 })),
  );
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(Math.round(seconds * 1e9));
  let total = 0;
  const writer = async (w: number) => {
    const store = stores[w % stores.length];
    const stream = `bench-${w}`;
    for (let revision = -1; process.hrtime.bigint() < deadline; revision++) {
      await store.append(stream, [{ type: 'BenchEvent', data: payload(revision + 1), metadata: metadata() }], revision < 0 ? 'no_stream' : revision);
      total++;
    }
  };
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  const commits = stores.reduce((n, s) => n + s.stats.commits, 0);
  const appends = stores.reduce((n, s) => n + s.stats.appends, 0);
  await Promise.all(stores.map((s) => s.close()));
  return {
    label: `PostgresEventStore (group commit${storeCount > 1 ? `, ${storeCount} stores` : ''})`,
    writers,
    appends: total,
    seconds: elapsed,
    perSecond: total / elapsed,
    avgBatch: commits ? appends / commits : 0,
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const base = `bench_pg_${randomUUID().replace(/-/g, '').slice(0, 8)}`;
  const schemas: string[] = [];
  const fresh = () => {
    const s = `${base}_${schemas.length}`;
    schemas.push(s);
    return s;
  };
  try {
    console.log(`eventstore append bench (PostgreSQL): ${args.seconds}s per run, ${args.url.replace(/\/\/[^@/]*@/, '//…@')}, node ${process.version}`);
    // The raw baseline at the same number of writers is measured right before each store run
    // (same server, same minute), and each store row is compared with it.
    const rows: Row[] = [];
    for (const w of args.writers) {
      for (const s of args.stores) {
        if (s > w) continue;
        rows.push(await rawSingleRowInserts(args.url, fresh(), w, args.seconds));
        rows.push(await storeWriters(args.url, fresh(), w, s, args.seconds));
      }
    }

    const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
    const header = ['run', 'writers', 'appends', 'seconds', 'appends/s', 'avg batch', 'x raw'];
    const table = rows.map((r, i) => [
      r.label,
      String(r.writers),
      fmt(r.appends),
      fmt(r.seconds, 2),
      fmt(r.perSecond),
      r.avgBatch === undefined ? '-' : fmt(r.avgBatch, 1),
      r.avgBatch === undefined ? '1.0' : fmt(r.perSecond / rows[i - 1].perSecond, 1),
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t[i].length)));
    const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
    console.log(line(header));
    console.log(widths.map((w) => '-'.repeat(w)).join('  '));
    for (const t of table) console.log(line(t));
    const rawOne = rows.find((r) => r.avgBatch === undefined && r.writers === 1);
    if (rawOne) {
      for (const r of rows.filter((x) => x.avgBatch !== undefined && x.writers > 1)) {
        console.log(
          `${r.label}, ${r.writers} writers: ${fmt(r.perSecond / rawOne.perSecond, 1)}x raw single-row commits on one connection (${fmt(rawOne.perSecond)}/s)`,
        );
      }
    }
  } finally {
    for (const s of schemas) await sql(args.url, `DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
