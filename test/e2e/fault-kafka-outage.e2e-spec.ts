import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { DistributedTopology, OwnKafka, WebhookReceiver, appExits, enrollPatient, eventually, topologyTenant } from '@svc/testing';

/**
 * Issue 21, fault tests: the Kafka broker stopped for ten seconds and started again under a steady
 * load of writes through the gateway. The topology runs on a broker of this suite's own (its own
 * state dir and ports, scripts/kafka.js), so stopping it disturbs no other suite.
 *
 * The load: case updates (API key; case-ledger's read model), acknowledgements (staff; relayed as
 * clinical_case.acknowledged, delivered as webhooks by the webhook-dispatcher) and new cases (staff;
 * the case-ledger asks the patient-pathway over Kafka first, so those are refused with 503 while
 * the broker is down; each one opened is relayed, delivered as a webhook, and the delivery,
 * relayed by the dispatcher, marks the case transportDelivered in the case-ledger).
 *
 * Then: no app was restarted; every write answered 2xx (during the outage too) has its effect once
 * the broker is back (progress, webhook, transportDelivered); each webhook event id reached the
 * receiver once, and each case's opened webhook once.
 */
const OUTAGE_MS = 10_000;

type Phase = 'before' | 'outage' | 'after';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault: the Kafka broker stopped for ten seconds under load', () => {
  const kafka = new OwnKafka(1);
  const receiver = new WebhookReceiver();
  let topology: DistributedTopology;

  beforeAll(async () => {
    await Promise.all([kafka.start(), receiver.start()]);
    topology = new DistributedTopology({ KAFKA_BROKERS: kafka.brokers });
    await topology.start(150_000);
  }, 200_000);

  afterAll(async () => {
    await topology?.stop();
    await topology?.cleanup().catch(() => undefined);
    await receiver.stop();
    await kafka.destroy();
  }, 90_000);

  it('apps carry on without a restart, no acknowledged write is lost, and nothing is delivered twice', async () => {
    const api = topology.api;
    const t = await topologyTenant(topology);
    const ep = await api.post(`${t.env}/webhook-endpoints`, { url: receiver.url, events: ['clinical_case.opened', 'clinical_case.acknowledged'] }, t.staff);
    expect([ep.status, ep.text]).toEqual([201, expect.any(String)]);
    const { patientId } = await enrollPatient(api, t);
    const open = () => api.post(`${t.env}/clinical-cases`, { patientId, request: 'Please review the medication plan (canary-staff-note)' }, t.staff);
    // Cases opened before the outage: six take updates, the others are acknowledged one by one.
    const opened: { caseId: string; phase: Phase }[] = [];
    for (let i = 0; i < 40; i += 8) {
      const batch = await Promise.all(Array.from({ length: 8 }, open));
      for (const r of batch) {
        expect([r.status, r.text]).toEqual([201, expect.any(String)]);
        opened.push({ caseId: r.body.caseId, phase: 'before' });
      }
    }
    const pidsBefore = new Map(topology.pids);

    let phase: Phase = 'before';
    let running = true;
    const refused: Record<Phase, number> = { before: 0, outage: 0, after: 0 };
    const fails = (status: number) => {
      // 503 (with Retry-After) is the one acceptable refusal: the client tries again.
      if (status !== 503) throw new Error(`unexpected answer ${status} during the load`);
      refused[phase]++;
    };

    // Updates: each worker takes its cases in turn; an update not answered 200 is sent again as it was (same updateId).
    const updateCases = opened.slice(0, 6).map((o) => o.caseId);
    const acked = new Map<string, { sequence: number; externalReference: string; phase: Phase }>();
    const updater = async (cases: string[]) => {
      const seq = new Map(cases.map((c) => [c, 0]));
      const pending = new Map<string, object>();
      while (running) {
        for (const caseId of cases) {
          const next = seq.get(caseId)! + 1;
          const body = pending.get(caseId) ?? {
            updateId: randomUUID(),
            sequence: next,
            status: next === 1 ? 'processed' : next % 2 ? 'patient_contacted' : 'clinician_responded',
            externalReference: `ref-${next}-${randomUUID()}`,
          };
          pending.set(caseId, body);
          const r = await api.post(`/v1/clinical-cases/${caseId}/updates`, body, t.apiKey);
          if (r.status === 200) {
            seq.set(caseId, next);
            pending.delete(caseId);
            acked.set(caseId, { sequence: next, externalReference: (body as { externalReference: string }).externalReference, phase });
          } else fails(r.status);
          await sleep(100);
        }
      }
    };
    // Acknowledgements, one case after the other; a refused one is tried again.
    const toAck = opened.slice(6).map((o) => o.caseId);
    const acknowledged: { caseId: string; phase: Phase }[] = [];
    const acker = async () => {
      while (running && toAck.length) {
        const r = await api.post(`${t.env}/clinical-cases/${toAck[0]}/acknowledge`, undefined, t.staff);
        if (r.status === 200) acknowledged.push({ caseId: toAck.shift()!, phase });
        else fails(r.status);
        await sleep(1000);
      }
    };
    // New cases: refused while the patient lookup cannot reach the patient-pathway over Kafka.
    const opener = async () => {
      while (running) {
        const r = await open();
        if (r.status === 201) opened.push({ caseId: r.body.caseId, phase });
        else fails(r.status);
        await sleep(1000);
      }
    };
    const load = Promise.all([updater(updateCases.slice(0, 3)), updater(updateCases.slice(3)), acker(), opener()]);
    load.catch(() => (running = false)); // awaited below, where its failure fails the test

    await sleep(5000);
    phase = 'outage';
    await kafka.stop();
    await sleep(OUTAGE_MS);
    await kafka.start();
    phase = 'after';
    // Recovery: a case needing a Kafka round trip is opened again within 60 s of the broker's return.
    const back = opened.length;
    await eventually(() => opened.length > back, 60_000, 'a case opened after the broker came back');
    await sleep(3000);
    running = false;
    await load;

    // Writes were acknowledged while the broker was down (else the test proved nothing).
    const duringOutage = [...acked.values()].filter((a) => a.phase === 'outage').length + acknowledged.filter((a) => a.phase === 'outage').length;
    expect(duringOutage).toBeGreaterThan(0);

    // Every acknowledged write has its effect once the broker is back.
    await eventually(
      async () => {
        for (const [caseId, a] of acked) {
          const p = await api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey);
          if (p.status !== 200 || p.body.sequence !== a.sequence || p.body.externalReference !== a.externalReference) return false;
        }
        return true;
      },
      30_000,
      'every acknowledged update in the progress',
    );
    const openedIds = opened.map((o) => o.caseId);
    const ackIds = acknowledged.map((a) => a.caseId);
    await eventually(
      () => openedIds.every((id) => receiver.caseIds('clinical_case.opened').includes(id)) && ackIds.every((id) => receiver.caseIds('clinical_case.acknowledged').includes(id)),
      90_000,
      `every opened and acknowledged case delivered as a webhook (missing opened: ${openedIds.filter((id) => !receiver.caseIds('clinical_case.opened').includes(id)).length}, acknowledged: ${ackIds.filter((id) => !receiver.caseIds('clinical_case.acknowledged').includes(id)).length})`,
    );
    await eventually(
      async () => {
        for (const id of openedIds) {
          const p = await api.get(`/v1/clinical-cases/${id}/progress`, t.apiKey);
          if (p.body?.transportDelivered !== true) return false;
        }
        return true;
      },
      60_000,
      'every opened case marked transportDelivered (the dispatcher delivery events consumed by the case-ledger)',
    );

    // Nothing twice: a few seconds more for any late duplicate, then each event id once, each case's webhooks once.
    await sleep(5000);
    expect(receiver.duplicates()).toEqual({});
    const openedArrivals = receiver.caseIds('clinical_case.opened');
    expect(openedArrivals.length).toBe(new Set(openedArrivals).size);
    expect(new Set(openedArrivals)).toEqual(new Set(openedIds));
    const ackArrivals = receiver.caseIds('clinical_case.acknowledged');
    expect(ackArrivals.length).toBe(new Set(ackArrivals).size);
    expect(new Set(ackArrivals)).toEqual(new Set(ackIds));

    // No app was restarted: same pids, no exit reported.
    expect(appExits(topology)).toEqual([]);
    expect(new Map(topology.pids)).toEqual(pidsBefore);

    // What the topic carried (at least once): the event ids the case-ledger's relay published more than once.
    const republished = await topicDuplicates(kafka.brokers, 'svc.case-ledger.events');
    process.stdout.write(
      `fault-kafka-outage: writes acknowledged during the outage ${duringOutage}, refused with 503 ${JSON.stringify(refused)}, ` +
        `cases opened ${openedIds.length}, acknowledged ${ackIds.length}, webhooks ${receiver.arrivals.length}; case events on the topic more than once: ${republished}\n`,
    );
  }, 240_000);
});

/** How many event ids a topic carries more than once (its whole log read by a group of the test's own). */
async function topicDuplicates(brokers: string, topic: string): Promise<number> {
  const client = new Kafka({ clientId: 'fault-test', brokers: brokers.split(','), logLevel: logLevel.NOTHING });
  const admin = client.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const total = ends.reduce((n, p) => n + Number(p.high), 0);
  const consumer = client.consumer({ groupId: `fault-test-${randomUUID()}` });
  const counts = new Map<string, number>();
  let seen = 0;
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      seen++;
      const id = message.headers?.['event-id']?.toString() ?? '';
      counts.set(id, (counts.get(id) ?? 0) + 1);
    },
  });
  await eventually(() => seen >= total, 30_000, `reading ${total} records of ${topic}`);
  await consumer.disconnect();
  return [...counts.values()].filter((n) => n > 1).length;
}
