// Over 400 lines: one bench with its baselines, load and report.
/**
 * Clinical-case load: GET progress and POST updates against the standalone app started in this
 * process (SQLite, in-process bus, real HTTP on a free port), beside a bare Fastify JSON route
 * measured in the same run, with autocannon.
 *
 *   npm run build && node dist/bench/cases-load.js [--seconds 10] [--connections 50] [--cases 3000] [--dir /path]
 *     [--client both|inproc|process] [--only bare,progress,updates] [--profile] [--dynamic-progress]
 *
 * Runs: (1) bare Fastify GET, (2) GET progress over many cases, (3) POST updates at full speed
 * (each case updated in sequence: round robin over many cases, so a case's next update starts long
 * after its previous one finished), (4) POST updates at half the rate reached in (3), for p99, with
 * autocannon's rate limit (bursty), (5) the same rate evenly paced, open loop (the p99 the target means).
 * Each set is run with the load generator in this process (`inproc`, sharing the app's event loop)
 * and/or in a child process (`process`, autocannon and the paced client forked from this file), the
 * bare route always measured the same way as the app. Every row also shows the CPU time this
 * process (the server, plus the generator when inproc) spent per request.
 * --profile writes a CPU profile (node:inspector) of the bare, progress, peak-updates and paced windows to the cwd.
 * Targets (issue 4): progress >= 0.6 x bare rps; updates >= 0.3 x bare rps, p99 < 25 ms at half
 * the peak rate. A benchmark, not a test: never in CI.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { startProfile } from './profile';
import { cannon, caseUpdateBody, openCases, seedTenant } from './support';

type ClientMode = 'inproc' | 'process';

interface Args {
  seconds: number;
  connections: number;
  cases: number;
  dir?: string;
  clients: ClientMode[];
  only: Set<string>;
  profile: boolean;
  dynamicProgress: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    seconds: 10,
    connections: 50,
    cases: 3000,
    clients: ['inproc', 'process'],
    only: new Set(['bare', 'progress', 'updates']),
    profile: false,
    dynamicProgress: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--seconds') args.seconds = Number(v());
    else if (a === '--connections') args.connections = Number(v());
    else if (a === '--cases') args.cases = Number(v());
    else if (a === '--dir') args.dir = v();
    else if (a === '--client') {
      const c = v();
      args.clients = c === 'both' ? ['inproc', 'process'] : [c as ClientMode];
      if (!['both', 'inproc', 'process'].includes(c)) throw new Error(`--client ${c}: both, inproc or process`);
    } else if (a === '--only') args.only = new Set(v().split(','));
    else if (a === '--profile') args.profile = true;
    else if (a === '--dynamic-progress') args.dynamicProgress = true;
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

interface PacedResult {
  perSecond: number;
  p50: number;
  p99: number;
  failed: number;
}

/** What a load generator needs to build requests; serialisable, so a child process can carry it on. */
interface GenState {
  prefix: string;
  cases: string[];
  p: number;
  u: number;
  nextSeq: Record<string, number>;
}

/** Request generators shared by both client modes (the state travels to the child and back). */
class Gen {
  constructor(readonly s: GenState) {}
  progressPath(): string {
    return this.progressPathOf(this.s.p++ % this.s.cases.length);
  }
  progressPathOf(i: number): string {
    return `${this.s.prefix}/v1/clinical-cases/${this.s.cases[i]}/progress`;
  }
  update(): { path: string; body: string } {
    const caseId = this.s.cases[this.s.u++ % this.s.cases.length];
    const seq = this.s.nextSeq[caseId];
    this.s.nextSeq[caseId] = seq + 1;
    return { path: `${this.s.prefix}/v1/clinical-cases/${caseId}/updates`, body: caseUpdateBody(seq) };
  }
}

/** One load run, described so that either this process or the child can execute it. */
interface Job {
  kind: 'autocannon' | 'paced';
  target: 'bare' | 'progress' | 'updates';
  url: string;
  connections: number;
  seconds: number;
  headers: Record<string, string>;
  overallRate?: number;
  rate?: number;
  dynamicProgress?: boolean;
}

/** Runs a job in the current process. */
async function execute(job: Job, gen: Gen): Promise<Result | PacedResult> {
  if (job.kind === 'paced') {
    return pacedRun(job.url, job.rate!, job.seconds, job.connections, () => {
      const r = gen.update();
      return { method: 'POST', path: r.path, body: r.body, headers: job.headers };
    });
  }
  const opts: Record<string, unknown> = { url: job.url, connections: job.connections, duration: job.seconds, headers: job.headers };
  if (job.overallRate) opts.overallRate = job.overallRate;
  // Every case's progress request is built once, before the run, as autocannon builds the bare
  // route's single request: per request the client then only writes a prepared buffer, so both
  // runs cost the load generator the same (on two cores its CPU is taken from the server's).
  // --dynamic-progress builds each request in setupRequest instead, which costs the generator more
  // per request than the bare route's prepared one.
  if (job.target === 'progress')
    opts.requests = job.dynamicProgress
      ? [{ method: 'GET', setupRequest: (req: Record<string, unknown>) => ({ ...req, path: gen.progressPath() }) }]
      : gen.s.cases.map((_, i) => ({ method: 'GET', path: gen.progressPathOf(i) }));
  if (job.target === 'updates') opts.requests = [{ method: 'POST', setupRequest: (req: Record<string, unknown>) => ({ ...req, ...gen.update() }) }];
  return cannon(opts);
}

/** The load generator in a child process (this file, forked with --worker). */
class ChildClient {
  private readonly child: ChildProcess;
  constructor() {
    this.child = fork(__filename, ['--worker'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  }
  run(job: Job, gen: Gen): Promise<{ result: Result | PacedResult; clientCpuMs: number }> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: { result?: Result | PacedResult; state?: GenState; clientCpuMs?: number; error?: string }) => {
        this.child.off('message', onMessage);
        if (m.error) return reject(new Error(m.error));
        Object.assign(gen.s, m.state);
        resolve({ result: m.result!, clientCpuMs: m.clientCpuMs! });
      };
      this.child.on('message', onMessage);
      this.child.send({ job, state: gen.s });
    });
  }
  close(): void {
    this.child.disconnect();
  }
}

async function worker(): Promise<void> {
  process.on('message', async (m: { job: Job; state: GenState }) => {
    const gen = new Gen(m.state);
    const cpu0 = process.cpuUsage();
    try {
      const result = await execute(m.job, gen);
      const cpu = process.cpuUsage(cpu0);
      process.send!({ result: slim(result), state: gen.s, clientCpuMs: (cpu.user + cpu.system) / 1000 });
    } catch (err) {
      process.send!({ error: String((err as Error)?.stack ?? err) });
    }
  });
}

/** Only what the report reads (autocannon's result carries histograms). */
function slim(r: Result | PacedResult): Result | PacedResult {
  if ('perSecond' in r) return r;
  return {
    requests: { average: r.requests.average },
    latency: { p50: r.latency.p50, p99: r.latency.p99, average: r.latency.average },
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    '2xx': r['2xx'],
  };
}

/** Open-loop load at a fixed rate; latency from each request's due time. */
async function pacedRun(
  origin: string,
  rate: number,
  seconds: number,
  connections: number,
  next: () => { method: string; path: string; body: string; headers: Record<string, string> },
): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const total = Math.max(1, Math.floor(rate * seconds));
  const latencies: number[] = [];
  let failed = 0;
  const t0 = performance.now() + 20;
  const one = (due: number) =>
    new Promise<void>((resolve) => {
      const r = next();
      const req = http.request(
        `${origin}${r.path}`,
        { method: r.method, headers: { ...r.headers, 'content-length': Buffer.byteLength(r.body) }, agent },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode && res.statusCode < 300) latencies.push(performance.now() - due);
            else failed++;
            resolve();
          });
        },
      );
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

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dataDir = mkdtempSync(join(args.dir ?? tmpdir(), 'svc-bench-cases-'));
  process.env.SVC_LOG_LEVEL ??= 'warn';
  // A load test: the rate limits (docs/decisions.md "Rate limits") would measure themselves.
  process.env.SVC_RATE_LIMITS ??= 'off';
  const { loadConfig } = await import('@svc/platform');
  const { startStandalone } = await import('../apps/standalone/src/app');
  const config = loadConfig({ ...process.env, NODE_ENV: 'test', SVC_DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1' });
  const { app, baseUrl } = await startStandalone(config);
  const base = baseUrl.replace('localhost', '127.0.0.1');

  const bare = Fastify({ logger: false });
  bare.get('/bare', async () => ({
    caseId: randomUUID(),
    status: 'processed',
    sequence: 1,
    nextSequence: 2,
    confirmationOverdue: false,
    transportDelivered: false,
  }));
  await bare.listen({ port: 0, host: '127.0.0.1' });
  const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}/bare`;
  const child = args.clients.includes('process') ? new ChildClient() : null;

  try {
    // Staff cases need a patient the environment knows: a protocol and 50 enrolled patients.
    const tenant = await seedTenant(base, { patients: 50 });
    const key = tenant.key;
    const cases = await openCases(tenant, args.cases, 50);
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const url = new URL(base);
    const gen = new Gen({ prefix: url.pathname, cases, p: 0, u: 0, nextSeq: Object.fromEntries(cases.map((c) => [c, 1])) });

    /** Runs a job with the given client; CPU of this process (server, + generator when inproc) per 2xx request. */
    const go = async (mode: ClientMode, job: Job, profileLabel?: string) => {
      const stopProfile = args.profile && profileLabel ? await startProfile(profileLabel) : null;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const out = mode === 'inproc' ? { result: await execute(job, gen), clientCpuMs: NaN } : await child!.run(job, gen);
      const cpu = process.cpuUsage(cpu0);
      const seconds = (performance.now() - t0) / 1000;
      if (stopProfile) console.log(`cpu profile of ${profileLabel}: ${await stopProfile()}`);
      const r = out.result;
      const ok = 'perSecond' in r ? r.perSecond * seconds : r['2xx'];
      return { r, serverUsPerReq: (cpu.user + cpu.system) / Math.max(1, ok), clientCpuPct: (out.clientCpuMs / 1000 / seconds) * 100 };
    };
    const base0 = { connections: args.connections, seconds: args.seconds };

    for (const mode of args.clients) {
      const rows: string[] = [];
      const row = (name: string, x: { r: Result | PacedResult; serverUsPerReq: number; clientCpuPct: number }) => {
        const r = x.r;
        const cpu = `${x.serverUsPerReq.toFixed(0)} | ${Number.isNaN(x.clientCpuPct) ? '-' : `${x.clientCpuPct.toFixed(0)}%`}`;
        if ('perSecond' in r) return rows.push(`| ${name} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.failed} | ${cpu} |`);
        return rows.push(`| ${name} | ${r.requests.average.toFixed(0)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx + r.errors + r.timeouts} | ${cpu} |`);
      };
      // warm-up
      await go(mode, { kind: 'autocannon', target: 'bare', url: bareUrl, headers: {}, ...base0, seconds: 2 });
      const bareRes = await go(mode, { kind: 'autocannon', target: 'bare', url: bareUrl, headers: {}, ...base0 }, 'bare');
      row('bare Fastify GET (baseline)', bareRes);
      const bareRps = (bareRes.r as Result).requests.average;
      const summary: string[] = [];
      if (args.only.has('progress')) {
        const progressJob: Job = {
          kind: 'autocannon',
          target: 'progress',
          url: url.origin,
          headers: { authorization: `Bearer ${key}` },
          dynamicProgress: args.dynamicProgress,
          ...base0,
        };
        // Warmed up as the bare route is (2 s): the first read of each case fills the app's progress views.
        await go(mode, { ...progressJob, seconds: 2 });
        const pr = await go(mode, progressJob, 'progress');
        row('GET progress', pr);
        const ratio = (pr.r as Result).requests.average / bareRps;
        summary.push(`progress / bare = ${ratio.toFixed(2)} (target >= 0.6: ${ratio >= 0.6 ? 'met' : 'NOT met'})`);
      }
      if (args.only.has('updates')) {
        const peak = await go(mode, { kind: 'autocannon', target: 'updates', url: url.origin, headers: auth, ...base0 }, 'updates');
        row('POST updates (peak)', peak);
        const peakRps = (peak.r as Result).requests.average;
        const half = Math.max(1, Math.floor(peakRps / 2));
        const halfRes = await go(mode, { kind: 'autocannon', target: 'updates', url: url.origin, headers: auth, overallRate: half, ...base0 });
        row(`POST updates at half peak (${half}/s), autocannon rate limit (bursts)`, halfRes);
        // (5) The same rate, evenly paced (open loop): autocannon's limiter lets each connection send
        // its quota of the second at the start of each second (a burst every second), and corrects
        // for coordinated omission with an expected interval of ceil(1/rate) = 1 ms, so (4) measures
        // bursts. Here request i is due at t0 + i/rate, sent on a free keep-alive socket (at most
        // --connections), and its latency counts from its due time (no coordinated omission).
        const paced = await go(mode, { kind: 'paced', target: 'updates', url: url.origin, headers: auth, rate: half, ...base0 }, 'paced');
        row(`POST updates at half peak (${half}/s), evenly paced`, paced);
        const ratio = peakRps / bareRps;
        const p99 = (paced.r as PacedResult).p99;
        summary.push(`updates / bare = ${ratio.toFixed(2)} (target >= 0.3: ${ratio >= 0.3 ? 'met' : 'NOT met'})`);
        summary.push(
          `updates p99 at half peak, evenly paced = ${p99.toFixed(1)} ms (target < 25 ms: ${p99 < 25 ? 'met' : 'NOT met'}); with autocannon's bursts ${(halfRes.r as Result).latency.p99} ms`,
        );
      }
      console.log(
        `\nclinical-case load, client ${mode === 'inproc' ? 'in this process' : 'in a child process'}: ${args.connections} connections, ${args.seconds} s per run, ${args.cases} cases, node ${process.version}\n`,
      );
      console.log('| run | req/s | p50 ms | p99 ms | non-2xx/errors | server CPU µs/req | client CPU |');
      console.log('|---|---|---|---|---|---|---|');
      for (const r of rows) console.log(r);
      console.log('');
      for (const l of summary) console.log(l);
    }
  } finally {
    child?.close();
    await bare.close();
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--worker')) {
  void worker();
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
