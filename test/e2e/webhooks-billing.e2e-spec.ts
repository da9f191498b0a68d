import { randomUUID } from 'node:crypto';
import { TestApp, enrollPatient } from '@svc/testing';
import { EventStore } from '@svc/eventstore';
import { IntegrationMessage, Topics } from '@svc/messaging';
import { periodStartOf, usageStream } from '../../apps/webhook-dispatcher/src/domain/usage';
import { eventStoreOf, eventually, publishEvent } from './case-helpers';

/** Credits are charged to the month of the fact (the source event's recordedAt), not of its processing. */
describe('webhook-dispatcher credits (e2e)', () => {
  const app = new TestApp();
  let store: EventStore;

  beforeAll(async () => {
    await app.start();
    store = await eventStoreOf(app);
  });
  afterAll(() => app.stop());

  const serviceNow = async () => new Date(await app.advanceClock(0));
  const credits = async (orgId: string, at: Date) =>
    (await store.readStream(usageStream(orgId, periodStartOf(at))))
      .filter((e) => e.type === 'CreditUsed')
      .map((e) => e.data as { source: string; sourceId: string; periodStart: string });
  /** The credits of the month once `ok` holds (events published on the bus are charged when the dispatcher has consumed them). */
  const creditsWhen = (orgId: string, at: Date, ok: (c: Awaited<ReturnType<typeof credits>>) => boolean) => eventually(() => credits(orgId, at), ok);

  it('a payment notice delivered late (occurredAt before the one that set the status) changes nothing; a later one does', async () => {
    const t = await app.tenant();
    const bill = (eventId: string, type: string, occurredAt: Date) =>
      app.api.post(`/organizations/${t.orgId}/billing-events`, { eventId, type, occurredAt: occurredAt.toISOString() }, t.staff);
    const now = await serviceNow();
    expect((await bill('in_paid', 'payment_succeeded', now)).body).toEqual({ eventId: 'in_paid', duplicate: false, subscriptionStatus: 'active' });
    const yesterday = new Date(now.getTime() - 86_400_000);
    expect((await bill('in_failed_yesterday', 'payment_failed', yesterday)).body).toEqual({
      eventId: 'in_failed_yesterday',
      duplicate: false,
      subscriptionStatus: 'active',
    });
    // Every ISO 8601 offset form is read as the instant it names: yesterday at +02, +0200, lower-case t/z.
    const iso = yesterday.toISOString().slice(0, 19);
    for (const [id, occurredAt] of [
      ['in_f_plus02', `${iso}+02`],
      ['in_f_plus0200', `${iso}+0200`],
      ['in_f_lower', `${iso.replace('T', 't')}z`],
    ]) {
      const r = await app.api.post(`/organizations/${t.orgId}/billing-events`, { eventId: id, type: 'payment_failed', occurredAt }, t.staff);
      expect({ id, status: r.status, subscriptionStatus: r.body.subscriptionStatus }).toEqual({ id, status: 202, subscriptionStatus: 'active' });
    }
    expect((await bill('in_failed_later', 'payment_failed', new Date(now.getTime() + 1000))).body.subscriptionStatus).toBe('grace_period');
  });

  it('check-ins sent at the same moment cannot together go past the plan: 8 at once with 3 credits left send 3, the rest 409 USAGE_PAUSED', async () => {
    const t = await app.tenant();
    expect((await app.api.put(`/organizations/${t.orgId}/plan`, { monthlyCredits: 3 }, t.staff)).status).toBe(200);
    const patient = await enrollPatient(app.api, t);
    const sends = await Promise.all(Array.from({ length: 8 }, () => app.api.post(`${t.env}/patients/${patient.patientId}/check-ins`, undefined, t.staff)));
    expect(sends.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409, 409, 409, 409]);
    for (const r of sends.filter((x) => x.status === 409)) expect(r.body.code).toBe('USAGE_PAUSED');
    const sent = sends.filter((r) => r.status === 201).map((r) => r.body.checkInId as string);
    // The credits are the three check-ins sent, each once (the check_in.sent event that follows counts nothing more).
    const now = await serviceNow();
    await new Promise((r) => setTimeout(r, 300));
    expect((await credits(t.orgId, now)).map((c) => c.sourceId).sort()).toEqual([...sent].sort());
    const plan = await app.api.put(`/organizations/${t.orgId}/plan`, { monthlyCredits: 3 }, t.staff); // answers the usage status
    expect(plan.body).toMatchObject({ monthlyCredits: 3, creditsUsed: 3, paused: true });
  });

  it('a send-now refused for a cancelled patient (409 OUT_OF_ORDER) uses no credit', async () => {
    const t = await app.tenant();
    expect((await app.api.put(`/organizations/${t.orgId}/plan`, { monthlyCredits: 3 }, t.staff)).status).toBe(200);
    const patient = await enrollPatient(app.api, t);
    const cancelled = await app.api.post(
      '/client/patient-events',
      { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId: patient.externalPatientId },
      t.apiKey,
    );
    expect(cancelled.status).toBeLessThan(300);
    for (let i = 0; i < 3; i++) {
      const r = await app.api.post(`${t.env}/patients/${patient.patientId}/check-ins`, undefined, t.staff);
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 'OUT_OF_ORDER' });
    }
    expect(await credits(t.orgId, await serviceNow())).toEqual([]);
  });

  it('a clinical_case.opened redelivered after the month rolled over is not charged again (one credit, in the source month)', async () => {
    const t = await app.tenant();
    const opened = await serviceNow();
    const caseId = randomUUID();
    const message: IntegrationMessage = {
      type: 'clinical_case.opened',
      data: {
        caseId,
        patientId: randomUUID(),
        priority: 'urgent',
        source: 'check_in',
        patientNotes: null,
        symptomScores: {},
        matchedRules: [],
        stoppedEarly: false,
        handoff: { progressPath: '', updatesPath: '', messagesPath: '' },
      },
      metadata: {
        eventId: randomUUID(),
        correlationId: randomUUID(),
        causationId: null,
        organizationId: t.orgId,
        environmentId: t.sandbox,
        actor: 'system',
        recordedAt: opened.toISOString(),
      },
      streamId: `case-ledger-case-${caseId}`,
      position: 1,
    };
    await publishEvent(app, Topics.caseEvents, message);
    expect(await creditsWhen(t.orgId, opened, (c) => c.length > 0)).toEqual([
      expect.objectContaining({ source: 'clinical_case', sourceId: caseId, periodStart: periodStartOf(opened) }),
    ]);

    await app.advanceClock(32 * 86_400);
    const later = await serviceNow();
    expect(periodStartOf(later)).not.toBe(periodStartOf(opened));
    // The relay redelivers the same message (at least once) in the next month; then another case
    // opened this month, on the same stream key: consumed after the redelivery, charged to this month.
    await publishEvent(app, Topics.caseEvents, message);
    const next = randomUUID();
    await publishEvent(app, Topics.caseEvents, {
      ...message,
      data: { ...(message.data as object), caseId: next },
      metadata: { ...message.metadata, eventId: randomUUID(), recordedAt: later.toISOString() },
      position: 2,
    });
    expect((await creditsWhen(t.orgId, later, (c) => c.length > 0)).map((c) => c.sourceId)).toEqual([next]);
    expect(await credits(t.orgId, opened)).toHaveLength(1);
  });

  it('a check-in sent and a workflow run started last month, processed this month, are charged to last month', async () => {
    const t = await app.tenant();
    const sentAt = await serviceNow();
    await app.advanceClock(32 * 86_400);
    const now = await serviceNow();
    const msg = (type: string, data: Record<string, unknown>): IntegrationMessage => ({
      type,
      data,
      metadata: {
        eventId: randomUUID(),
        correlationId: randomUUID(),
        causationId: null,
        organizationId: t.orgId,
        environmentId: t.sandbox,
        actor: 'system',
        recordedAt: sentAt.toISOString(),
      },
      streamId: `x-${randomUUID()}`,
      position: 1,
    });
    const checkInId = randomUUID();
    const runId = randomUUID();
    await publishEvent(
      app,
      Topics.pathwayEvents,
      msg('check_in.sent', { organizationId: t.orgId, environmentId: t.sandbox, checkInId, patientId: randomUUID(), sentAt: sentAt.toISOString() }),
    );
    await publishEvent(
      app,
      Topics.workflowEvents,
      msg('workflow_run.started', { organizationId: t.orgId, environmentId: t.sandbox, runId, workflowId: randomUUID(), startedAt: sentAt.toISOString() }),
    );
    expect((await creditsWhen(t.orgId, sentAt, (c) => c.length >= 2)).map((c) => c.sourceId).sort()).toEqual([checkInId, runId].sort());
    expect(await credits(t.orgId, now)).toEqual([]);
  });
});
