/**
 * Webhook delivery throughput and opened-to-delivered latency, against the standalone app
 * (in-process, real HTTP, SQLite) and a real receiver on 127.0.0.1 that verifies every signature.
 *
 *   npm run build && node dist/bench/webhooks-delivery.js [--cases 500] [--concurrency 16] [--burst 500]
 *
 * Workload: staff `POST E/clinical-cases` (case-ledger) with `--concurrency` callers until
 * `--cases` cases are open; each `clinical_case.opened` goes case-ledger relay → bus →
 * dispatcher → delivery stream → timer → signed POST. Figures:
 *   - deliveries/s: cases delivered / (first open request → last delivery received);
 *   - opened-to-delivered latency: 201 of the open request → the receiver has the webhook (p50/p95/p99);
 *   - baseline in the same run: the same receiver fed by a plain signed-fetch loop with the same
 *     concurrency (what the HTTP path alone can do), and the open requests alone (cases/s with no endpoint).
 *   - burst (--burst N, default = --cases, 0 to skip): N cases opened for an organization without a
 *     BAA (their deliveries are held; opened by the case-ledger's bus command, since before the BAA
 *     no patient can be enrolled and a staff case needs a known patient), then the BAA is signed and the N deliveries go out at once:
 *     deliveries/s from the BAA request to the last webhook received (the dispatcher's own rate).
 *     --profile-burst writes a CPU profile of that window alone.
 * A benchmark, not a test: never in CI.
 */
process.env.SVC_LOG_LEVEL ??= 'warn';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { lastValueFrom } from 'rxjs';
import { TestApp } from '@svc/testing';
import { BUS_CLIENT, OpenClinicalCaseCommand, OpenClinicalCaseReply, Patterns } from '@svc/messaging';
import { signWebhook, verifyWebhook } from '@svc/security';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const f = (x: number) => x.toFixed(1);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

/** --profile-burst: a CPU profile of the burst window only (node:inspector), written to the cwd. */
async function startProfile(): Promise<() => Promise<string>> {
  const { Session } = await import('node:inspector');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) => session.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));
  await post('Profiler.enable');
  await post('Profiler.start');
  return async () => {
    const { profile } = await post('Profiler.stop');
    const file = `burst-${Date.now()}.cpuprofile`;
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    return file;
  };
}

async function main() {
  const cases = arg('cases', 500);
  const concurrency = arg('concurrency', 16);
  let secret = '';
  const arrivals = new Map<string, number>();
  let bad = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const rawBody = Buffer.concat(chunks);
      try {
        const env = await verifyWebhook<{ caseId?: string }>({ rawBody, headers: req.headers as Record<string, string>, secret, seen: null, toleranceSec: 3600 });
        const key = env.data.caseId ?? env.id;
        if (!arrivals.has(key)) arrivals.set(key, performance.now());
      } catch {
        bad++;
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const receiverUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;

  // Baseline 1: signed POSTs straight to the receiver, same concurrency, same body size.
  secret = 'whsec_baseline';
  const sample = JSON.stringify({ id: randomUUID(), type: 'clinical_case.opened', createdAt: new Date().toISOString(), data: { caseId: 'x', patientNotes: 'y'.repeat(200) } });
  let sent = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < cases) {
        sent++;
        const id = randomUUID();
        const body = sample.replace(/"id":"[^"]+"/, `"id":"${id}"`).replace('"caseId":"x"', `"caseId":"${id}"`);
        const ts = Math.floor(Date.now() / 1000);
        await fetch(receiverUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'x-svc-event-id': id, 'x-svc-event-type': 'clinical_case.opened', 'x-svc-timestamp': String(ts), 'x-svc-signature': signWebhook(secret, ts, body), 'idempotency-key': id }, body }).then((r) => r.arrayBuffer());
      }
    }),
  );
  const baselinePerS = cases / ((performance.now() - t0) / 1000);
  arrivals.clear();

  const app = await new TestApp().start();
  try {
    // Baseline 2: opening cases with no endpoint subscribed (the case path alone).
    const t = await app.tenant();
    // Staff cases need a patient the environment knows.
    const patients = await Promise.all(Array.from({ length: concurrency }, () => app.enrolledPatient(t)));
    const open = async (n: number, onOpened?: (caseId: string, at: number) => void) => {
      let opened = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async (_, c) => {
          while (opened < n) {
            opened++;
            const r = await app.api.post(`${t.env}/clinical-cases`, { patientId: patients[c].patientId, request: 'Please call the patient back about the medication' }, t.staff);
            if (r.status !== 201) throw new Error(`open: ${r.status} ${r.text}`);
            onOpened?.(r.body.caseId, performance.now());
          }
        }),
      );
    };
    const plan = await app.api.put(`/organizations/${t.orgId}/plan`, { monthlyCredits: 10_000_000 }, t.staff);
    if (plan.status !== 200) throw new Error(`plan: ${plan.status}`);
    const b0 = performance.now();
    await open(cases);
    const openOnlyPerS = cases / ((performance.now() - b0) / 1000);

    // The measured run: an endpoint subscribed to clinical_case.opened.
    const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url: receiverUrl, events: ['clinical_case.opened'] }, t.staff);
    if (ep.status !== 201) throw new Error(`endpoint: ${ep.status} ${ep.text}`);
    secret = ep.body.secret;
    const openedAt = new Map<string, number>();
    const s0 = performance.now();
    await open(cases, (id, at) => openedAt.set(id, at));
    const openedDone = performance.now();
    const deadline = Date.now() + 120_000;
    while ([...openedAt.keys()].some((id) => !arrivals.has(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const delivered = [...openedAt.keys()].filter((id) => arrivals.has(id));
    const last = Math.max(...delivered.map((id) => arrivals.get(id)!));
    const latencies = delivered.map((id) => arrivals.get(id)! - openedAt.get(id)!);
    const perS = delivered.length / ((last - s0) / 1000);

    // Paced: cases opened at a steady --rate per second (default 200, the target's condition) for
    // --paced-seconds, open loop (each open starts on schedule, whether or not earlier ones answered).
    const rate = arg('rate', 200);
    const pacedSeconds = arg('paced-seconds', 5);
    const pacedOpened = new Map<string, number>();
    const pacedSent = new Map<string, number>();
    const pacedTotal = rate * pacedSeconds;
    if (pacedTotal > 0) {
      const p0 = performance.now();
      const pending: Promise<void>[] = [];
      for (let i = 0; i < pacedTotal; i++) {
        const due = p0 + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const sentAt = performance.now();
        pending.push(
          app.api.post(`${t.env}/clinical-cases`, { patientId: patients[i % patients.length].patientId, request: 'Please call the patient back about the medication' }, t.staff).then((r) => {
            if (r.status !== 201) throw new Error(`open: ${r.status} ${r.text}`);
            pacedOpened.set(r.body.caseId, performance.now());
            pacedSent.set(r.body.caseId, sentAt);
          }),
        );
      }
      await Promise.all(pending);
      const pacedDeadline = Date.now() + 120_000;
      while ([...pacedOpened.keys()].some((id) => !arrivals.has(id)) && Date.now() < pacedDeadline) await new Promise((r) => setTimeout(r, 20));
      const got = [...pacedOpened.keys()].filter((id) => arrivals.has(id));
      const lat = got.map((id) => arrivals.get(id)! - pacedOpened.get(id)!);
      const fromSend = got.map((id) => arrivals.get(id)! - pacedSent.get(id)!);
      const achieved = pacedTotal / ((Math.max(...[...pacedSent.values()]) - p0) / 1000);
      console.log(`  paced     ${rate} cases/s for ${pacedSeconds} s (sent at ${f(achieved)}/s): ${got.length}/${pacedTotal} delivered (target p99 < 100 ms)`);
      console.log(`  latency   201 of open → webhook received          p50 ${f(pct(lat, 50))} ms  p99 ${f(pct(lat, 99))} ms  max ${f(Math.max(...lat))} ms`);
      console.log(`  latency   open request sent → webhook received    p50 ${f(pct(fromSend, 50))} ms  p99 ${f(pct(fromSend, 99))} ms  max ${f(Math.max(...fromSend))} ms  (an upper bound: includes the open request itself)`);
    }

    // Burst: deliveries held until the BAA is signed, then released at once. Measures the
    // dispatcher's own rate (release → timer → signed POST → attempt recorded), without the open path.
    // The delivery log lists at most 1000 (newest first), which is how the bench sees them all held.
    const burst = Math.min(arg('burst', cases), 1000);
    let burstPerS = NaN;
    let burstDelivered = 0;
    let burstLatency: number[] = [];
    if (burst > 0) {
      const h = await app.tenant({ baa: false });
      const hp = await app.api.put(`/organizations/${h.orgId}/plan`, { monthlyCredits: 10_000_000 }, h.staff);
      if (hp.status !== 200) throw new Error(`plan: ${hp.status}`);
      const hep = await app.api.post(`${h.env}/webhook-endpoints`, { url: receiverUrl, events: ['clinical_case.opened'] }, h.staff);
      if (hep.status !== 201) throw new Error(`endpoint: ${hep.status} ${hep.text}`);
      const heldIds: string[] = [];
      const bus = (app as unknown as { app: { get<T>(t: unknown): T } }).app.get<{ send<R>(p: string, d: unknown): import('rxjs').Observable<R> }>(BUS_CLIENT);
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
      for (;;) {
        const list = await app.api.get(`${h.env}/webhook-endpoints/${hep.body.id}/deliveries?limit=1000`, h.staff);
        const items = list.body?.deliveries as { status: string }[];
        if (Array.isArray(items) && items.filter((d) => d.status === 'held').length >= burst) break;
        if (Date.now() > until) throw new Error('held deliveries did not appear');
        await new Promise((r) => setTimeout(r, 50));
      }
      secret = hep.body.secret;
      const profile = process.argv.includes('--profile-burst') ? await startProfile() : null;
      const b1 = performance.now();
      const baa = await app.api.post(`/organizations/${h.orgId}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, h.staff);
      if (baa.status !== 201) throw new Error(`baa: ${baa.status} ${baa.text}`);
      const deadline2 = Date.now() + 120_000;
      while (heldIds.some((id) => !arrivals.has(id)) && Date.now() < deadline2) await new Promise((r) => setTimeout(r, 10));
      const got = heldIds.filter((id) => arrivals.has(id));
      burstDelivered = got.length;
      burstPerS = got.length / ((Math.max(...got.map((id) => arrivals.get(id)!)) - b1) / 1000);
      burstLatency = got.map((id) => arrivals.get(id)! - b1);
      if (profile) console.log(`  cpu profile of the burst window: ${await profile()}`);
    }

    console.log(`webhook delivery bench: ${cases} cases, concurrency ${concurrency}, node ${process.version}`);
    console.log(`  baseline  signed POST loop → receiver            ${f(baselinePerS)} req/s`);
    console.log(`  baseline  open cases, no endpoint                ${f(openOnlyPerS)} cases/s`);
    console.log(`  measured  open + deliver (end to end)            ${f(perS)} deliveries/s  (${delivered.length}/${cases} delivered, ${bad} bad signatures; opens took ${f((openedDone - s0) / 1000)} s)`);
    console.log(`  latency   201 of open → webhook received          p50 ${f(pct(latencies, 50))} ms  p95 ${f(pct(latencies, 95))} ms  p99 ${f(pct(latencies, 99))} ms  max ${f(Math.max(...latencies))} ms`);
    if (burst > 0) {
      console.log(`  measured  burst: ${burst} held deliveries released by the BAA signature   ${f(burstPerS)} deliveries/s  (${burstDelivered}/${burst} delivered, ${bad} bad signatures in all)`);
      console.log(`  latency   BAA signed → webhook received           p50 ${f(pct(burstLatency, 50))} ms  p99 ${f(pct(burstLatency, 99))} ms  max ${f(Math.max(...burstLatency))} ms`);
    }
  } finally {
    await app.stop();
    server.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
