import { randomUUID } from 'node:crypto';
import { TestApp } from '@svc/testing';
import { created, setUpTenant } from '../../apps/patient-pathway/test/e2e-helpers';
import { derivedUuid } from '../../apps/workflow-engine/src/application/runner.service';
import { identityToken } from './case-helpers';

/** B3/T3: the agent's cases and hand-offs reach the case ledger and the conversation service. */
describe('workflow agent cases and hand-offs (e2e)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<typeof setUpTenant>>;
  const ENROLLED = `EXT-WF-${randomUUID()}`;
  beforeAll(async () => {
    await app.start();
    t = await setUpTenant(app);
    const r = await app.api.post('/client/patient-events', created(ENROLLED, `wf-${randomUUID()}@example.test`, { programKey: 'post-op' }), t.apiKey);
    expect(r.status).toBeLessThan(300);
  });
  afterAll(() => app.stop());

  async function session(externalId: string | null): Promise<{ token: string; patientId: string | null }> {
    let signed: string | undefined;
    if (externalId) {
      const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff);
      signed = await identityToken(app, rotated.body.secret, externalId);
    }
    const r = await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, ...(signed ? { identityToken: signed } : {}) });
    expect(r.status).toBe(201);
    return { token: r.body.sessionToken, patientId: r.body.patientId };
  }

  async function live(stableKey: string, trigger: string, category: string) {
    const def = {
      category: 'support',
      description: 'Hand-off',
      triggerPhrases: [trigger],
      steps: [{ id: 'team', type: 'hand_off', message: 'I am passing this to the team.', summary: 'Asked for the team', category }],
    };
    const c = await app.api.post(`${t.env}/conversation-workflows`, { stableKey, name: stableKey, definition: def }, t.staff);
    expect(c.status).toBe(201);
    expect(
      (
        await app.api.post(
          `${t.env}/conversation-workflows/versions/${c.body.draftVersionId}/test`,
          { expectedRevision: 1, opening: trigger, replies: [] },
          t.staff,
        )
      ).body.passed,
    ).toBe(true);
    expect((await app.api.post(`${t.env}/conversation-workflows/versions/${c.body.draftVersionId}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(
      200,
    );
    return c.body;
  }

  it('an enrolled signed-in patient: emergency and health questions open cases, and the reply says the team was alerted', async () => {
    const s = await session(ENROLLED);
    expect(s.patientId).toEqual(expect.any(String));
    const e = await app.api.post('/widget/v1/messages', { message: 'I have chest pain' }, s.token);
    expect(e.status).toBe(201);
    expect(e.body).toMatchObject({ handedOff: true, caseReference: expect.any(String) });
    expect(e.body.replies[0].text).toMatch(/emergency/i);
    expect(e.body.replies[0].text).toMatch(/alerted your care team/);
    const h = await app.api.post('/widget/v1/messages', { message: 'what dose of my medication should I take?' }, s.token);
    expect(h.body).toMatchObject({ handedOff: true, caseReference: expect.any(String) });
    const cases = await app.api.get(`${t.env}/clinical-cases`, t.staff);
    const refs = cases.body.clinicalCases.map((c: { reference: string }) => c.reference);
    expect(refs).toEqual(expect.arrayContaining([e.body.caseReference, h.body.caseReference]));
  });

  it('an anonymous visitor gets emergency guidance without a claim that anyone was alerted; a signed-in but unknown patient is never asked to sign in', async () => {
    const anon = await session(null);
    const e = await app.api.post('/widget/v1/messages', { message: 'I have chest pain' }, anon.token);
    expect(e.body.handedOff).toBe(false);
    expect(e.body.replies[0].text).toMatch(/emergency/i);
    expect(e.body.replies[0].text).not.toMatch(/alerted/i);
    expect(e.body.caseReference).toBeUndefined();

    const unknown = await session(`EXT-NOT-ENROLLED-${randomUUID()}`);
    expect(unknown.patientId).toBeNull();
    const ue = await app.api.post('/widget/v1/messages', { message: 'I have chest pain' }, unknown.token);
    expect(ue.body.replies[0].text).not.toMatch(/alerted/i);
    const uh = await app.api.post('/widget/v1/messages', { message: 'what dose of my medication should I take?' }, unknown.token);
    expect(uh.body.handedOff).toBe(false);
    expect(uh.body.replies[0].text).not.toMatch(/sign in/i);
    expect(uh.body.replies[0].text).toMatch(/care team/);
  });

  it('a clinical hand-off opens a case for an enrolled patient', async () => {
    await live('nurse_line', 'talk to a nurse', 'clinical');
    const s = await session(ENROLLED);
    const r = await app.api.post('/widget/v1/messages', { message: 'I want to talk to a nurse' }, s.token);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ handedOff: true, caseReference: expect.any(String) });
    const cases = await app.api.get(`${t.env}/clinical-cases`, t.staff);
    const opened = cases.body.clinicalCases.find((c: { reference: string }) => c.reference === r.body.caseReference);
    expect(opened).toBeDefined();
    // Staff see an internal summary of the patient's answers at the top of the case thread (spec, hand_off).
    const thread = await app.api.get(`/v1/conversations/${opened.caseId}/messages`, t.apiKey);
    expect(thread.status).toBe(200);
    expect(thread.body.messages[0]).toMatchObject({
      sequence: 1,
      sender: 'system',
      message: expect.stringMatching(/^Hand-off \(clinical\)\nPatient answers:/),
    });
    expect(thread.body.messages.filter((m: { sender: string }) => m.sender === 'system')).toHaveLength(1);
  });

  it('a hand-off work item exists in the conversation service with the summary from system', async () => {
    const wf = await live('support_line', 'talk to support', 'support');
    const anon = await session(null);
    const r = await app.api.post('/widget/v1/messages', { message: 'please let me talk to support' }, anon.token);
    expect(r.body.handedOff).toBe(true);
    const runs = await app.api.get(`${t.env}/conversation-workflows/${wf.id}/runs`, t.staff);
    const run = runs.body.runs.find((x: { test: boolean }) => !x.test);
    expect(run.outcome).toBe('handed_off');
    const thread = await app.api.get(`/v1/conversations/${derivedUuid(`work-item:${run.runId}`)}/messages`, t.apiKey);
    expect(thread.status).toBe(200);
    expect(thread.body.messages).toHaveLength(1);
    expect(thread.body.messages[0]).toMatchObject({
      sender: 'system',
      message: expect.stringMatching(/^Hand-off \(support\)[\s\S]*Summary: Asked for the team/),
    });
  });

  it("another environment's workflows and destinations answer 404", async () => {
    const wf = await live('env_check', 'check env', 'support');
    const d = await app.api.post(`${t.env}/destinations`, { stableKey: 'env_dest', name: 'D', baseUrl: 'http://127.0.0.1:9/x' }, t.staff);
    expect(d.status).toBe(201);
    const prod = `/organizations/${t.orgId}/environments/${t.production}`;
    const P = `${prod}/conversation-workflows`;
    expect((await app.api.patch(`${P}/${wf.id}`, { name: 'x' }, t.staff)).status).toBe(404);
    expect((await app.api.get(`${P}/${wf.id}/runs`, t.staff)).status).toBe(404);
    expect((await app.api.post(`${P}/${wf.id}/archive`, undefined, t.staff)).status).toBe(404);
    expect((await app.api.get(`${P}/versions/${wf.draftVersionId ?? wf.liveVersionId}/readiness`, t.staff)).status).toBe(404);
    // The version made live (the creation's answer has no liveVersionId yet: `versions/null` is no uuid, 400).
    expect((await app.api.post(`${P}/versions/${wf.draftVersionId}/test`, { expectedRevision: 1, opening: 'check env', replies: [] }, t.staff)).status).toBe(
      404,
    );
    expect((await app.api.get(P, t.staff)).body.workflows).toEqual([]);
    expect((await app.api.delete(`${prod}/destinations/${d.body.id}`, t.staff)).status).toBe(404);
    expect((await app.api.get(`${prod}/destinations`, t.staff)).body.destinations).toEqual([]);
    expect((await app.api.get(`${t.env}/destinations`, t.staff)).body.destinations.map((x: { id: string }) => x.id)).toContain(d.body.id);
  });
});
