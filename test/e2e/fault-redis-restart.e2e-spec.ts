import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { Topics } from '@svc/messaging';
import { CaseLoad, DistributedTopology, OwnRedis, TestResponse, eventually, faultSuite, subscribedTenant, topologyTenant } from '@svc/testing';

/**
 * Issue 21, fault tests: the Redis read store restarted empty (SIGKILL, then a new redis-server on
 * the same port without persistence) while the suite.topology runs. The suite runs its own redis-server
 * on a free port (never the shared 127.0.0.1:6379) and its own Kafka broker.
 *
 * - The read models are rebuilt from the event store: every read answers what it answered before
 *   (case progress and detail, the staff case list, the organization, the webhook endpoints).
 * - While they are rebuilt (and while Redis is down) a read answers 200 with the right data or 503
 *   with Retry-After: never wrong data (a 404 or 401 for something that exists, a shorter list).
 * - The relays keep their position outside Redis: with the apps that relay (case-ledger,
 *   webhook-dispatcher) killed and restarted right after the rebuild, before anything new is
 *   written, nothing published before is published again (no event id twice on the
 *   integration-event topics), and no webhook is delivered twice.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Probe {
  name: string;
  read: () => Promise<TestResponse>;
  /** The part of a 200 answer that must not change. */
  view: (body: any) => unknown;
}

describe('fault: Redis restarted empty while the suite.topology runs', () => {
  const suite = faultSuite('fault-redis-restart', { redis: true });
  const { kafka, receiver } = suite;
  const redis = suite.redis as OwnRedis;
  // Shared by the three tests: the first restarts Redis, the next two look at what followed.
  let restarted = false;
  let state: {
    api: DistributedTopology['api'];
    t: Awaited<ReturnType<typeof topologyTenant>>;
    load: CaseLoad;
    progressed: string;
    patientId: string;
    eventsBefore: Map<string, number>;
    webhooksBefore: number;
  };

  /** Reads that answered neither the right data nor 503 with Retry-After (by phase, probe, status). */
  let wrongAnswers: [string, number][] | undefined;

  it('read models rebuild from the event store: every read answers as before once they are rebuilt', async () => {
    const api = suite.topology.api;
    const { t, patientId } = await subscribedTenant(suite);
    // History: cases opened, updated and acknowledged, everything delivered.
    const load = new CaseLoad(suite.topology, t, patientId, { updaters: 1, ackEveryMs: 200 });
    await load.prepare(6);
    load.start();
    await eventually(() => load.acknowledged.length >= 6 && [...load.acked.values()].every((a) => a.sequence >= 3), 60_000, 'the history written');
    await load.stop();
    await load.verify(receiver, 60_000, 1000);
    const caseIds = load.opened.map((o) => o.caseId);
    const progressed = [...load.acked.keys()][0];

    const probes: Probe[] = [
      {
        name: 'progress',
        read: () => api.get(`/v1/clinical-cases/${progressed}/progress`, t.apiKey),
        view: (b) => [b.sequence, b.status, b.externalReference, b.transportDelivered],
      },
      { name: 'case detail', read: () => api.get(`${t.env}/clinical-cases/${caseIds.at(-1)}`, t.staff), view: (b) => [b.caseId, b.status, b.acknowledgedAt] },
      {
        name: 'case list',
        read: () => api.get(`${t.env}/clinical-cases?limit=200`, t.staff),
        view: (b) => b.clinicalCases?.map((c: { caseId: string; status: string }) => `${c.caseId}:${c.status}`).sort(),
      },
      { name: 'organization', read: () => api.get(`/organizations/${t.orgId}`, t.staff), view: (b) => [b.id, b.name, b.environments?.length] },
      {
        name: 'webhook endpoints',
        read: () => api.get(`${t.env}/webhook-endpoints`, t.staff),
        view: (b) => b.webhookEndpoints?.map((e: { id: string }) => e.id),
      },
    ];
    const truth = new Map<string, string>();
    for (const p of probes) {
      const r = await p.read();
      expect([p.name, r.status]).toEqual([p.name, 200]);
      truth.set(p.name, JSON.stringify(p.view(r.body)));
    }
    expect(JSON.parse(truth.get('case list')!)).toHaveLength(caseIds.length);
    const eventsBefore = await topicRecords(kafka.brokers);
    const webhooksBefore = receiver.arrivals.length;
    state = { api, t, load, progressed, patientId, eventsBefore, webhooksBefore };

    // Probes run without pause through the restart and the rebuild; every answer is kept.
    const answers: { probe: string; status: number; retryAfter: string | null; right: boolean; phase: string }[] = [];
    let phase = 'before';
    let probing = true;
    const prober = (async () => {
      while (probing) {
        for (const p of probes) {
          const r = await p.read().catch((err: Error) => ({ status: 0, body: undefined, headers: new Headers(), text: err.message }) as TestResponse);
          answers.push({
            probe: p.name,
            status: r.status,
            retryAfter: r.headers.get('retry-after'),
            right: r.status === 200 && JSON.stringify(p.view(r.body)) === truth.get(p.name),
            phase,
          });
        }
        await sleep(50);
      }
    })();
    await sleep(1000);
    phase = 'redis down';
    await redis.kill9();
    restarted = true;
    await sleep(2000);
    phase = 'rebuild';
    await redis.start();
    // Rebuilt: every probe answers what it did before.
    await eventually(
      () => probes.every((p) => answers.filter((a) => a.probe === p.name && a.phase === 'rebuild').at(-1)?.right === true),
      90_000,
      'every read answering as before the restart',
    );
    await sleep(1000);
    probing = false;
    await prober;

    const wrong = answers.filter((a) => !a.right && !(a.status === 503 && a.retryAfter !== null));
    const summary = (list: typeof answers) =>
      Object.entries(
        list.reduce<Record<string, number>>((m, a) => ((m[`${a.phase}/${a.probe}/${a.status}`] = (m[`${a.phase}/${a.probe}/${a.status}`] ?? 0) + 1), m), {}),
      );
    process.stdout.write(`fault-redis-restart: answers ${JSON.stringify(summary(answers))}\n`);
    // Then the apps with relays restart (a deploy, a crash) before anything new was written: a relay
    // whose position was in the lost Redis would start over and publish the whole log again.
    const mark = suite.topology.output.length;
    suite.topology.kill9('case-ledger');
    suite.topology.kill9('webhook-dispatcher');
    await suite.topology.waitFor(/distributed: case-ledger\s+pid (\d+)\s+ready again/, 120_000, mark);
    await suite.topology.waitFor(/distributed: webhook-dispatcher\s+pid (\d+)\s+ready again/, 120_000, mark);
    wrongAnswers = summary(wrong);
  }, 400_000);

  // Between Redis coming back empty and the projections finding the loss, and while they rebuild,
  // the read-model gate answers 503 (libs/platform/src/read-model-gate.ts, docs/scaling.md "Read store loss").
  it('reads while Redis is down and the read models are rebuilt answer the right data or 503 with Retry-After, never wrong data', () => {
    expect(wrongAnswers).toEqual([]);
  });

  it('the service goes on after the rebuild: the next update of a case, a new case delivered once', async () => {
    expect(restarted).toBe(true);
    const { api, t, load, progressed, patientId } = state;
    const last = load.acked.get(progressed)!;
    const next = await api.post(
      `/v1/clinical-cases/${progressed}/updates`,
      { updateId: randomUUID(), sequence: last.sequence + 1, status: 'patient_contacted', externalReference: 'after-restart' },
      t.apiKey,
    );
    expect([next.status, next.body?.sequence]).toEqual([200, last.sequence + 1]);
    const after = new CaseLoad(suite.topology, t, patientId, { updaters: 1 });
    await after.prepare(1);
    await after.verify(receiver, 60_000, 3000);
  }, 120_000);

  it('relays did not publish history again: no earlier event id twice on the event topics, no webhook twice', async () => {
    expect(restarted).toBe(true);
    const { eventsBefore, webhooksBefore } = state;
    // Relays that lost their position would be publishing the log again by now.
    await sleep(5000);
    const eventsAfter = await topicRecords(kafka.brokers);
    const republished = [...eventsAfter].filter(([id, n]) => n > 1 && eventsBefore.has(id)).length;
    process.stdout.write(
      `fault-redis-restart: ${eventsBefore.size} events on the topics before, ${eventsAfter.size} after, ${republished} of the earlier ones published again; webhooks ${webhooksBefore} before, ${receiver.arrivals.length} after\n`,
    );
    expect(republished).toBe(0);
    expect(receiver.duplicates()).toEqual({});
  }, 60_000);
});

/** Every integration-event topic read from its start by a group of the test's own: how many records carry each event id. */
async function topicRecords(brokers: string): Promise<Map<string, number>> {
  const client = new Kafka({ clientId: 'fault-test', brokers: brokers.split(','), logLevel: logLevel.NOTHING });
  const topics = Object.values(Topics);
  const admin = client.admin();
  await admin.connect();
  let total = 0;
  for (const topic of topics) total += (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
  await admin.disconnect();
  const counts = new Map<string, number>();
  let seen = 0;
  const consumer = client.consumer({ groupId: `fault-test-${randomUUID()}` });
  await consumer.connect();
  await consumer.subscribe({ topics, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      seen++;
      const id = message.headers?.['event-id']?.toString() ?? '';
      counts.set(id, (counts.get(id) ?? 0) + 1);
    },
  });
  await eventually(() => seen >= total, 30_000, `reading ${total} records of the event topics`);
  await consumer.disconnect();
  return counts;
}
