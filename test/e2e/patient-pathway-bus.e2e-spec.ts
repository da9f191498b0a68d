import { randomUUID } from 'node:crypto';
import { inProcess, onTopology, TestApp } from '@svc/testing';
import { BrokerMessage, IntegrationMessage, Patterns, ReplyPacket, Topics } from '@svc/messaging';
import { IN_PROCESS_BROKER, MAILER, Mailer } from '@svc/platform';
import { CheckInsService } from '../../apps/patient-pathway/src/application/check-ins.service';
import { DAY, created, emailsTo, link, setUpTenant, sleep, waitForEmails } from '../../apps/patient-pathway/test/e2e-helpers';
import { eventually, watchTopic } from './case-helpers';

/**
 * Issue 3: the pathway's side of the bus, over real HTTP. The broker's `request` is wrapped at the
 * transport to stand for a billing service that says "paused" and a case-ledger that is down: the
 * messages still go through the app's real in-process broker (those tests run on standalone only).
 */

describe('patient pathway on the bus (e2e)', () => {
  const app = new TestApp();
  type Broker = {
    request(pattern: string, data: unknown, onReply: (p: ReplyPacket) => void, options?: unknown): () => void;
    subscribe(pattern: string, handler: (m: BrokerMessage) => unknown): () => void;
  };
  let broker: Broker;
  let original: Broker['request'];
  const overrides = new Map<string, (data: unknown) => ReplyPacket>();
  const requests: { pattern: string; data: unknown }[] = [];

  beforeAll(async () => {
    await app.start();
    // The tests that stand in for billing or the case-ledger (inProcess) wrap the in-process broker.
    if (onTopology()) return;
    broker = (app as unknown as { app: { get(t: unknown): Broker } }).app.get(IN_PROCESS_BROKER);
    original = broker.request.bind(broker);
    broker.request = (pattern, data, onReply, options) => {
      const raw = data as { json?: unknown };
      requests.push({ pattern, data: typeof raw?.json === 'string' ? JSON.parse(raw.json) : JSON.parse(JSON.stringify(data)) });
      const o = overrides.get(pattern);
      if (o) {
        setImmediate(() => onReply(o(data)));
        return () => undefined;
      }
      return original(pattern, data, onReply, options);
    };
  });
  afterAll(async () => {
    if (broker) broker.request = original;
    await app.stop();
  });

  it('emits check_in.sent on the pathway topic, once per check-in', async () => {
    const { seen, stop } = await watchTopic(app, Topics.pathwayEvents);
    try {
      const t = await setUpTenant(app);
      const email = `relay-${randomUUID()}@example.test`;
      const p = await app.api.post('/client/patient-events', created('EXT-RELAY', email, { checkInCadenceDays: 1 }), t.apiKey);
      await app.advanceClock(DAY + 60);
      const [mail] = await waitForEmails(app.api, email, 1);
      const { checkInId } = link(mail.text);
      await eventually(
        async () => seen.some((m) => m.data && (m.data as { checkInId: string }).checkInId === checkInId),
        (v) => v,
      );
      // Anything published after it for this check-in would be here within the next moment.
      await sleep(500);
      const mine = seen.filter((m) => (m.data as { checkInId: string }).checkInId === checkInId);
      expect(mine).toHaveLength(1);
      expect(mine[0].type).toBe('check_in.sent');
      expect(mine[0].data).toEqual({ organizationId: t.orgId, environmentId: t.sandbox, checkInId, patientId: p.body.patientId, sentAt: mail.sentAt });
      expect(mine[0].metadata).toMatchObject({ organizationId: t.orgId, environmentId: t.sandbox, eventId: expect.any(String) });
    } finally {
      await stop();
    }
  });

  inProcess('wraps the mailer and runs the dispatcher inside the process')(
    'a check-in goes out once: one mailer call and one check_in.sent, also with several dispatchers at once (S3)',
    async () => {
      const nest = (app as unknown as { app: { get(t: unknown): unknown } }).app;
      const mailer = nest.get(MAILER) as Mailer;
      const checkIns = nest.get(CheckInsService) as CheckInsService;
      const originalSend = mailer.send.bind(mailer);
      const sends = new Map<string, number>();
      mailer.send = (message, sentAt) => {
        sends.set(message.id, (sends.get(message.id) ?? 0) + 1);
        return originalSend(message, sentAt);
      };
      const seen: IntegrationMessage[] = [];
      const off = broker.subscribe(Topics.pathwayEvents, (m) => void seen.push(m.data as IntegrationMessage));
      try {
        const t = await setUpTenant(app);
        const email = `once-${randomUUID()}@example.test`;
        const p = await app.api.post('/client/patient-events', created('EXT-ONCE', email, { checkInCadenceDays: 1 }), t.apiKey);
        // Scheduled: the timer fires, and three more dispatchers race it (two ticks, two replicas).
        await app.advanceClock(DAY + 60);
        const until = Date.now() + 3000;
        let checkInId: string | undefined;
        while (!checkInId && Date.now() < until) {
          const { events } = await checkIns['pathway'].patients.load(`patient-pathway-patient-${p.body.patientId}`);
          checkInId = (events.find((e) => e.type === 'CheckInSent')?.data as { checkInId?: string } | undefined)?.checkInId;
          if (!checkInId) await sleep(20);
        }
        expect(checkInId).toBeDefined();
        await Promise.all([1, 2, 3].map(() => checkIns.dispatch({ id: checkInId!, patientId: p.body.patientId, dueAt: '' })));
        // Staff "send now" too: the dispatch timer is its only sending path.
        const now = await app.api.post(`${t.env}/patients/${p.body.patientId}/check-ins`, undefined, await app.staffToken({ sub: t.ownerSub }));
        expect(now.status).toBe(201);
        await Promise.all([1, 2].map(() => checkIns.dispatch({ id: now.body.checkInId, patientId: p.body.patientId, dueAt: '' })));
        expect(await waitForEmails(app.api, email, 2)).toHaveLength(2);
        await sleep(1500);
        for (const id of [checkInId!, now.body.checkInId]) {
          expect({ id, mailed: sends.get(`check-in-${id}`) }).toEqual({ id, mailed: 1 });
          expect({ id, published: seen.filter((m) => m.type === 'check_in.sent' && (m.data as { checkInId: string }).checkInId === id).length }).toEqual({
            id,
            published: 1,
          });
          const stream = await checkIns.checkIns.load(`patient-pathway-checkin-${id}`);
          expect(stream.events.filter((e) => e.type === 'check_in.sent')).toHaveLength(1);
          expect(stream.events.filter((e) => e.type === 'CheckInSendClaimed')).toHaveLength(1);
        }
      } finally {
        off();
        mailer.send = originalSend;
      }
    },
  );

  inProcess('stands in for billing on the in-process broker')(
    'reserves the credit with billing before a scheduled check-in and skips it (rescheduling the next) while usage is paused',
    async () => {
      const t = await setUpTenant(app);
      const email = `paused-${randomUUID()}@example.test`;
      const patient = (await app.api.post('/client/patient-events', created('EXT-PAUSED', email, { checkInCadenceDays: 2 }), t.apiKey)).body.patientId;
      overrides.set(Patterns.reserveCredit, () => ({ response: { reserved: false }, isDisposed: true }));
      try {
        await app.advanceClock(2 * DAY + 60);
        await sleep(800);
        // The credit of the check-in about to be sent is asked for (its id as the source).
        expect(
          requests.some(
            (r) =>
              r.pattern === Patterns.reserveCredit &&
              (r.data as { organizationId: string; source: string; sourceId: string }).organizationId === t.orgId &&
              (r.data as { source: string }).source === 'check_in',
          ),
        ).toBe(true);
        expect(await emailsTo(app.api, email)).toHaveLength(0);
        // Staff "send now" while paused: 409 USAGE_PAUSED.
        const now = await app.api.post(`${t.env}/patients/${patient}/check-ins`, undefined, await app.staffToken({ sub: t.ownerSub }));
        expect(now.status).toBe(409);
        expect(now.body.code).toBe('USAGE_PAUSED');
      } finally {
        overrides.delete(Patterns.reserveCredit);
      }
      // Not paused any more: the next cadence sends it.
      await app.advanceClock(2 * DAY + 60);
      expect(await waitForEmails(app.api, email, 1)).toHaveLength(1);
    },
  );

  inProcess('stands in for a case-ledger that is down on the in-process broker')(
    'keeps a completion when the case-ledger is down and opens the case later (requestId = checkInId)',
    async () => {
      const t = await setUpTenant(app);
      const email = `down-${randomUUID()}@example.test`;
      const p = await app.api.post('/client/patient-events', created('EXT-DOWN', email, { checkInCadenceDays: 1 }), t.apiKey);
      await app.advanceClock(DAY + 60);
      const [mail] = await waitForEmails(app.api, email, 1);
      const { checkInId, token } = link(mail.text);
      await app.api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 9 });

      overrides.set(Patterns.openClinicalCase, () => ({ err: { status: 503, code: 'NO_HANDLER', message: 'down' }, isDisposed: true }));
      let done;
      try {
        done = await app.api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token });
      } finally {
        overrides.delete(Patterns.openClinicalCase);
      }
      expect(done.status).toBe(200);
      expect(done.body).toEqual({ outcome: 'case_opened' });
      const sent = requests.filter((r) => r.pattern === Patterns.openClinicalCase && (r.data as { requestId: string }).requestId === checkInId);
      expect(sent.length).toBeGreaterThanOrEqual(1);
      expect(sent[0].data).toEqual({
        requestId: checkInId,
        organizationId: t.orgId,
        environmentId: t.sandbox,
        patientId: p.body.patientId,
        source: 'check_in',
        priority: 'urgent',
        patientNotes: null,
        symptomScores: { pain: 9 },
        matchedRules: ['score:urgent:pain>=7'],
        stoppedEarly: false,
        actor: `patient:${p.body.patientId}`,
      });

      // The retry timer opens it once the case-ledger answers again.
      const staff = await app.staffToken({ sub: t.ownerSub });
      const until = Date.now() + 15000;
      let cases: { patientId: string; priority: string }[] = [];
      while (Date.now() < until) {
        await app.advanceClock(1);
        cases = (await app.api.get(`${t.env}/clinical-cases`, staff)).body.clinicalCases;
        if (cases.some((c) => c.patientId === p.body.patientId)) break;
        await sleep(250);
      }
      expect(cases.filter((c) => c.patientId === p.body.patientId)).toEqual([expect.objectContaining({ priority: 'urgent' })]);
    },
  );

  inProcess('stands in for the case-ledger on the in-process broker and reads the check-in stream inside the process')(
    'stops retrying a case the case-ledger refuses with a 4xx, and records the failure (M1)',
    async () => {
      const t = await setUpTenant(app);
      const email = `refused-${randomUUID()}@example.test`;
      await app.api.post('/client/patient-events', created('EXT-REFUSED', email, { checkInCadenceDays: 1 }), t.apiKey);
      await app.advanceClock(DAY + 60);
      const [mail] = await waitForEmails(app.api, email, 1);
      const { checkInId, token } = link(mail.text);
      await app.api.post(`/widget/v1/check-ins/${checkInId}/answers`, { token, questionKey: 'pain', value: 9 });
      overrides.set(Patterns.openClinicalCase, () => ({ err: { status: 400, code: 'VALIDATION_FAILED', message: 'refused' }, isDisposed: true }));
      const asked = () => requests.filter((r) => r.pattern === Patterns.openClinicalCase && (r.data as { requestId: string }).requestId === checkInId).length;
      try {
        const done = await app.api.post(`/widget/v1/check-ins/${checkInId}/complete`, { token });
        expect(done.body).toEqual({ outcome: 'case_opened' });
        // The retry timer tries once more, sees a permanent refusal and stops.
        for (let i = 0; i < 6; i++) {
          await app.advanceClock(6);
          await sleep(300);
        }
        const after = asked();
        expect(after).toBeLessThanOrEqual(3);
        for (let i = 0; i < 4; i++) {
          await app.advanceClock(6);
          await sleep(300);
        }
        expect(asked()).toBe(after);
        const nest = (app as unknown as { app: { get(t: unknown): unknown } }).app;
        const { events } = await (nest.get(CheckInsService) as CheckInsService).checkIns.load(`patient-pathway-checkin-${checkInId}`);
        expect(events.filter((e) => e.type === 'CaseOpenFailed').map((e) => e.data)).toEqual([
          expect.objectContaining({ status: 400, code: 'VALIDATION_FAILED' }),
        ]);
      } finally {
        overrides.delete(Patterns.openClinicalCase);
      }
    },
  );
});
