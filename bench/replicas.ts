/**
 * Scaling out on one machine: durable case updates per second through the gateway with
 * case-ledger at 1 and at 2 replicas, and webhook deliveries per second with webhook-dispatcher
 * at 1 and at 2 replicas, in one run (scripts/start-distributed.js with SVC_REPLICAS; Kafka,
 * PostgreSQL, Redis).
 *
 *   npm run bench:replicas -- [--seconds 10] [--connections 32] [--cases 300] [--deliveries 400]
 *
 * Two topologies, one after the other: every app once, then case-ledger=2,webhook-dispatcher=2.
 * In each:
 *   - updates: a tenant with `--cases` open cases, then autocannon POSTs updates at full speed
 *     (each case in sequence; an update answers once durable and in the progress read model);
 *   - deliveries: `--deliveries` cases opened through the gateway towards a webhook endpoint on a
 *     receiver in this process that answers 503 at first, so every delivery is waiting for its
 *     third attempt (5 min after the second); then the receiver answers 200, the dev clock moves
 *     7 minutes, and deliveries/s = deliveries / (clock moved -> last one received). That is the
 *     dispatchers' own rate (timers, signing, HTTP), not the rate at which cases open.
 * Rate limits off, log level warn. The core count and load average are printed: the machine is
 * shared, so read the figures as one run's. A benchmark, not a test: never in CI.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { AddressInfo, createServer as netServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon');

const ROOT = resolve(__dirname, '..', '..');

interface Args {
  seconds: number;
  connections: number;
  cases: number;
  deliveries: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 10, connections: 32, cases: 300, deliveries: 400 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => Number(argv[++i]);
    if (a === '--seconds') args.seconds = v();
    else if (a === '--connections') args.connections = v();
    else if (a === '--cases') args.cases = v();
    else if (a === '--deliveries') args.deliveries = v();
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = netServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => res(port));
    });
  });
}

interface Topology {
  replicas: string;
  base: string;
  stop(): Promise<void>;
}

/** start-distributed with SVC_REPLICAS; resolves with the gateway's base URL once every process is ready. */
async function startTopology(replicas: string): Promise<Topology> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-replicas-'));
  const db = `svc_bench_${randomBytes(4).toString('hex')}`;
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const env = {
    ...process.env,
    NODE_ENV: 'test',
    SVC_DEV_TOOLS: '1',
    SVC_RATE_LIMITS: 'off',
    SVC_LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    SVC_DATA_DIR: dir,
    SVC_DB_NAME: db,
    REDIS_KEY_PREFIX: prefix,
    SVC_REPLICAS: replicas,
  };
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, 'scripts', 'start-distributed.js'), '--no-build'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const base = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`topology not ready:\n${out.slice(-3000)}`)), 300_000);
    const on = (d: Buffer) => {
      out = (out + d.toString()).slice(-20_000);
      const m = out.match(/\(distributed\) listening at (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        res(m[1]);
      }
    };
    child.stdout!.on('data', on);
    child.stderr!.on('data', on);
    child.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`start-distributed exited ${code}:\n${out.slice(-3000)}`));
    });
  });
  return {
    replicas,
    base,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
      const { Client } = await import('pg');
      const admin = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
      admin.pathname = '/postgres';
      const pg = new Client({ connectionString: admin.toString() });
      await pg.connect();
      await pg.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`).finally(() => pg.end());
      const { default: Redis } = await import('ioredis');
      const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) await redis.del(...keys);
      } while (cursor !== '0');
      redis.disconnect();
    },
  };
}

async function json(method: string, url: string, body?: unknown, token?: string): Promise<any> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  for (let attempt = 1; ; attempt++) {
    const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    // A 503 (Retry-After) while a consumer group settles: the same request again.
    if (r.status === 503 && attempt < 20) {
      await sleep(500);
      continue;
    }
    if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
}

interface Tenant {
  staff: string;
  key: string;
  E: string;
  patients: string[];
}

async function tenant(base: string, name: string): Promise<Tenant> {
  const staff = (await json('POST', `${base}/dev/staff-tokens`, { sub: `bench-${name}`, email: `bench-${name}@example.test` })).idToken as string;
  const org = await json('POST', `${base}/organizations`, { name: `Bench ${name}` }, staff);
  const envId = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
  const E = `${base}/organizations/${org.id}/environments/${envId}`;
  const key = (await json('POST', `${E}/api-keys`, { name: 'bench' }, staff)).key as string;
  await json('POST', `${base}/organizations/${org.id}/baa`, { signerName: 'B', signerTitle: 'C' }, staff);
  const protocol = await json(
    'POST',
    `${E}/protocols`,
    {
      programKey: `bench-${name}`,
      name: 'Bench',
      defaultCadenceDays: 30,
      questions: [{ key: 'pain', text: 'Pain?', type: 'scale', min: 0, max: 10 }],
      redFlags: { emergencyTerms: true },
    },
    staff,
  );
  await json('POST', `${E}/protocols/${protocol.id}/activate`, undefined, staff);
  const patients: string[] = [];
  for (let i = 0; i < 20; i++) {
    patients.push(
      (
        await json(
          'POST',
          `${base}/client/patient-events`,
          {
            eventId: randomUUID(),
            type: 'patient.created',
            externalPatientId: `BENCH-${name}-${i}`,
            email: `bench-${name}-${i}@example.test`,
            programKey: `bench-${name}`,
          },
          key,
        )
      ).patientId as string,
    );
  }
  return { staff, key, E, patients };
}

/** Opens `n` cases, `concurrency` at a time; answers their ids. */
async function openCases(t: Tenant, n: number, concurrency: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        ids.push(
          (await json('POST', `${t.E}/clinical-cases`, { patientId: t.patients[i % t.patients.length], request: 'bench request' }, t.staff)).caseId as string,
        );
      }
    }),
  );
  return ids;
}

function cannon(opts: Record<string, unknown>): Promise<any> {
  return new Promise((res, rej) => autocannon(opts, (err: Error | null, r: unknown) => (err ? rej(err) : res(r))));
}

interface UpdatesRow {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function updates(base: string, args: Args): Promise<UpdatesRow> {
  const t = await tenant(base, 'updates');
  const cases = await openCases(t, args.cases, 16);
  const url = new URL(base);
  const headers = { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' };
  const next: Record<string, number> = Object.fromEntries(cases.map((c) => [c, 1]));
  let u = 0;
  const update = () => {
    const caseId = cases[u++ % cases.length];
    const seq = next[caseId]++;
    const body = { updateId: randomUUID(), sequence: seq, status: seq === 1 ? 'processed' : 'clinician_responded', externalReference: `bench-${seq}` };
    return { path: `${url.pathname}/v1/clinical-cases/${caseId}/updates`, body: JSON.stringify(body) };
  };
  const requests = [{ method: 'POST', setupRequest: (req: Record<string, unknown>) => ({ ...req, ...update() }) }];
  await cannon({ url: url.origin, connections: args.connections, duration: 2, headers, requests });
  const r = await cannon({ url: url.origin, connections: args.connections, duration: args.seconds, headers, requests });
  return { rps: r['2xx'] / args.seconds, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors + r.timeouts };
}

interface DeliveriesRow {
  deliveries: number;
  seconds: number;
  rps: number;
  /** Event ids received with 200 more than once. */
  duplicates: number;
}

async function deliveries(base: string, args: Args): Promise<DeliveriesRow> {
  let accept = false;
  const attempts = new Map<string, number>();
  const delivered = new Map<string, number>();
  let lastDelivered = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['x-svc-event-id']);
      if (!accept) {
        attempts.set(id, (attempts.get(id) ?? 0) + 1);
        res.writeHead(503).end();
        return;
      }
      delivered.set(id, (delivered.get(id) ?? 0) + 1);
      lastDelivered = performance.now();
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  try {
    const t = await tenant(base, 'webhooks');
    await json(
      'POST',
      `${t.E}/webhook-endpoints`,
      { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`, events: ['clinical_case.opened'] },
      t.staff,
    );
    await openCases(t, args.deliveries, 16);
    // Every delivery failed twice (at once, then 5 s later): its next attempt is 5 min away.
    for (const until = Date.now() + 120_000; ;) {
      const twice = [...attempts.values()].filter((n) => n >= 2).length;
      if (twice >= args.deliveries) break;
      if (Date.now() > until) throw new Error(`only ${twice} of ${args.deliveries} deliveries failed twice within 120 s`);
      await sleep(250);
    }
    accept = true;
    const t0 = performance.now();
    await json('POST', `${base}/dev/clock`, { advanceSeconds: 7 * 60 });
    for (const until = Date.now() + 300_000; delivered.size < args.deliveries;) {
      if (Date.now() > until) throw new Error(`only ${delivered.size} of ${args.deliveries} delivered within 300 s`);
      await sleep(50);
    }
    const seconds = (lastDelivered - t0) / 1000;
    await sleep(2000);
    return { deliveries: delivered.size, seconds, rps: delivered.size / seconds, duplicates: [...delivered.values()].filter((n) => n > 1).length };
  } finally {
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  console.log(
    `cores ${cpus().length} (${cpus()[0]?.model ?? '?'}); ${args.cases} cases, ${args.connections} connections, ${args.seconds} s per update run; ${args.deliveries} deliveries per burst`,
  );
  const rows: { replicas: string; updates: UpdatesRow; deliveries: DeliveriesRow; load: string }[] = [];
  for (const replicas of ['', 'case-ledger=2,webhook-dispatcher=2']) {
    const topology = await startTopology(replicas);
    try {
      console.log(`topology ${replicas || 'one replica each'} at ${topology.base}`);
      const u = await updates(topology.base, args);
      console.log(`  updates ${Math.round(u.rps)}/s`);
      const d = await deliveries(topology.base, args);
      console.log(`  deliveries ${Math.round(d.rps)}/s`);
      rows.push({
        replicas: replicas || 'every app once',
        updates: u,
        deliveries: d,
        load: loadavg()
          .map((x) => x.toFixed(1))
          .join(' '),
      });
    } finally {
      await topology.stop();
    }
  }
  console.log(
    '\n| replicas | updates 2xx/s | p50 ms | p99 ms | non-2xx | errors | deliveries/s | burst (deliveries in s) | delivered twice | load avg after |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---|---:|---|');
  for (const r of rows) {
    console.log(
      `| ${r.replicas} | ${Math.round(r.updates.rps).toLocaleString('en-US')} | ${r.updates.p50} | ${r.updates.p99} | ${r.updates.non2xx} | ${r.updates.errors} | ${Math.round(r.deliveries.rps).toLocaleString('en-US')} | ${r.deliveries.deliveries} in ${r.deliveries.seconds.toFixed(1)} | ${r.deliveries.duplicates} | ${r.load} |`,
    );
  }
  const [one, two] = rows;
  if (one && two)
    console.log(
      `updates: 2 case-ledger replicas ${(two.updates.rps / one.updates.rps).toFixed(2)}x one; deliveries: 2 webhook-dispatcher replicas ${(two.deliveries.rps / one.deliveries.rps).toFixed(2)}x one`,
    );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
