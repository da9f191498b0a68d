import { randomUUID } from 'node:crypto';
import { InProcessBroker, Patterns, Topics } from '@svc/messaging';
import { IN_PROCESS_BROKER } from '@svc/platform';
import { inProcess, TestApp } from '@svc/testing';
import { WebhookReceiver, until } from '../../apps/webhook-dispatcher/test/receiver';
import { Tenant, TopicWatch, eventually, watchTopic } from './case-helpers';

/** Decisions "Staff cases need a known patient": `POST E/clinical-cases` only for a patient of that environment. */
describe('staff cases need a patient the environment knows (e2e, real HTTP)', () => {
  const app = new TestApp();
  const receiver = new WebhookReceiver();
  let caseEvents: TopicWatch;
  beforeAll(async () => {
    await receiver.start();
    await app.start();
    caseEvents = await watchTopic(app, Topics.caseEvents);
  });
  afterAll(async () => {
    await caseEvents.stop();
    await app.stop();
    await receiver.stop();
  });

  const open = (t: { env: string; staff: string }, patientId: string) =>
    app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Please call the patient about the dizziness' }, t.staff);
  const cases = async (t: Tenant) => (await app.api.get(`${t.env}/clinical-cases`, t.staff)).body.clinicalCases as { caseId: string; patientId: string }[];

  async function endpoint(t: Tenant, path: string) {
    const r = await app.api.post(`${t.env}/webhook-endpoints`, { url: receiver.script(path, [200]), events: ['clinical_case.opened'] }, t.staff);
    expect(r.status).toBe(201);
    return r.body.id as string;
  }
  const deliveries = async (t: Tenant, endpointId: string) =>
    (await app.api.get(`${t.env}/webhook-endpoints/${endpointId}/deliveries`, t.staff)).body.deliveries as { eventId: string; status: string }[];

  it('an unknown patientId is 404 NOT_FOUND and nothing is written: no case, no event, no webhook delivery', async () => {
    const t = await app.tenant();
    const ep = await endpoint(t, '/unknown-patient');
    const unknown = randomUUID();
    const r = await open(t, unknown);
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ code: 'NOT_FOUND', message: 'Patient not found' });
    expect(await cases(t)).toEqual([]);

    // A case for a known patient afterwards: once its delivery exists, the refused one would have had
    // its own by then; there is exactly one, and one opened event in this environment.
    const { patientId } = await app.enrolledPatient(t);
    const ok = await open(t, patientId);
    expect(ok.status).toBe(201);
    const list = await until(
      async () => {
        const d = await deliveries(t, ep);
        return d.length >= 1 && d.every((x) => x.status === 'delivered') ? d : null;
      },
      10_000,
      'the known patient case delivered',
    );
    expect(list).toHaveLength(1);
    expect((await cases(t)).map((c) => c.caseId)).toEqual([ok.body.caseId]);
    // (On the topology the watch consumer may get the event after the dispatcher delivered it.)
    await eventually(
      async () => caseEvents.seen.some((m) => m.type === 'clinical_case.opened' && m.data.caseId === ok.body.caseId),
      (v) => v,
    );
    const opened = caseEvents.seen.filter((m) => m.type === 'clinical_case.opened' && m.metadata.environmentId === t.sandbox);
    expect(opened.map((m) => m.data.patientId)).toEqual([patientId]);
    expect(receiver.on('/unknown-patient')).toHaveLength(1);
  });

  it("another environment's patient is 404: the other environment of the organization, and another organization", async () => {
    const t = await app.tenant();
    const { patientId } = await app.enrolledPatient(t);
    const production = { env: `/organizations/${t.orgId}/environments/${t.production}`, staff: t.staff };
    const crossEnv = await open(production, patientId);
    expect([crossEnv.status, crossEnv.body.code]).toEqual([404, 'NOT_FOUND']);
    expect((await app.api.get(`${production.env}/clinical-cases`, t.staff)).body.clinicalCases).toEqual([]);

    const other = await app.tenant();
    const crossOrg = await open(other, patientId);
    expect([crossOrg.status, crossOrg.body.code]).toEqual([404, 'NOT_FOUND']);
    expect(await cases(other)).toEqual([]);

    expect((await open(t, patientId)).status).toBe(201);
  });

  it('a patient whose pathway was cancelled is still known: 201', async () => {
    const t = await app.tenant();
    const { patientId, externalPatientId } = await app.enrolledPatient(t);
    const cancelled = await app.api.post('/client/patient-events', { eventId: randomUUID(), type: 'patient.cancelled', externalPatientId }, t.apiKey);
    expect(cancelled.status).toBe(202);
    const r = await open(t, patientId);
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ caseId: expect.any(String), reference: expect.stringMatching(/^CC-/), priority: 'urgent' });
    expect((await cases(t)).map((c) => c.caseId)).toEqual([r.body.caseId]);
  });

  inProcess('takes the patient-pathway handler off the in-process broker')(
    'the patient-pathway not answering is 503 UNAVAILABLE with retry-after: 1, and nothing is written',
    async () => {
      const t = await app.tenant();
      const { patientId } = await app.enrolledPatient(t);
      const broker = (app as unknown as { app: { get<T>(token: unknown): T } }).app.get<InProcessBroker>(IN_PROCESS_BROKER);
      const handlers = (broker as unknown as { requestHandlers: Map<string, unknown> }).requestHandlers;
      const handler = handlers.get(Patterns.patientContact);
      expect(handler).toBeDefined();
      handlers.delete(Patterns.patientContact); // no handler: the bus answers an error at once
      try {
        const r = await open(t, patientId);
        expect(r.status).toBe(503);
        expect(r.body.code).toBe('UNAVAILABLE');
        expect(r.headers.get('retry-after')).toBe('1');
      } finally {
        handlers.set(Patterns.patientContact, handler);
      }
      expect(await cases(t)).toEqual([]);
      expect((await open(t, patientId)).status).toBe(201);
    },
  );
});
