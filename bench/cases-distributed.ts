/**
 * Durable case updates and progress reads per second through the gateway of the six-process
 * topology (scripts/start-distributed.js: Kafka, PostgreSQL, Redis), against the same load on the
 * built standalone process (SQLite, in-process bus), both started by this run, one after the other.
 *
 *   npm run bench:distributed -- [--seconds 10] [--connections 50] [--cases 1000]
 *
 * For each target: a tenant (dev issuer, organization, BAA, API key, protocol, 50 patients) and
 * N staff cases; then autocannon from this process: (1) GET progress round robin over the cases,
 * (2) POST updates at full speed (each case in sequence: processed, then clinician_responded; an
 * update answers once it is durable and the progress read model has it). Rate limits off, log
 * level warn. A benchmark, not a test: never in CI.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon');

const ROOT = resolve(__dirname, '..', '..');

interface Args {
  seconds: number;
  connections: number;
  cases: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 10, connections: 50, cases: 1000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => Number(argv[++i]);
    if (a === '--seconds') args.seconds = v();
    else if (a === '--connections') args.connections = v();
    else if (a === '--cases') args.cases = v();
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => res(port));
    });
  });
}

/** A started target: its base URL and how to stop it. */
interface Target {
  name: string;
  base: string;
  stop(): Promise<void>;
}

/** Spawns `args` and resolves once a line of its output matches `ready` (its first group is the base URL). */
async function spawnUntil(
  name: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs: number,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`${name} not ready in ${timeoutMs} ms:\n${out.slice(-3000)}`)), timeoutMs);
    const on = (d: Buffer) => {
      out = (out + d.toString()).slice(-20_000);
      const m = out.match(ready);
      if (m) {
        clearTimeout(timer);
        res(m[1]);
      }
    };
    child.stdout!.on('data', on);
    child.stderr!.on('data', on);
    child.once('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`${name} exited ${code}:\n${out.slice(-3000)}`));
    });
  });
  // Keep draining its output.
  child.stdout!.resume();
  child.stderr!.resume();
  return { child, url };
}

function stopChild(child: ChildProcess, timeoutMs = 40_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      res();
    });
    child.kill('SIGTERM');
  });
}

const common = { NODE_ENV: 'test', SVC_DEV_TOOLS: '1', SVC_RATE_LIMITS: 'off', SVC_LOG_LEVEL: 'warn', HOST: '127.0.0.1' };

async function standalone(): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-standalone-'));
  const port = await freePort();
  const main = join(ROOT, 'dist', 'apps', 'standalone', 'main.js');
  const { child, url } = await spawnUntil(
    'standalone',
    ['--max-semi-space-size=64', main],
    { ...common, SVC_DATA_DIR: dir, PORT: String(port) },
    /listening at (http:\/\/\S+)/,
    60_000,
  );
  return {
    name: 'standalone (1 process, SQLite)',
    base: url.replace('localhost', '127.0.0.1'),
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function distributed(): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-distributed-'));
  const db = `svc_bench_${randomBytes(4).toString('hex')}`;
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const port = await freePort();
  const env = { ...common, SVC_DATA_DIR: dir, PORT: String(port), SVC_DB_NAME: db, REDIS_KEY_PREFIX: prefix };
  const { child, url } = await spawnUntil(
    'start-distributed',
    [join(ROOT, 'scripts', 'start-distributed.js'), '--no-build'],
    env,
    /\(distributed\) listening at (http:\/\/\S+)/,
    240_000,
  );
  return {
    name: 'distributed (6 processes via the gateway; Kafka, PostgreSQL, Redis)',
    base: url,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
      // The bench's database and keys are dropped (as the test topology's are).
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
  const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** A tenant with N open cases; answers the API key and the case ids. */
async function seed(base: string, n: number): Promise<{ key: string; cases: string[] }> {
  const staff = (await json('POST', `${base}/dev/staff-tokens`, { sub: 'bench', email: 'bench@example.test' })).idToken as string;
  const org = await json('POST', `${base}/organizations`, { name: 'Bench Clinic' }, staff);
  const envId = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
  const E = `${base}/organizations/${org.id}/environments/${envId}`;
  const key = (await json('POST', `${E}/api-keys`, { name: 'bench' }, staff)).key as string;
  await json('POST', `${base}/organizations/${org.id}/baa`, { signerName: 'B', signerTitle: 'C' }, staff);
  const protocol = await json(
    'POST',
    `${E}/protocols`,
    {
      programKey: 'bench',
      name: 'Bench',
      defaultCadenceDays: 30,
      questions: [{ key: 'pain', text: 'Pain?', type: 'scale', min: 0, max: 10 }],
      redFlags: { emergencyTerms: true },
    },
    staff,
  );
  await json('POST', `${E}/protocols/${protocol.id}/activate`, undefined, staff);
  const patients: string[] = [];
  for (let i = 0; i < 50; i++) {
    patients.push(
      (
        await json(
          'POST',
          `${base}/client/patient-events`,
          { eventId: randomUUID(), type: 'patient.created', externalPatientId: `BENCH-${i}`, email: `bench-${i}@example.test`, programKey: 'bench' },
          key,
        )
      ).patientId as string,
    );
  }
  const cases: string[] = [];
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) => json('POST', `${E}/clinical-cases`, { patientId: patients[j], request: 'bench request' }, staff)),
    );
    cases.push(...batch.map((b) => b.caseId as string));
  }
  return { key, cases };
}

interface Row {
  target: string;
  run: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

function cannon(opts: Record<string, unknown>): Promise<any> {
  return new Promise((res, rej) => autocannon(opts, (err: Error | null, r: unknown) => (err ? rej(err) : res(r))));
}

async function measure(t: Target, args: Args): Promise<Row[]> {
  const { key, cases } = await seed(t.base, args.cases);
  const url = new URL(t.base);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const progress = cases.map((c) => ({ method: 'GET', path: `${url.pathname}/v1/clinical-cases/${c}/progress` }));
  // Warm-up, as the standalone bench does, then the measured window.
  await cannon({ url: url.origin, connections: args.connections, duration: 2, headers, requests: progress });
  const p = await cannon({ url: url.origin, connections: args.connections, duration: args.seconds, headers, requests: progress });
  const next: Record<string, number> = Object.fromEntries(cases.map((c) => [c, 1]));
  let u = 0;
  const update = () => {
    const caseId = cases[u++ % cases.length];
    const seq = next[caseId]++;
    const body = { updateId: randomUUID(), sequence: seq, status: seq === 1 ? 'processed' : 'clinician_responded', externalReference: `bench-${seq}` };
    return { path: `${url.pathname}/v1/clinical-cases/${caseId}/updates`, body: JSON.stringify(body) };
  };
  const w = await cannon({
    url: url.origin,
    connections: args.connections,
    duration: args.seconds,
    headers,
    requests: [{ method: 'POST', setupRequest: (req: Record<string, unknown>) => ({ ...req, ...update() }) }],
  });
  const row = (run: string, r: any): Row => ({
    target: t.name,
    run,
    rps: r['2xx'] / args.seconds,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
  });
  return [row('GET progress', p), row('POST updates (durable)', w)];
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const rows: Row[] = [];
  for (const start of [standalone, distributed]) {
    const t = await start();
    try {
      console.log(`measuring ${t.name} at ${t.base} (${args.cases} cases, ${args.connections} connections, ${args.seconds} s per run)`);
      rows.push(...(await measure(t, args)));
    } finally {
      await t.stop();
    }
  }
  console.log('\n| target | run | 2xx/s | p50 ms | p99 ms | non-2xx | errors |');
  console.log('|---|---|---:|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(`| ${r.target} | ${r.run} | ${Math.round(r.rps).toLocaleString('en-US')} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.errors} |`);
  for (const run of ['GET progress', 'POST updates (durable)']) {
    const [s, d] = rows.filter((r) => r.run === run);
    console.log(`${run}: distributed ${(d.rps / s.rps).toFixed(2)}x standalone`);
  }
  console.log(
    `load average ${loadavg()
      .map((x: number) => x.toFixed(1))
      .join(' ')}`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
