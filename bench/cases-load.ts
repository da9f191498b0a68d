/**
 * Clinical-case load: GET progress and POST updates against the standalone app started in this
 * process (SQLite, in-process bus, real HTTP on a free port), beside a bare Fastify JSON route
 * measured in the same run, with autocannon.
 *
 *   npm run build && node dist/bench/cases-load.js [--seconds 10] [--connections 50] [--cases 3000] [--dir /path]
 *
 * Runs: (1) bare Fastify GET, (2) GET progress over many cases, (3) POST updates at full speed
 * (each case updated in sequence: round robin over many cases, so a case's next update starts long
 * after its previous one finished), (4) POST updates at half the rate reached in (3), for p99, with
 * autocannon's rate limit (bursty), (5) the same rate evenly paced, open loop (the p99 the target means).
 * Targets (issue 4): progress >= 0.6 x bare rps; updates >= 0.3 x bare rps, p99 < 25 ms at half
 * the peak rate. A benchmark, not a test: never in CI.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon');
import Fastify from 'fastify';

interface Args {
  seconds: number;
  connections: number;
  cases: number;
  dir?: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 10, connections: 50, cases: 3000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--seconds') args.seconds = Number(v());
    else if (a === '--connections') args.connections = Number(v());
    else if (a === '--cases') args.cases = Number(v());
    else if (a === '--dir') args.dir = v();
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

interface Result {
  requests: { average: number };
  latency: { p50: number; p99: number; average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  '2xx': number;
}

function run(opts: Record<string, unknown>): Promise<Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err: Error | null, res: Result) => (err ? reject(err) : resolve(res)));
  });
}

/** Open-loop load at a fixed rate; latency from each request's due time. */
async function pacedRun(
  origin: string,
  rate: number,
  seconds: number,
  connections: number,
  next: () => { method: string; path: string; body: string; headers: Record<string, string> },
): Promise<{ perSecond: number; p50: number; p99: number; failed: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const total = Math.max(1, Math.floor(rate * seconds));
  const latencies: number[] = [];
  let failed = 0;
  const t0 = performance.now() + 20;
  const one = (due: number) =>
    new Promise<void>((resolve) => {
      const r = next();
      const req = http.request(`${origin}${r.path}`, { method: r.method, headers: { ...r.headers, 'content-length': Buffer.byteLength(r.body) }, agent }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode && res.statusCode < 300) latencies.push(performance.now() - due);
          else failed++;
          resolve();
        });
      });
      req.on('error', () => {
        failed++;
        resolve();
      });
      req.end(r.body);
    });
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((res) => setTimeout(res, wait));
    inFlight.push(one(due));
  }
  await Promise.all(inFlight);
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const q = (x: number) => latencies[Math.min(latencies.length - 1, Math.floor(x * latencies.length))] ?? NaN;
  return { perSecond: latencies.length / elapsed, p50: q(0.5), p99: q(0.99), failed };
}

async function json(method: string, url: string, body?: unknown, token?: string): Promise<any> {
  const res = await fetch(url, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dataDir = mkdtempSync(join(args.dir ?? tmpdir(), 'svc-bench-cases-'));
  process.env.SVC_LOG_LEVEL ??= 'warn';
  const { loadConfig } = await import('@svc/platform');
  const { startStandalone } = await import('../apps/standalone/src/app');
  const config = loadConfig({ ...process.env, NODE_ENV: 'test', SVC_DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' });
  const { app, baseUrl } = await startStandalone(config);
  const base = baseUrl.replace('localhost', '127.0.0.1');

  const bare = Fastify({ logger: false });
  bare.get('/bare', async () => ({ caseId: randomUUID(), status: 'processed', sequence: 1, nextSequence: 2, confirmationOverdue: false, transportDelivered: false }));
  await bare.listen({ port: 0, host: '127.0.0.1' });
  const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}/bare`;

  try {
    const staff = (await json('POST', `${base}/dev/staff-tokens`, { sub: 'bench', email: 'bench@example.test' })).idToken as string;
    const org = await json('POST', `${base}/organizations`, { name: 'Bench Clinic' }, staff);
    const envId = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    const E = `${base}/organizations/${org.id}/environments/${envId}`;
    const key = (await json('POST', `${E}/api-keys`, { name: 'bench' }, staff)).key as string;
    await json('POST', `${base}/organizations/${org.id}/baa`, { signerName: 'B', signerTitle: 'C' }, staff);
    const cases: string[] = [];
    for (let i = 0; i < args.cases; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, args.cases - i) }, () => json('POST', `${E}/clinical-cases`, { patientId: randomUUID(), request: 'bench request' }, staff)),
      );
      cases.push(...batch.map((b) => b.caseId as string));
    }
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const common = { connections: args.connections, duration: args.seconds };
    const url = new URL(base);

    // warm-up
    await run({ url: bareUrl, ...common, duration: 2 });

    const bareRes = await run({ url: bareUrl, ...common });

    let p = 0;
    const progressRes = await run({
      url: `${url.origin}`,
      ...common,
      headers: { authorization: `Bearer ${key}` },
      requests: [{ method: 'GET', setupRequest: (req: { path: string }) => ({ ...req, path: `${url.pathname}/v1/clinical-cases/${cases[p++ % cases.length]}/progress` }) }],
    });

    const nextSeq = new Map<string, number>(cases.map((c) => [c, 1]));
    let u = 0;
    const updateRequest = () => ({
      method: 'POST',
      setupRequest: (req: Record<string, unknown>) => {
        const caseId = cases[u++ % cases.length];
        const seq = nextSeq.get(caseId)!;
        nextSeq.set(caseId, seq + 1);
        const body = { updateId: randomUUID(), sequence: seq, status: seq === 1 ? 'processed' : 'clinician_responded', externalReference: `bench-${seq}` };
        return { ...req, path: `${url.pathname}/v1/clinical-cases/${caseId}/updates`, body: JSON.stringify(body) };
      },
    });
    const updatesPeak = await run({ url: url.origin, ...common, headers: auth, requests: [updateRequest()] });
    const half = Math.max(1, Math.floor(updatesPeak.requests.average / 2));
    const updatesHalf = await run({ url: url.origin, ...common, headers: auth, overallRate: half, requests: [updateRequest()] });
    // (5) The same rate, evenly paced (open loop): autocannon's limiter lets each connection send
    // its quota of the second at the start of each second (a burst every second), and corrects
    // for coordinated omission with an expected interval of ceil(1/rate) = 1 ms, so (4) measures
    // bursts. Here request i is due at t0 + i/rate, sent on a free keep-alive socket (at most
    // --connections), and its latency counts from its due time (no coordinated omission).
    const gen = updateRequest();
    const paced = await pacedRun(`${url.origin}`, half, args.seconds, args.connections, () => {
      const r = gen.setupRequest({}) as { path: string; body: string };
      return { method: 'POST', path: r.path, body: r.body, headers: auth };
    });

    const row = (name: string, r: Result) =>
      `| ${name} | ${r.requests.average.toFixed(0)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx + r.errors + r.timeouts} |`;
    const ratioP = progressRes.requests.average / bareRes.requests.average;
    const ratioU = updatesPeak.requests.average / bareRes.requests.average;
    console.log(`\nclinical-case load: ${args.connections} connections, ${args.seconds} s per run, ${args.cases} cases, node ${process.version}\n`);
    console.log('| run | req/s | p50 ms | p99 ms | non-2xx/errors |');
    console.log('|---|---|---|---|---|');
    console.log(row('bare Fastify GET (baseline)', bareRes));
    console.log(row('GET progress', progressRes));
    console.log(row('POST updates (peak)', updatesPeak));
    console.log(row(`POST updates at half peak (${half}/s), autocannon rate limit (bursts)`, updatesHalf));
    console.log(`| POST updates at half peak (${half}/s), evenly paced | ${paced.perSecond.toFixed(0)} | ${paced.p50.toFixed(1)} | ${paced.p99.toFixed(1)} | ${paced.failed} |`);
    console.log(`\nprogress / bare = ${ratioP.toFixed(2)} (target >= 0.6: ${ratioP >= 0.6 ? 'met' : 'NOT met'})`);
    console.log(`updates / bare = ${ratioU.toFixed(2)} (target >= 0.3: ${ratioU >= 0.3 ? 'met' : 'NOT met'})`);
    console.log(`updates p99 at half peak, evenly paced = ${paced.p99.toFixed(1)} ms (target < 25 ms: ${paced.p99 < 25 ? 'met' : 'NOT met'}); with autocannon's bursts ${updatesHalf.latency.p99} ms`);
  } finally {
    await bare.close();
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
