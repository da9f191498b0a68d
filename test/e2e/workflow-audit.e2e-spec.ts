import { TestApp } from '@svc/testing';
import { eventStoreOf } from './case-helpers';

/** Issue 6: every change to a workflow is audited (who, what, when) in the workflow's own stream. */
const definition = (text: string) => ({
  category: 'support',
  description: 'Hours',
  triggerPhrases: ['hours'],
  steps: [{ id: 'r', type: 'reply', message: text }],
});

describe('workflow audit trail (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('records who did what and when for each change', async () => {
    const t = await app.tenant({ ownerSub: 'auditor-1' });
    const P = `${t.env}/conversation-workflows`;
    const wf = await app.api.post(P, { stableKey: 'audited', name: 'Audited', definition: definition('a') }, t.staff);
    expect(wf.status).toBe(201);
    const id = wf.body.id as string;
    const v1 = wf.body.draftVersionId as string;
    expect((await app.api.patch(`${P}/${id}`, { name: 'Audited 2' }, t.staff)).status).toBe(200);
    expect((await app.api.put(`${P}/versions/${v1}`, { expectedRevision: 1, definition: definition('b') }, t.staff)).status).toBe(200);
    expect((await app.api.post(`${P}/versions/${v1}/test`, { expectedRevision: 2, opening: 'hours', replies: [] }, t.staff)).status).toBe(201);
    expect((await app.api.post(`${P}/versions/${v1}/activate`, { expectedRevision: 2 }, t.staff)).status).toBe(200);
    expect((await app.api.post(`${P}/${id}/deactivate`, undefined, t.staff)).status).toBe(200);
    expect((await app.api.post(`${P}/${id}/archive`, undefined, t.staff)).status).toBe(200);
    expect((await app.api.post(`${P}/${id}/restore`, undefined, t.staff)).status).toBe(200);

    const store = await eventStoreOf(app);
    const events = await store.readStream(`workflow-engine-workflow-${id}`);
    expect(events.map((e) => e.type)).toEqual([
      'WorkflowCreated',
      'WorkflowRenamed',
      'DraftSaved',
      'VersionTested',
      'VersionActivated',
      'WorkflowDeactivated',
      'WorkflowArchived',
      'WorkflowRestored',
    ]);
    for (const e of events) {
      const audit = (e.data as { audit: { by: string; action: string; at: string } }).audit;
      expect(audit.by).toBe('auditor-1');
      expect(audit.action).toEqual(expect.any(String));
      expect(audit.at).toBe(e.metadata.recordedAt);
      expect(e.metadata.actor).toBe('staff:auditor-1');
    }
  });
});
