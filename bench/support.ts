/**
 * What the HTTP benches share (cases-distributed, replicas, cases-load): free ports, a JSON client,
 * starting and stopping a process until a ready line (the six-process topology of
 * scripts/start-distributed.js with its own data dir, database and Redis prefix, dropped after),
 * a seeded tenant with open cases, case update requests and autocannon as a promise.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon');

/** The repository root (the benches run from dist/bench). */
export const ROOT = resolve(__dirname, '..', '..');

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TCP port free on 127.0.0.1 now. */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => res(port));
    });
  });
}

/**
 * A JSON request; answers the parsed body, throws on a status of 300 or more. A 503 (Retry-After,
 * e.g. while a consumer group settles) is sent again, every 500 ms, 20 attempts at most.
 */
export async function json(method: string, url: string, body?: unknown, token?: string): Promise<any> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  for (let attempt = 1; ; attempt++) {
    const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    if (r.status === 503 && attempt < 20) {
      await sleep(500);
      continue;
    }
    if (r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
}

/** One autocannon run (its options as autocannon takes them); answers its result. */
export function cannon(opts: Record<string, unknown>): Promise<any> {
  return new Promise((res, rej) => autocannon(opts, (err: Error | null, r: unknown) => (err ? rej(err) : res(r))));
}

/** The environment of a bench's service: dev tools on, rate limits off, log level warn, 127.0.0.1. */
export const DEV_TOOLS_ENV = { NODE_ENV: 'test', SVC_DEV_TOOLS: '1', SVC_RATE_LIMITS: 'off', SVC_LOG_LEVEL: 'warn', HOST: '127.0.0.1' };

/**
 * Spawns node with `args` (cwd the repository root, `env` over this process's) and resolves once a
 * line of its output matches `ready`, whose first group is answered as the URL; rejects if it exits
 * first or is not ready in `timeoutMs`. Its output keeps being drained.
 */
export async function spawnUntil(
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
  child.stdout!.resume();
  child.stderr!.resume();
  return { child, url };
}

/** SIGTERM, then SIGKILL if it has not exited after `timeoutMs`; resolves once it has exited. */
export function stopChild(child: ChildProcess, timeoutMs = 40_000): Promise<void> {
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

/** A running topology: the gateway's base URL, and how to stop it and drop what it stored. */
export interface Distributed {
  base: string;
  stop(): Promise<void>;
}

/**
 * scripts/start-distributed.js (--no-build) with the dev-tools environment, `env` over it, and a
 * data dir, PostgreSQL database, Redis key prefix and gateway port of its own; resolves once the
 * gateway prints `(distributed) listening at`. stop() ends it (stopChild) and removes the data dir,
 * the database and the keys.
 */
export async function startDistributed(opts: { dirPrefix: string; timeoutMs: number; env?: Record<string, string> }): Promise<Distributed> {
  const dir = mkdtempSync(join(tmpdir(), opts.dirPrefix));
  const db = `svc_bench_${randomBytes(4).toString('hex')}`;
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const env = { ...DEV_TOOLS_ENV, ...opts.env, SVC_DATA_DIR: dir, PORT: String(await freePort()), SVC_DB_NAME: db, REDIS_KEY_PREFIX: prefix };
  const { child, url } = await spawnUntil(
    'start-distributed',
    [join(ROOT, 'scripts', 'start-distributed.js'), '--no-build'],
    env,
    /\(distributed\) listening at (http:\/\/\S+)/,
    opts.timeoutMs,
  );
  return {
    base: url,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
      await dropDatabase(db);
      await deleteRedisKeys(prefix);
    },
  };
}

/** Drops a database of the PostgreSQL server of DATABASE_URL (default the local one). */
async function dropDatabase(db: string): Promise<void> {
  const { Client } = await import('pg');
  const admin = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  admin.pathname = '/postgres';
  const pg = new Client({ connectionString: admin.toString() });
  await pg.connect();
  await pg.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`).finally(() => pg.end());
}

/** Deletes the keys under `prefix:` of the Redis of REDIS_URL (default the local one). */
async function deleteRedisKeys(prefix: string): Promise<void> {
  const { default: Redis } = await import('ioredis');
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  redis.disconnect();
}

/** A seeded tenant: a staff token, the API key, the sandbox environment's URL and its patients. */
export interface Tenant {
  staff: string;
  key: string;
  E: string;
  patients: string[];
}

/**
 * A tenant through the API: a staff token (/dev/staff-tokens), an organization, an API key of its
 * sandbox environment, a signed BAA, an activated protocol and `patients` patients enrolled
 * through /client/patient-events. `name` keeps tenants of one service apart (staff, program and
 * patient ids carry it); without it they are plain `bench`.
 */
export async function seedTenant(base: string, opts: { patients: number; name?: string }): Promise<Tenant> {
  const tag = opts.name ? `bench-${opts.name}` : 'bench';
  const staff = (await json('POST', `${base}/dev/staff-tokens`, { sub: tag, email: `${tag}@example.test` })).idToken as string;
  const org = await json('POST', `${base}/organizations`, { name: opts.name ? `Bench ${opts.name}` : 'Bench Clinic' }, staff);
  const envId = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
  const E = `${base}/organizations/${org.id}/environments/${envId}`;
  const key = (await json('POST', `${E}/api-keys`, { name: 'bench' }, staff)).key as string;
  await json('POST', `${base}/organizations/${org.id}/baa`, { signerName: 'B', signerTitle: 'C' }, staff);
  const protocol = await json(
    'POST',
    `${E}/protocols`,
    {
      programKey: tag,
      name: 'Bench',
      defaultCadenceDays: 30,
      questions: [{ key: 'pain', text: 'Pain?', type: 'scale', min: 0, max: 10 }],
      redFlags: { emergencyTerms: true },
    },
    staff,
  );
  await json('POST', `${E}/protocols/${protocol.id}/activate`, undefined, staff);
  const patients: string[] = [];
  const patientTag = opts.name ? `BENCH-${opts.name}` : 'BENCH';
  for (let i = 0; i < opts.patients; i++) {
    const event = {
      eventId: randomUUID(),
      type: 'patient.created',
      externalPatientId: `${patientTag}-${i}`,
      email: `${tag}-${i}@example.test`,
      programKey: tag,
    };
    patients.push((await json('POST', `${base}/client/patient-events`, event, key)).patientId as string);
  }
  return { staff, key, E, patients };
}

/** Opens `n` staff cases (case i for patient i modulo the tenant's), `concurrency` at a time; answers their ids in order. */
export async function openCases(t: Tenant, n: number, concurrency: number): Promise<string[]> {
  const ids: string[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        const i = next++;
        const opened = await json('POST', `${t.E}/clinical-cases`, { patientId: t.patients[i % t.patients.length], request: 'bench request' }, t.staff);
        ids[i] = opened.caseId as string;
      }
    }),
  );
  return ids;
}

/** The body of a case's update `sequence`: the first processed, the later ones clinician_responded. */
export function caseUpdateBody(sequence: number): string {
  const status = sequence === 1 ? 'processed' : 'clinician_responded';
  return JSON.stringify({ updateId: randomUUID(), sequence, status, externalReference: `bench-${sequence}` });
}

/**
 * Autocannon requests that POST updates round robin over `cases` (paths under `pathPrefix`, the
 * base URL's path), each case's in sequence from 1 across every run that uses them.
 */
export function caseUpdateRequests(pathPrefix: string, cases: string[]): Record<string, unknown>[] {
  const next: Record<string, number> = Object.fromEntries(cases.map((c) => [c, 1]));
  let u = 0;
  const update = () => {
    const caseId = cases[u++ % cases.length];
    return { path: `${pathPrefix}/v1/clinical-cases/${caseId}/updates`, body: caseUpdateBody(next[caseId]++) };
  };
  return [{ method: 'POST', setupRequest: (req: Record<string, unknown>) => ({ ...req, ...update() }) }];
}

/** What the benches print of an autocannon run: 2xx per second, latency (ms), non-2xx answers, errors and timeouts. */
export interface CannonFigures {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** The figures of an autocannon result `r` of a run of `seconds`. */
export function cannonFigures(r: any, seconds: number): CannonFigures {
  return { rps: r['2xx'] / seconds, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors + r.timeouts };
}
