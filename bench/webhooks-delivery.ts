// Over 400 lines: one bench with its baselines, load and report.
/**
 * Webhook delivery throughput and opened-to-delivered latency, against the standalone app
 * (in-process, real HTTP, SQLite) and a real receiver on 127.0.0.1 that verifies every signature.
 *
 *   npm run build && node dist/bench/webhooks-delivery.js [--cases 500] [--concurrency 16] [--burst 500] [--receivers in,child] [--open-client child|in] [--rate 200] [--paced-seconds 5]
 *
 * Workload: staff `POST E/clinical-cases` (case-ledger) with `--concurrency` callers until
 * `--cases` cases are open; each `clinical_case.opened` goes case-ledger relay → bus →
 * dispatcher → delivery stream → timer → signed POST. Figures:
 *   - deliveries/s: cases delivered / (first open request → last delivery received);
 *   - opened-to-delivered latency: 201 of the open request → the receiver has the webhook (p50/p95/p99);
 *     in the paced run also from the open request being sent (an upper bound: it includes the open
 *     request's own queueing and handling) and from the case opening: the envelope's `createdAt`,
 *     the clinical_case.opened event's time on the service clock (the dev clock, not advanced here),
 *     taken when the open is decided, before its commit (so it counts the commit too);
 *   - baseline in the same run: the same receiver fed by a plain signed-fetch loop with the same
 *     concurrency (what the HTTP path alone can do), and the open requests alone (cases/s with no endpoint).
 *   - burst (--burst N, default = --cases, 0 to skip): N cases opened for an organization without a
 *     BAA (their deliveries are held; opened by the case-ledger's bus command, since before the BAA
 *     no patient can be enrolled and a staff case needs a known patient), then the BAA is signed and the N deliveries go out at once:
 *     deliveries/s from the BAA request to the last webhook received (the dispatcher's own rate).
 *     --profile-burst writes a CPU profile of that window alone (--profile-open: of the open-only baseline).
 * Caller placement (--open-client child|in, default child): the staff requests that open cases
 * come from a child process (dist/bench/open-client-child.js, node:http keep-alive), as another
 * system's would, or (in) from fetch in this process, whose CPU then counts against the service's.
 * Receiver placement (--receivers in,child, default both, in that order): the endpoint-dependent
 * figures (signed-POST baseline, open + deliver, paced, burst) are measured once per receiver:
 *   - in: a node:http server in this process, on the service's event loop (service and receiver
 *     share one core);
 *   - child: the same server in a child process (child_process.fork of
 *     dist/bench/webhook-receiver-child.js), its own event loop, as a real receiver (another
 *     system) would be; it reports arrivals over IPC in batches, timestamped in the child.
 *   Each placement gets its own staff tenant and burst tenant; the open-only baseline is measured
 *   once (first placement's tenant). Timestamps in both processes are
 *   performance.timeOrigin + performance.now() (see `now`). The burst also reports the CPU time /
 *   wall time of the service process and (child only) of the receiver process.
 * A benchmark, not a test: never in CI.
 */
process.env.SVC_LOG_LEVEL ??= 'warn';
// A load test: the rate limits (docs/decisions.md "Rate limits") would measure themselves.
process.env.SVC_RATE_LIMITS ??= 'off';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { lastValueFrom } from 'rxjs';
import { TestApp } from '@svc/testing';
import { BUS_CLIENT, OpenClinicalCaseCommand, OpenClinicalCaseReply, Patterns } from '@svc/messaging';
import { signWebhook, verifyWebhook } from '@svc/security';
import { runOpens } from './open-loop';
import { startProfile } from './profile';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const f = (x: number) => x.toFixed(1);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

/**
 * Clock: every timestamp in this bench (and in the child receiver) is
 * performance.timeOrigin + performance.now(): milliseconds since the epoch with sub-millisecond
 * resolution. Each process's timeOrigin is read from the system clock when it starts, so the two
 * processes' values are comparable (same machine, same clock; an NTP step during a run would
 * shift them, a slew by microseconds).
 */
const now = () => performance.timeOrigin + performance.now();

/** A receiver that verifies every signature and records the first arrival per case id (or event id). */
interface Receiver {
  readonly name: string;
  readonly url: string;
  readonly arrivals: Map<string, number>;
  /** The envelope's `createdAt` (the clinical_case.opened event's time: when the case opened), ms since the epoch. */
  readonly openedAt: Map<string, number>;
  bad(): number;
  /** Sets the secret used to verify; resolves once the receiver uses it. */
  setSecret(secret: string): Promise<void>;
  /** Resolves once every arrival the receiver has recorded so far is in `arrivals`. */
  sync(): Promise<void>;
  /** The receiver process's CPU time so far (µs, user + system); NaN in-process (shared with the service). */
  cpuMicros(): Promise<number>;
  close(): Promise<void>;
}

/** Today's receiver: a node:http server in this process, on the service's event loop. */
async function inProcessReceiver(): Promise<Receiver> {
  let secret = '';
  let bad = 0;
  const arrivals = new Map<string, number>();
  const openedAt = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const rawBody = Buffer.concat(chunks);
      try {
        const env = await verifyWebhook<{ caseId?: string }>({
          rawBody,
          headers: req.headers as Record<string, string>,
          secret,
          seen: null,
          toleranceSec: 3600,
        });
        const key = env.data.caseId ?? env.id;
        if (!arrivals.has(key)) {
          arrivals.set(key, now());
          openedAt.set(key, Date.parse(env.createdAt));
        }
      } catch {
        bad++;
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    name: 'in-process',
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    arrivals,
    openedAt,
    bad: () => bad,
    setSecret: async (s) => {
      secret = s;
    },
    sync: async () => undefined,
    cpuMicros: async () => NaN,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The receiver in a child process (dist/bench/webhook-receiver-child.js), arrivals over IPC in batches. */
async function childReceiver(): Promise<Receiver> {
  const { fork } = await import('node:child_process');
  const { join } = await import('node:path');
  const child = fork(join(__dirname, 'webhook-receiver-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const arrivals = new Map<string, number>();
  const openedAt = new Map<string, number>();
  let bad = 0;
  let seq = 0;
  let cpuMicros = NaN;
  const acks = new Map<number, () => void>();
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`receiver child exited: ${code}`)));
    child.on('message', (m: { type: string; port?: number; items?: [string, number, number][]; bad?: number; seq?: number; cpuMicros?: number }) => {
      if (m.type === 'listening') resolve(m.port!);
      else if (m.type === 'arrivals') {
        for (const [key, at, created] of m.items!) {
          if (arrivals.has(key)) continue;
          arrivals.set(key, at);
          openedAt.set(key, created);
        }
        bad = m.bad!;
      } else if (m.type === 'ack') {
        bad = m.bad!;
        cpuMicros = m.cpuMicros!;
        acks.get(m.seq!)?.();
        acks.delete(m.seq!);
      }
    });
  });
  child.removeAllListeners('exit');
  const ask = (msg: object) =>
    new Promise<void>((resolve) => {
      const n = ++seq;
      acks.set(n, resolve);
      child.send({ ...msg, seq: n });
    });
  return {
    name: 'child process',
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    openedAt,
    bad: () => bad,
    setSecret: (secret) => ask({ type: 'secret', secret }),
    sync: () => ask({ type: 'flush' }),
    cpuMicros: async () => {
      await ask({ type: 'flush' });
      return cpuMicros;
    },
    close: async () => {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.disconnect();
      await exited;
    },
  };
}

/** Baseline: plain signed POSTs straight to the receiver, same concurrency, same body size. */
async function signedPostLoop(receiver: Receiver, total: number, concurrency: number): Promise<number> {
  const secret = 'whsec_baseline';
  await receiver.setSecret(secret);
  const sample = JSON.stringify({
    id: randomUUID(),
    type: 'clinical_case.opened',
    createdAt: new Date().toISOString(),
    data: { caseId: 'x', patientNotes: 'y'.repeat(200) },
  });
  let sent = 0;
  const t0 = now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < total) {
        sent++;
        const id = randomUUID();
        const body = sample.replace(/"id":"[^"]+"/, `"id":"${id}"`).replace('"caseId":"x"', `"caseId":"${id}"`);
        const ts = Math.floor(Date.now() / 1000);
        await fetch(receiver.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-svc-event-id': id,
            'x-svc-event-type': 'clinical_case.opened',
            'x-svc-timestamp': String(ts),
            'x-svc-signature': signWebhook(secret, ts, body),
            'idempotency-key': id,
          },
          body,
        }).then((r) => r.arrayBuffer());
      }
    }),
  );
  const perS = total / ((now() - t0) / 1000);
  await receiver.sync();
  if (receiver.arrivals.size !== total) throw new Error(`baseline: ${receiver.arrivals.size}/${total} verified by the ${receiver.name} receiver`);
  receiver.arrivals.clear();
  return perS;
}

/** Who sends the staff requests that open cases: [caseId, sentAt, answeredAt] per case. */
interface Opener {
  open(url: string, token: string, bodies: string[], concurrency: number, rate?: number): Promise<[string, number, number][]>;
  close(): Promise<void>;
}

/** --open-client in: fetch from this process (the caller's CPU counts against the service's). */
function inProcessOpener(): Opener {
  const one = async (url: string, token: string, body: string): Promise<[string, number, number]> => {
    const sentAt = now();
    const r = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
    const text = await r.text();
    if (r.status !== 201) throw new Error(`open: ${r.status} ${text}`);
    return [(JSON.parse(text) as { caseId: string }).caseId, sentAt, now()];
  };
  return {
    open: (url, token, bodies, concurrency, rate) => runOpens(bodies, concurrency, rate, (body) => one(url, token, body)),
    close: async () => undefined,
  };
}

/** --open-client child (default): node:http from a child process (dist/bench/open-client-child.js), as another system would call. */
async function childOpener(): Promise<Opener> {
  const { fork } = await import('node:child_process');
  const { join } = await import('node:path');
  const child = fork(join(__dirname, 'open-client-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('message', () => resolve());
  });
  let seq = 0;
  return {
    open: (url, token, bodies, concurrency, rate) =>
      new Promise((resolve, reject) => {
        const n = ++seq;
        const onMessage = (m: { type: string; seq: number; items?: [string, number, number][]; error?: string }) => {
          if (m.seq !== n) return;
          child.off('message', onMessage);
          if (m.type === 'opened') resolve(m.items!);
          else reject(new Error(m.error));
        };
        child.on('message', onMessage);
        child.send({ type: 'open', seq: n, url, token, bodies, concurrency, rate });
      }),
    close: async () => {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.disconnect();
      await exited;
    },
  };
}

interface PlacementResult {
  receiver: string;
  baselinePerS: number;
  perS: number;
  delivered: number;
  opensTookS: number;
  latencies: number[];
  paced?: { achieved: number; answered: number; got: number; total: number; lat: number[]; fromSend: number[]; fromOpened: number[] };
  burst?: { perS: number; delivered: number; latency: number[]; profile?: string; serviceCpu: number; receiverCpu: number };
  bad: number;
}

async function main() {
  const cases = arg('cases', 500);
  const concurrency = arg('concurrency', 16);
  const rate = arg('rate', 200);
  const pacedSeconds = arg('paced-seconds', 5);
  const burst = Math.min(arg('burst', cases), 1000);
  const ri = process.argv.indexOf('--receivers');
  const placements = (ri > 0 ? process.argv[ri + 1] : 'in,child').split(',');
  for (const p of placements) if (p !== 'in' && p !== 'child') throw new Error(`--receivers: in and/or child, not ${p}`);

  const receivers: Receiver[] = [];
  for (const p of placements) receivers.push(p === 'in' ? await inProcessReceiver() : await childReceiver());

  // Baseline 1, per receiver, before the app starts: the HTTP path alone.
  const baselines: number[] = [];
  for (const r of receivers) baselines.push(await signedPostLoop(r, cases, concurrency));

  const oi = process.argv.indexOf('--open-client');
  const openClient = oi > 0 ? process.argv[oi + 1] : 'child';
  if (openClient !== 'in' && openClient !== 'child') throw new Error(`--open-client: in or child, not ${openClient}`);
  const opener = openClient === 'child' ? await childOpener() : inProcessOpener();

  const app = await new TestApp().start();
  const results: PlacementResult[] = [];
  let openOnlyPerS = NaN;
  try {
    const bus = (app as unknown as { app: { get<T>(t: unknown): T } }).app.get<{ send<R>(p: string, d: unknown): import('rxjs').Observable<R> }>(BUS_CLIENT);
    const staffTenant = async () => {
      const t = await app.tenant();
      // Staff cases need a patient the environment knows.
      const patients = await Promise.all(Array.from({ length: concurrency }, () => app.enrolledPatient(t)));
      const plan = await app.api.put(`/organizations/${t.orgId}/plan`, { monthlyCredits: 10_000_000 }, t.staff);
      if (plan.status !== 200) throw new Error(`plan: ${plan.status}`);
      /** Opens n cases (closed loop at --concurrency, or open loop at `rate`): [caseId, sentAt, answeredAt] each. */
      const open = (n: number, rate?: number) => {
        const bodies = Array.from({ length: n }, (_, i) =>
          JSON.stringify({ patientId: patients[i % patients.length].patientId, request: 'Please call the patient back about the medication' }),
        );
        return opener.open(`${app.baseUrl}${t.env}/clinical-cases`, t.staff, bodies, concurrency, rate);
      };
      return { t, patients, open };
    };

    for (const [ix, receiver] of receivers.entries()) {
      const arrivals = receiver.arrivals;
      const { t, open } = await staffTenant();
      if (ix === 0) {
        // Baseline 2 (once): opening cases with no endpoint subscribed (the case path alone).
        const stopProfile = process.argv.includes('--profile-open') ? await startProfile('open') : null;
        const b0 = now();
        await open(cases);
        openOnlyPerS = cases / ((now() - b0) / 1000);
        if (stopProfile) console.log(`  cpu profile of the open-only baseline: ${await stopProfile()}`);
      }

      // The measured run: an endpoint subscribed to clinical_case.opened.
      const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url: receiver.url, events: ['clinical_case.opened'] }, t.staff);
      if (ep.status !== 201) throw new Error(`endpoint: ${ep.status} ${ep.text}`);
      await receiver.setSecret(ep.body.secret);
      const openedAt = new Map<string, number>();
      const s0 = now();
      for (const [id, , at] of await open(cases)) openedAt.set(id, at);
      const openedDone = now();
      const deadline = Date.now() + 120_000;
      while ([...openedAt.keys()].some((id) => !arrivals.has(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const delivered = [...openedAt.keys()].filter((id) => arrivals.has(id));
      const last = Math.max(...delivered.map((id) => arrivals.get(id)!));
      const result: PlacementResult = {
        receiver: receiver.name,
        baselinePerS: baselines[ix],
        perS: delivered.length / ((last - s0) / 1000),
        delivered: delivered.length,
        opensTookS: (openedDone - s0) / 1000,
        latencies: delivered.map((id) => arrivals.get(id)! - openedAt.get(id)!),
        bad: 0,
      };

      // Paced: cases opened at a steady --rate per second (default 200, the target's condition) for
      // --paced-seconds, open loop (each open starts on schedule, whether or not earlier ones answered).
      const pacedOpened = new Map<string, number>();
      const pacedSent = new Map<string, number>();
      const pacedTotal = rate * pacedSeconds;
      if (pacedTotal > 0) {
        const items = await open(pacedTotal, rate);
        for (const [id, sentAt, answeredAt] of items) {
          pacedOpened.set(id, answeredAt);
          pacedSent.set(id, sentAt);
        }
        const p0 = Math.min(...items.map((x) => x[1]));
        const pacedDeadline = Date.now() + 120_000;
        while ([...pacedOpened.keys()].some((id) => !arrivals.has(id)) && Date.now() < pacedDeadline) await new Promise((r) => setTimeout(r, 20));
        const got = [...pacedOpened.keys()].filter((id) => arrivals.has(id));
        result.paced = {
          achieved: pacedTotal / ((Math.max(...[...pacedSent.values()]) - p0) / 1000),
          answered: pacedTotal / ((Math.max(...[...pacedOpened.values()]) - p0) / 1000),
          got: got.length,
          total: pacedTotal,
          lat: got.map((id) => arrivals.get(id)! - pacedOpened.get(id)!),
          fromSend: got.map((id) => arrivals.get(id)! - pacedSent.get(id)!),
          fromOpened: got.map((id) => arrivals.get(id)! - receiver.openedAt.get(id)!),
        };
      }

      // Burst: deliveries held until the BAA is signed, then released at once. Measures the
      // dispatcher's own rate (release → timer → signed POST → attempt recorded), without the open path.
      // The delivery log lists at most 1000 (newest first), which is how the bench sees them all held.
      if (burst > 0) {
        const h = await app.tenant({ baa: false });
        const hp = await app.api.put(`/organizations/${h.orgId}/plan`, { monthlyCredits: 10_000_000 }, h.staff);
        if (hp.status !== 200) throw new Error(`plan: ${hp.status}`);
        const hep = await app.api.post(`${h.env}/webhook-endpoints`, { url: receiver.url, events: ['clinical_case.opened'] }, h.staff);
        if (hep.status !== 201) throw new Error(`endpoint: ${hep.status} ${hep.text}`);
        const heldIds: string[] = [];
        let n = 0;
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (n < burst) {
              n++;
              const cmd: OpenClinicalCaseCommand = {
                requestId: randomUUID(),
                organizationId: h.orgId,
                environmentId: h.sandbox,
                patientId: randomUUID(),
                source: 'staff_chat',
                priority: 'urgent',
                patientNotes: '',
                symptomScores: {},
                matchedRules: ['staff_request:chat'],
                stoppedEarly: false,
                internalNote: 'Please call the patient back about the medication',
                actor: `staff:${h.ownerSub}`,
              };
              const r = await lastValueFrom(bus.send<OpenClinicalCaseReply>(Patterns.openClinicalCase, cmd));
              heldIds.push(r.caseId);
            }
          }),
        );
        // Every delivery exists (held) before the BAA is signed.
        const until = Date.now() + 120_000;
        const heldCount = async () => {
          // The held deliveries' list, a page (at most 200) at a time.
          let n = 0;
          let cursor: string | null = null;
          do {
            const q: string = `?status=held&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
            const list = await app.api.get(`${h.env}/webhook-endpoints/${hep.body.id}/deliveries${q}`, h.staff);
            if (list.status !== 200 || !Array.isArray(list.body?.deliveries)) return n;
            n += list.body.deliveries.length;
            cursor = list.body.nextCursor as string | null;
          } while (cursor);
          return n;
        };
        for (;;) {
          if ((await heldCount()) >= burst) break;
          if (Date.now() > until) throw new Error('held deliveries did not appear');
          await new Promise((r) => setTimeout(r, 50));
        }
        await receiver.setSecret(hep.body.secret);
        const profile = process.argv.includes('--profile-burst') ? await startProfile('burst') : null;
        const rc1 = await receiver.cpuMicros();
        const c1 = process.cpuUsage();
        const b1 = now();
        const baa = await app.api.post(`/organizations/${h.orgId}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, h.staff);
        if (baa.status !== 201) throw new Error(`baa: ${baa.status} ${baa.text}`);
        const deadline2 = Date.now() + 120_000;
        while (heldIds.some((id) => !arrivals.has(id)) && Date.now() < deadline2) await new Promise((r) => setTimeout(r, 10));
        const c2 = process.cpuUsage(c1);
        const b2 = now();
        const rc2 = await receiver.cpuMicros();
        const got = heldIds.filter((id) => arrivals.has(id));
        result.burst = {
          // CPU time / wall time of the burst window (until the bench saw the last arrival): 1.0 = one core busy.
          serviceCpu: (c2.user + c2.system) / 1000 / (b2 - b1),
          receiverCpu: (rc2 - rc1) / 1000 / (b2 - b1),
          perS: got.length / ((Math.max(...got.map((id) => arrivals.get(id)!)) - b1) / 1000),
          delivered: got.length,
          latency: got.map((id) => arrivals.get(id)! - b1),
          profile: profile ? await profile() : undefined,
        };
      }
      await receiver.sync();
      result.bad = receiver.bad();
      results.push(result);
    }
  } finally {
    await app.stop();
    for (const r of receivers) await r.close();
    await opener.close();
  }

  console.log(
    `webhook delivery bench: ${cases} cases, concurrency ${concurrency}, node ${process.version}, receivers: ${receivers.map((r) => r.name).join(', ')} (in that order), open requests from ${openClient === 'child' ? 'a child process' : 'this process'}`,
  );
  console.log(`  baseline  open cases, no endpoint                ${f(openOnlyPerS)} cases/s`);
  for (const r of results) {
    console.log(`receiver: ${r.receiver}`);
    console.log(`  baseline  signed POST loop → receiver            ${f(r.baselinePerS)} req/s`);
    console.log(
      `  measured  open + deliver (end to end)            ${f(r.perS)} deliveries/s  (${r.delivered}/${cases} delivered; opens took ${f(r.opensTookS)} s)`,
    );
    console.log(
      `  latency   201 of open → webhook received          p50 ${f(pct(r.latencies, 50))} ms  p95 ${f(pct(r.latencies, 95))} ms  p99 ${f(pct(r.latencies, 99))} ms  max ${f(Math.max(...r.latencies))} ms`,
    );
    if (r.paced) {
      const p = r.paced;
      console.log(
        `  paced     ${rate} cases/s for ${pacedSeconds} s (sent at ${f(p.achieved)}/s, 201s at ${f(p.answered)}/s): ${p.got}/${p.total} delivered (target p99 < 100 ms)`,
      );
      console.log(
        `  latency   case opened (event createdAt) → received p50 ${f(pct(p.fromOpened, 50))} ms  p99 ${f(pct(p.fromOpened, 99))} ms  max ${f(Math.max(...p.fromOpened))} ms  (createdAt: the service clock when the open was decided, ms)`,
      );
      console.log(
        `  latency   201 of open → webhook received          p50 ${f(pct(p.lat, 50))} ms  p99 ${f(pct(p.lat, 99))} ms  max ${f(Math.max(...p.lat))} ms`,
      );
      console.log(
        `  latency   open request sent → webhook received    p50 ${f(pct(p.fromSend, 50))} ms  p99 ${f(pct(p.fromSend, 99))} ms  max ${f(Math.max(...p.fromSend))} ms  (an upper bound: includes the open request itself)`,
      );
    }
    if (r.burst) {
      const b = r.burst;
      console.log(`  measured  burst: ${burst} held deliveries released by the BAA signature   ${f(b.perS)} deliveries/s  (${b.delivered}/${burst} delivered)`);
      console.log(
        `  latency   BAA signed → webhook received           p50 ${f(pct(b.latency, 50))} ms  p99 ${f(pct(b.latency, 99))} ms  max ${f(Math.max(...b.latency))} ms`,
      );
      console.log(
        `  cpu       burst window, CPU time / wall time: service process ${b.serviceCpu.toFixed(2)}${Number.isNaN(b.receiverCpu) ? ' (receiver included)' : `, receiver process ${b.receiverCpu.toFixed(2)}`} (1.00 = one core)`,
      );
      if (b.profile) console.log(`  cpu profile of the burst window: ${b.profile}`);
    }
    console.log(`  bad signatures at this receiver (baseline included): ${r.bad}`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
