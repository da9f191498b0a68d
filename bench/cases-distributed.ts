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
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CannonFigures,
  DEV_TOOLS_ENV,
  ROOT,
  cannon,
  cannonFigures,
  caseUpdateRequests,
  freePort,
  openCases,
  seedTenant,
  spawnUntil,
  startDistributed,
  stopChild,
} from './support';

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

/** A started target: its base URL and how to stop it. */
interface Target {
  name: string;
  base: string;
  stop(): Promise<void>;
}

async function standalone(): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-standalone-'));
  const port = await freePort();
  const main = join(ROOT, 'dist', 'apps', 'standalone', 'main.js');
  const { child, url } = await spawnUntil(
    'standalone',
    ['--max-semi-space-size=64', main],
    { ...DEV_TOOLS_ENV, SVC_DATA_DIR: dir, PORT: String(port) },
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
  const topology = await startDistributed({ dirPrefix: 'svc-bench-distributed-', timeoutMs: 240_000 });
  return { name: 'distributed (6 processes via the gateway; Kafka, PostgreSQL, Redis)', ...topology };
}

/** A tenant with 50 patients and N open cases; answers the API key and the case ids. */
async function seed(base: string, n: number): Promise<{ key: string; cases: string[] }> {
  const tenant = await seedTenant(base, { patients: 50 });
  return { key: tenant.key, cases: await openCases(tenant, n, 50) };
}

interface Row extends CannonFigures {
  target: string;
  run: string;
}

async function measure(t: Target, args: Args): Promise<Row[]> {
  const { key, cases } = await seed(t.base, args.cases);
  const url = new URL(t.base);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const progress = cases.map((c) => ({ method: 'GET', path: `${url.pathname}/v1/clinical-cases/${c}/progress` }));
  // Warm-up, as the standalone bench does, then the measured window.
  await cannon({ url: url.origin, connections: args.connections, duration: 2, headers, requests: progress });
  const p = await cannon({ url: url.origin, connections: args.connections, duration: args.seconds, headers, requests: progress });
  const w = await cannon({
    url: url.origin,
    connections: args.connections,
    duration: args.seconds,
    headers,
    requests: caseUpdateRequests(url.pathname, cases),
  });
  const row = (run: string, r: any): Row => ({ target: t.name, run, ...cannonFigures(r, args.seconds) });
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
