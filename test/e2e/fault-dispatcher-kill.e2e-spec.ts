import { WebhookArrival, eventually, faultSuite, subscribedTenant } from '@svc/testing';

/**
 * Issue 21, fault tests: kill -9 a webhook-dispatcher replica (`SVC_REPLICAS=webhook-dispatcher=2`;
 * `webhook-dispatcher-1` in the command's output) during a burst of deliveries; the command starts
 * it again. The receiver answers slowly, and 500 to the first attempt of every other event, so
 * attempts are in flight and retries are due when the replica dies. The dev clock is moved past the
 * attempt lease (60 s of service time), 35 s at a time, so that attempts the dead replica held are
 * taken over.
 *
 * Every opened case is delivered; each case's attempts carry one event id and the same signed
 * body; no two attempts of one event are at the receiver at the same time (no attempt sent by two
 * replicas at once); and an event answered 2xx is sent again only if that answer came just before
 * the kill, when the dead replica may not have recorded it (at least once, never more otherwise).
 */
const BURST = 30;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault: a webhook-dispatcher replica killed during a burst of deliveries', () => {
  let seen = 0;
  const firstFails = new Map<string, boolean>();
  const suite = faultSuite('fault-dispatcher-kill', {
    env: { SVC_REPLICAS: 'webhook-dispatcher=2' },
    receiver: {
      delayMs: 300,
      answer: (eventId, nth) => {
        if (!firstFails.has(eventId)) firstFails.set(eventId, seen++ % 2 === 1);
        return nth === 1 && firstFails.get(eventId) ? 500 : 200;
      },
    },
  });
  const { receiver } = suite;

  it('every opened case is delivered, retries keep the event id, no attempt is sent by two replicas at once', async () => {
    const api = suite.topology.api;
    expect([...suite.topology.pids.keys()].filter((k) => k.startsWith('webhook-dispatcher')).sort()).toEqual(['webhook-dispatcher-1', 'webhook-dispatcher-2']);
    const { t, patientId } = await subscribedTenant(suite, ['clinical_case.opened']);

    // The burst: cases opened six at a time (a 503 tried again, as a client does).
    const opened: string[] = [];
    const openOne = async () => {
      for (let attempt = 1; attempt <= 10; attempt++) {
        const r = await api.post(`${t.env}/clinical-cases`, { patientId, request: 'Please call the patient back (canary-staff-note)' }, t.staff);
        if (r.status === 201) return void opened.push(r.body.caseId);
        if (r.status !== 503) throw new Error(`open: ${r.status} ${r.text}`);
        await sleep(500);
      }
      throw new Error('open: 503 ten times');
    };
    const burst = (async () => {
      for (let i = 0; i < BURST; i += 6) await Promise.all(Array.from({ length: 6 }, openOne));
    })();
    // Killed once deliveries are under way.
    await eventually(() => receiver.arrivals.length >= 6, 60_000, 'deliveries under way');
    const mark = suite.topology.output.length;
    const killedAt = Date.now();
    suite.topology.kill9('webhook-dispatcher-1');
    await burst;
    await suite.topology.waitFor(/distributed: webhook-dispatcher-1\s+pid (\d+)\s+ready again/, 90_000, mark);

    // Retries and leases run on the service clock: moved 35 s every 2 s until all are delivered, so the
    // dead replica's leases (60 s) expire after two moves, while a live attempt (300 ms) never sees
    // more than one move: a jump past the whole lease would let another sender take a lease whose
    // attempt is still in flight, which the lease allows by design.
    const delivered = () => new Set(receiver.arrivals.filter((a) => a.status >= 200 && a.status < 300).map((a) => String(a.body.data?.caseId)));
    await eventually(
      async () => {
        if (opened.every((id) => delivered().has(id))) return true;
        await api.post('/dev/clock', { advanceSeconds: 35 });
        await sleep(2000);
        return false;
      },
      120_000,
      `every opened case delivered (${opened.filter((id) => !delivered().has(id)).length} of ${opened.length} not)`,
      0,
    );
    await sleep(3000);

    const byCase = new Map<string, WebhookArrival[]>();
    for (const a of receiver.arrivals) byCase.set(String(a.body.data?.caseId), [...(byCase.get(String(a.body.data?.caseId)) ?? []), a]);
    expect([...byCase.keys()].sort()).toEqual([...opened].sort());
    const problems: string[] = [];
    for (const [caseId, list] of byCase) {
      // One event id and the same signed body on every attempt.
      if (new Set(list.map((a) => a.eventId)).size !== 1) problems.push(`${caseId}: event ids ${[...new Set(list.map((a) => a.eventId))]}`);
      if (new Set(list.map((a) => a.raw)).size !== 1) problems.push(`${caseId}: bodies differ between attempts`);
      // Never two attempts at once.
      const sorted = [...list].sort((a, b) => a.at - b.at);
      for (let i = 1; i < sorted.length; i++)
        if (sorted[i].at < (sorted[i - 1].answeredAt || Infinity)) problems.push(`${caseId}: attempt ${i + 1} arrived while attempt ${i} was in flight`);
      // Sent again after a 2xx only when that 2xx was answered just before the kill (the dead replica may not have recorded it).
      const firstOk = sorted.find((a) => a.status >= 200 && a.status < 300);
      const after = firstOk ? sorted.filter((a) => a.at > firstOk.answeredAt) : [];
      if (firstOk && after.length && !(firstOk.answeredAt >= killedAt - 2000 && firstOk.answeredAt <= killedAt + 1000))
        problems.push(`${caseId}: sent ${after.length} more time(s) after it was answered 200`);
    }
    // What each problem case's attempts looked like (times from the kill, status, answer time).
    const timeline = (id: string) =>
      (byCase.get(id) ?? []).map((a) => `${a.at - killedAt}ms:${a.status}:${a.answeredAt - a.at}ms:${a.headers['x-svc-delivery-id'] ?? ''}`).join(' ');
    expect(problems.map((p) => `${p} [${timeline(p.slice(0, 36))}]`)).toEqual([]);
    // Every case marked transportDelivered (the deliveries relayed by the dispatchers, consumed by the case-ledger).
    await eventually(
      async () => {
        for (const id of opened) if ((await api.get(`/v1/clinical-cases/${id}/progress`, t.apiKey)).body?.transportDelivered !== true) return false;
        return true;
      },
      60_000,
      'every opened case marked transportDelivered',
      1000,
    );
    const retried = [...byCase.values()].filter((l) => l.length > 1).length;
    expect(retried).toBeGreaterThan(0);
    process.stdout.write(
      `fault-dispatcher-kill: ${opened.length} cases, ${receiver.arrivals.length} attempts, ${retried} cases with more than one attempt; killed after ${receiver.arrivals.filter((a) => a.at < killedAt).length} arrivals\n`,
    );
  }, 300_000);
});
