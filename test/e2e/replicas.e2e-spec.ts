import { randomUUID } from 'node:crypto';
import { DistributedTopology } from '@svc/testing';

/**
 * Two replicas of case-ledger behind one gateway (`npm run start:distributed -- --replicas
 * case-ledger=2`, here through SVC_REPLICAS), on Kafka (KAFKA_BROKERS: the test command starts the
 * local broker), PostgreSQL and Redis, with a database, a Redis key prefix and a data dir of its
 * own (docs/decisions.md, "Replicas"): requests through the gateway reach both replicas; one
 * replica killed by its pid (SIGKILL) under a steady update load leaves its routes served by the
 * other: no gateway 503 for a request sent once the kill was noticed, and no 503 at all once the
 * killed replica's leases moved (docs/scaling.md: a write waits up to 5 s for its read model, whose
 * projection may have run in the killed replica); the command starts it again on its port, and it
 * takes requests again.
 */
const brokers = process.env.KAFKA_BROKERS;

/** The status of a case's update number `sequence`: processed first, then two others in turn. */
const statusOf = (sequence: number) => (sequence === 1 ? 'processed' : sequence % 2 ? 'patient_contacted' : 'clinician_responded');

interface Sent {
  startedAt: number;
  status: number;
  /** The 503's message: the gateway's (no replica reached) or the app's (not yet visible). */
  message?: string;
}

/** The gateway's 503 when no replica of the app took the request (libs/platform/src/gateway-proxy.ts). */
const GATEWAY_UNAVAILABLE = 'This part of the service is not reachable right now; retry the same request shortly';
/**
 * Longest a killed replica's leases take to move (docs/scaling.md: ttl 5 s + one renewal, 1 s)
 * plus a write's wait for its read model (5 s, then the app's own 503 "not yet visible"), and a
 * margin for a loaded machine.
 */
const LEASE_TAKEOVER_MS = 15_000;

describe('two replicas of case-ledger behind the gateway', () => {
  // Its request lines name the replica that served each request: the apps log to the topology's output (SVC_LOG_FILE ''), handed to the run's log file at stop.
  const topology = new DistributedTopology({ ...(brokers ? { KAFKA_BROKERS: brokers } : {}), SVC_REPLICAS: 'case-ledger=2', SVC_LOG_FILE: '' });
  let apiKey: string;
  let cases: string[] = [];

  beforeAll(async () => {
    await topology.start(200_000);
    const api = topology.api;
    const staff = await topology.staffToken('owner-replicas');
    const org = await api.post('/organizations', { name: 'Replica Clinic' }, staff);
    expect(org.status).toBe(201);
    const envId = org.body.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    const env = `/organizations/${org.body.id}/environments/${envId}`;
    expect((await api.post(`/organizations/${org.body.id}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, staff)).status).toBe(201);
    apiKey = (await api.post(`${env}/api-keys`, { name: 'replicas' }, staff)).body.key as string;
    const protocol = await api.post(
      `${env}/protocols`,
      {
        programKey: 'replicas',
        name: 'Replicas',
        defaultCadenceDays: 30,
        questions: [{ key: 'pain', text: 'How bad is your pain today?', type: 'scale', min: 0, max: 10 }],
        redFlags: { emergencyTerms: true },
      },
      staff,
    );
    expect((await api.post(`${env}/protocols/${protocol.body.id}/activate`, undefined, staff)).status).toBe(200);
    const patient = await api.post(
      '/client/patient-events',
      {
        eventId: randomUUID(),
        type: 'patient.created',
        externalPatientId: `ext-${randomUUID()}`,
        email: `patient-${randomUUID()}@example.test`,
        firstName: 'Rep',
        lastName: 'Lica',
        programKey: 'replicas',
      },
      apiKey,
    );
    expect(patient.status).toBe(202);
    // Each staff case asks patient-pathway over Kafka from whichever replica took it: the answer
    // must come back to that replica (its own reply partition), else the open would time out.
    cases = [];
    for (let i = 0; i < 8; i++) {
      const opened = await api.post(`${env}/clinical-cases`, { patientId: patient.body.patientId, request: `Please call the patient back (${i})` }, staff);
      expect([opened.status, opened.text]).toEqual([201, expect.any(String)]);
      cases.push(opened.body.caseId as string);
    }
  }, 240_000);

  afterAll(async () => {
    await topology.stop();
    await topology.cleanup();
  }, 60_000);

  /** Request ids of the app's request log lines (after `from` in the output) by instance. */
  function servedBy(from: number): Map<string, number> {
    const counts = new Map<string, number>();
    for (const line of topology.output.slice(from).split('\n')) {
      if (!line.startsWith('{') || !line.includes('"msg":"request"') || !line.includes('"service":"case-ledger"')) continue;
      const instance = /"instance":"([^"]+)"/.exec(line)?.[1] ?? '?';
      counts.set(instance, (counts.get(instance) ?? 0) + 1);
    }
    return counts;
  }

  it('started one process per replica, each with its port, and lists them in the state file', () => {
    expect([...topology.pids.keys()].sort()).toEqual([
      'case-ledger-1',
      'case-ledger-2',
      'conversation',
      'gateway',
      'patient-pathway',
      'webhook-dispatcher',
      'workflow-engine',
    ]);
    const ledgers = topology.instances().filter((i) => i.app === 'case-ledger');
    expect(ledgers.map((i) => [i.instance, i.pid, i.state])).toEqual([
      ['case-ledger-1', topology.pids.get('case-ledger-1'), 'ready'],
      ['case-ledger-2', topology.pids.get('case-ledger-2'), 'ready'],
    ]);
    expect(new Set(ledgers.map((i) => i.port)).size).toBe(2);
  });

  it('the two replicas are one consumer group: each topic the app consumes has its partitions split between them', async () => {
    const { Kafka, AssignerProtocol, logLevel } = await import('kafkajs');
    const admin = new Kafka({
      clientId: 'replicas-e2e',
      brokers: (/^distributed: kafka (\S+) \(/m.exec(topology.output)?.[1] ?? brokers ?? '').split(','),
      logLevel: logLevel.NOTHING,
    }).admin();
    await admin.connect();
    try {
      let members: Record<string, number[]>[] = [];
      for (const until = Date.now() + 60_000; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
        const group = (await admin.describeGroups(['case-ledger-server'])).groups[0];
        if (group.state !== 'Stable' || group.members.length !== 2) continue;
        members = group.members.map((m) => AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment ?? {});
        break;
      }
      expect(members).toHaveLength(2);
      const topics = [...new Set(members.flatMap((m) => Object.keys(m)))];
      expect(topics.length).toBeGreaterThan(0);
      for (const topic of topics) {
        const [a, b] = members.map((m) => m[topic] ?? []);
        expect({ topic, a: a.length > 0, b: b.length > 0, shared: a.filter((p) => b.includes(p)) }).toEqual({ topic, a: true, b: true, shared: [] });
      }
    } finally {
      await admin.disconnect();
    }
  });

  it('requests through the gateway reach both replicas', async () => {
    const mark = topology.output.length;
    for (let i = 0; i < 30; i++) {
      const r = await topology.api.get(`/v1/clinical-cases/${cases[i % cases.length]}/progress`, apiKey);
      expect(r.status).toBe(200);
    }
    // The apps' log lines reach the command's output a moment after their answers.
    await new Promise((r) => setTimeout(r, 500));
    const counts = servedBy(mark);
    expect(counts.get('case-ledger-1')).toBeGreaterThan(3);
    expect(counts.get('case-ledger-2')).toBeGreaterThan(3);
  });

  it('one replica killed by its pid under a steady update load: the other serves its routes with no gateway 503 once the kill is noticed (none at all once its leases moved), no acknowledged update is lost, and the killed one comes back', async () => {
    const api = topology.api;
    const sequence = new Map(cases.map((c) => [c, 0]));
    const sent: Sent[] = [];
    let stop = false;
    // One writer per case, each update in sequence; an update answered 503 is sent again as it was
    // (same updateId), as a client does on Retry-After.
    const writers = cases.map(async (caseId) => {
      let pending: { updateId: string; sequence: number; status: string } | null = null;
      while (!stop) {
        const next = sequence.get(caseId)! + 1;
        pending ??= { updateId: randomUUID(), sequence: next, status: statusOf(next) };
        const startedAt = performance.now();
        const r = await api.post(`/v1/clinical-cases/${caseId}/updates`, { ...pending, externalReference: `ext-${pending.sequence}` }, apiKey);
        sent.push({ startedAt, status: r.status, ...(r.status === 503 ? { message: r.body?.message as string } : {}) });
        if (r.status === 200) {
          sequence.set(caseId, pending.sequence);
          pending = null;
        } else {
          expect([r.status, r.headers.get('retry-after')]).toEqual([503, '1']);
          await new Promise((res) => setTimeout(res, 50));
        }
      }
    });
    await new Promise((r) => setTimeout(r, 3000));
    const mark = topology.output.length;
    const killedAt = performance.now();
    const killed = topology.kill9('case-ledger-1');
    // Noticed: the gateway's first refused connection to it (or its stale heartbeat), bounded here.
    const noticedBy = killedAt + 1000;
    await new Promise((r) => setTimeout(r, LEASE_TAKEOVER_MS + 3000));
    const afterKill = sent.filter((s) => s.startedAt >= noticedBy);
    expect(afterKill.length).toBeGreaterThan(20);
    // Nothing the gateway could not place: every request after the kill reached the other replica.
    expect(afterKill.filter((s) => s.status === 503 && s.message === GATEWAY_UNAVAILABLE)).toEqual([]);
    // The other replica answers all of them once the killed one's leases (its projections) moved.
    expect(afterKill.filter((s) => s.status !== 200 && s.startedAt >= killedAt + LEASE_TAKEOVER_MS)).toEqual([]);
    expect(afterKill.filter((s) => s.status !== 200 && s.message !== 'Accepted but not yet visible; retry with the same request')).toEqual([]);

    // Started again on its port; then it takes requests again.
    await topology.waitFor(/distributed: case-ledger-1\s+pid (\d+)\s+ready again/, 120_000, mark);
    expect(topology.pids.get('case-ledger-1')).not.toBe(killed);
    const back = topology.output.length;
    for (let until = Date.now() + 30_000; Date.now() < until && !servedBy(back).get('case-ledger-1');) await new Promise((r) => setTimeout(r, 250));
    stop = true;
    await Promise.all(writers);
    expect(servedBy(back).get('case-ledger-1')).toBeGreaterThan(0);
    // The gateway's 503 only for requests on their way before the kill was noticed (at most one per writer).
    const unplaced = sent.filter((s) => s.status === 503 && s.message === GATEWAY_UNAVAILABLE);
    expect(unplaced.filter((s) => s.startedAt >= noticedBy)).toEqual([]);
    expect(unplaced.length).toBeLessThanOrEqual(cases.length);

    // Every acknowledged update is in the progress of its case.
    for (const caseId of cases) {
      const p = await api.get(`/v1/clinical-cases/${caseId}/progress`, apiKey);
      expect([caseId, p.status, p.body.sequence]).toEqual([caseId, 200, sequence.get(caseId)]);
    }
  }, 240_000);
});
