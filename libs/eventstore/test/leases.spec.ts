import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import {
  DEFAULT_DATABASE_URL,
  InProcessLeaseBackend,
  Leases,
  PostgresCoordination,
  PostgresEventStore,
  SqliteEventStore,
  SqlitePositions,
} from '@svc/eventstore';

/**
 * Leases and fenced relay positions (docs/scaling.md) against the real PostgreSQL server, in a
 * schema of this run's own (dropped at the end). Two `Leases` on two pools stand for two replicas.
 */
const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
const schema = `svc_leases_t${randomUUID().replace(/-/g, '').slice(0, 10)}`;
const TTL = 1000;
const RENEW = 200;
const opened: { close(): Promise<void> }[] = [];

async function admin<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  // The event store creates and migrates the schema (the leases and relay_positions tables with it).
  const store = await PostgresEventStore.open({ connectionString: url, schema, listen: false, poolSize: 1 });
  await store.close();
});

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close().catch(() => undefined);
});

afterAll(async () => {
  await admin((c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
});

function coordination(): PostgresCoordination {
  const c = new PostgresCoordination({ connectionString: url, schema });
  return c;
}

function replica(name = 'a'): { leases: Leases; pg: PostgresCoordination; runs: { token: number; stopped: boolean }[] } {
  const pg = coordination();
  const leases = new Leases(pg, { ttlMs: TTL, renewMs: RENEW, holder: `${name}-${randomUUID()}` });
  opened.push(leases);
  return { leases, pg, runs: [] };
}

function runJob(r: ReturnType<typeof replica>, name: string): void {
  r.leases.run(name, {
    start: (token) => void r.runs.push({ token, stopped: false }),
    stop: () => {
      const last = r.runs[r.runs.length - 1];
      if (last) last.stopped = true;
    },
  });
}

const running = (r: ReturnType<typeof replica>) => r.runs.length > 0 && !r.runs[r.runs.length - 1].stopped;

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - t0;
}

describe('Leases on PostgreSQL', () => {
  it('one of two replicas runs the job; the other takes it over within the ttl when the holder stops renewing, with a higher token', async () => {
    const job = `job-${randomUUID()}`;
    const a = replica('a');
    const b = replica('b');
    runJob(a, job);
    runJob(b, job);
    await until(() => running(a) || running(b), 3000, 'a holder');
    // Several renewal rounds: never both, and the holder keeps it.
    const holder = running(a) ? a : b;
    const other = holder === a ? b : a;
    for (let i = 0; i < 10; i++) {
      await new Promise((r) => setTimeout(r, RENEW / 2));
      expect(running(a) && running(b)).toBe(false);
      expect(running(holder)).toBe(true);
    }
    expect(other.runs).toEqual([]);
    // kill -9: no release, no renewal, the holder does not even notice.
    holder.leases.pauseForTest({ watchdogs: false });
    const took = await until(() => running(other), TTL + 2 * RENEW + 3000, 'the takeover');
    expect(took).toBeLessThanOrEqual(TTL + 2 * RENEW + 1000);
    expect(other.runs[0].token).toBeGreaterThan(holder.runs[0].token);
  });

  it('a holder that cannot renew stops its job by itself before the ttl ends', async () => {
    const job = `job-${randomUUID()}`;
    const a = replica('a');
    runJob(a, job);
    await until(() => running(a), 3000, 'the holder');
    a.leases.pauseForTest(); // renewals stop, the watchdog stays
    const stoppedAfter = await until(() => !running(a), TTL + 500, 'the holder to stop');
    expect(stoppedAfter).toBeLessThan(TTL);
  });

  it('a released lease is taken at once by another replica, with a higher token; tokens never go back', async () => {
    const job = `job-${randomUUID()}`;
    const a = replica('a');
    runJob(a, job);
    await until(() => running(a), 3000, 'a');
    const b = replica('b');
    runJob(b, job);
    await new Promise((r) => setTimeout(r, 3 * RENEW));
    expect(running(b)).toBe(false);
    await a.leases.close();
    expect(running(a)).toBe(false);
    const took = await until(() => running(b), 2 * RENEW + 500, 'the takeover after a release');
    expect(took).toBeLessThan(TTL);
    expect(b.runs[0].token).toBe(a.runs[0].token + 1);
  });

  it('a stale holder writing a relay position with its old token is refused', async () => {
    const name = `relay-${randomUUID()}`;
    const pg = coordination();
    opened.push(pg);
    expect(await pg.get(name)).toBeNull();
    expect(await pg.save(name, 10, 1)).toBe(true);
    expect(await pg.save(name, 20, 2)).toBe(true); // the next holder
    expect(await pg.save(name, 30, 1)).toBe(false); // the old one, still writing
    expect(await pg.get(name)).toBe(20);
    expect(await pg.save(name, 25, 2)).toBe(true);
    expect(await pg.get(name)).toBe(25);
  });
});

describe('Relay positions in the SQLite event store file', () => {
  it('are kept beside the events and fenced the same way', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'positions-'));
    try {
      const store = new SqliteEventStore(join(dir, 'events.sqlite'));
      const p = new SqlitePositions(join(dir, 'events.sqlite'));
      expect(await p.get('r')).toBeNull();
      expect(await p.save('r', 5, 0)).toBe(true);
      expect(await p.save('r', 7, 3)).toBe(true);
      expect(await p.save('r', 9, 2)).toBe(false);
      expect(await p.get('r')).toBe(7);
      await p.close();
      const again = new SqlitePositions(join(dir, 'events.sqlite'));
      expect(await again.get('r')).toBe(7);
      await again.close();
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Leases in one process', () => {
  it('one holder at a time; another takes the lease once it is released', async () => {
    const backend = new InProcessLeaseBackend();
    const a = { leases: new Leases(backend, { ttlMs: TTL, renewMs: RENEW }), runs: [] as { token: number; stopped: boolean }[] } as never as ReturnType<
      typeof replica
    >;
    const b = { leases: new Leases(backend, { ttlMs: TTL, renewMs: RENEW }), runs: [] as { token: number; stopped: boolean }[] } as never as ReturnType<
      typeof replica
    >;
    opened.push(b.leases);
    runJob(a, 'j');
    await until(() => running(a), 1000, 'a');
    runJob(b, 'j');
    await new Promise((r) => setTimeout(r, 3 * RENEW));
    expect(running(b)).toBe(false);
    expect(a.runs[0].token).toBe(0); // unfenced
    await a.leases.close();
    await until(() => running(b), 2 * RENEW + 500, 'b');
  });
});
