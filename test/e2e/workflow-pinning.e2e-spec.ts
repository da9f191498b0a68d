import { TestApp } from '@svc/testing';
import { identityToken } from './case-helpers';

/** Issue 6: a run stays on the version it started on, even when another version goes live meanwhile. */
const definition = (answer: string) => ({
  category: 'support',
  description: 'Opening hours',
  triggerPhrases: ['opening hours'],
  steps: [
    { id: 'day', type: 'ask', variable: 'day', prompt: 'Which day?', format: 'text' },
    { id: 'answer', type: 'reply', message: `${answer} on {{day}}` },
  ],
});

describe('workflow runs are pinned to their version (e2e, real HTTP)', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('finishes a started run on its version; new runs use the new live version', async () => {
    const t = await app.tenant();
    const P = `${t.env}/conversation-workflows`;
    const created = await app.api.post(P, { stableKey: 'hours', name: 'Hours', definition: definition('v1: 9-17') }, t.staff);
    expect(created.status).toBe(201);
    const v1 = created.body.draftVersionId;
    expect((await app.api.post(`${P}/versions/${v1}/test`, { expectedRevision: 1, opening: 'opening hours', replies: ['Monday'] }, t.staff)).body.passed).toBe(
      true,
    );
    expect((await app.api.post(`${P}/versions/${v1}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);

    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const session = async (sub: string) => {
      return (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, secret, sub) })).body
        .sessionToken as string;
    };

    const early = await session('ext-pin-1');
    const asked = await app.api.post('/widget/v1/messages', { message: 'what are your opening hours?' }, early);
    expect(asked.body.replies).toEqual([{ type: 'text', text: 'Which day?' }]);

    // Version 2 goes live while the first run waits for its answer.
    const draft = await app.api.post(`${P}/${created.body.id}/draft`, undefined, t.staff);
    expect(draft.status).toBe(201);
    const v2 = draft.body.id;
    expect((await app.api.put(`${P}/versions/${v2}`, { expectedRevision: draft.body.revision, definition: definition('v2: 8-20') }, t.staff)).status).toBe(200);
    const rev = draft.body.revision + 1;
    expect(
      (await app.api.post(`${P}/versions/${v2}/test`, { expectedRevision: rev, opening: 'opening hours', replies: ['Monday'] }, t.staff)).body.passed,
    ).toBe(true);
    const live = await app.api.post(`${P}/versions/${v2}/activate`, { expectedRevision: rev }, t.staff);
    expect(live.status).toBe(200);
    expect(live.body.liveVersionId).toBe(v2);

    const finished = await app.api.post('/widget/v1/messages', { message: 'Monday' }, early);
    expect(finished.body.replies).toEqual([{ type: 'text', text: 'v1: 9-17 on Monday' }]);

    const late = await session('ext-pin-2');
    await app.api.post('/widget/v1/messages', { message: 'opening hours please' }, late);
    const second = await app.api.post('/widget/v1/messages', { message: 'Friday' }, late);
    expect(second.body.replies).toEqual([{ type: 'text', text: 'v2: 8-20 on Friday' }]);

    const runs = await app.api.get(`${P}/${created.body.id}/runs`, t.staff);
    const live2 = runs.body.runs.filter((r: { versionId: string }) => r.versionId === v2);
    const live1 = runs.body.runs.filter((r: { versionId: string }) => r.versionId === v1);
    expect(live1.length).toBe(2); // the v1 test run and the pinned run
    expect(live2.length).toBe(2); // the v2 test run and the new run
  });

  it('a run waiting for its answer when its workflow is switched off (or archived) ends there: the next message is a new one', async () => {
    const t = await app.tenant();
    const P = `${t.env}/conversation-workflows`;
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const session = async (sub: string) => {
      return (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, secret, sub) })).body
        .sessionToken as string;
    };
    for (const action of ['deactivate', 'archive']) {
      const key = `hours_${action}`;
      const created = await app.api.post(P, { stableKey: key, name: `Hours ${action}`, definition: definition('9-17') }, t.staff);
      const v1 = created.body.draftVersionId;
      expect(
        (await app.api.post(`${P}/versions/${v1}/test`, { expectedRevision: 1, opening: 'opening hours', replies: ['Monday'] }, t.staff)).body.passed,
      ).toBe(true);
      expect((await app.api.post(`${P}/versions/${v1}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
      const s = await session(`ext-off-${action}`);
      expect((await app.api.post('/widget/v1/messages', { message: 'opening hours?' }, s)).body.replies).toEqual([{ type: 'text', text: 'Which day?' }]);
      expect((await app.api.post(`${P}/${created.body.id}/${action}`, undefined, t.staff)).status).toBe(200);
      const next = await app.api.post('/widget/v1/messages', { message: 'Monday' }, s);
      expect(next.status).toBe(201);
      expect(next.body.replies).not.toEqual([{ type: 'text', text: '9-17 on Monday' }]);
      expect(next.body.handedOff).toBe(false);
      const runs = await app.api.get(`${P}/${created.body.id}/runs`, t.staff);
      const live = runs.body.runs.filter((r: { outcome: string; endedAt: string | null }) => r.outcome === 'switched_off');
      expect(live).toHaveLength(1);
      expect(live[0].endedAt).toEqual(expect.any(String));
    }
  });

  it('the same opening sent 10 times at once: one run at a time (no orphans, one credit each), the others told to wait', async () => {
    const t = await app.tenant();
    const P = `${t.env}/conversation-workflows`;
    const created = await app.api.post(P, { stableKey: 'hours_burst', name: 'Hours burst', definition: definition('9-17') }, t.staff);
    const v1 = created.body.draftVersionId;
    expect((await app.api.post(`${P}/versions/${v1}/test`, { expectedRevision: 1, opening: 'opening hours', replies: ['Monday'] }, t.staff)).body.passed).toBe(
      true,
    );
    expect((await app.api.post(`${P}/versions/${v1}/activate`, { expectedRevision: 1 }, t.staff)).status).toBe(200);
    const secret = (await app.api.post(`${t.env}/secrets/rotate`, { kind: 'identity_token' }, t.staff)).body.secret as string;
    const session = (await app.api.post('/widget/v1/sessions', { environmentId: t.sandbox, identityToken: await identityToken(app, secret, 'ext-burst') })).body
      .sessionToken as string;
    const answers = await Promise.all(Array.from({ length: 10 }, () => app.api.post('/widget/v1/messages', { message: 'opening hours?' }, session)));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
    const texts = answers.map((a) => a.body.replies[0].text as string);
    // Each message either started a run (asked), was told to wait while another was answered, or
    // (arriving after the question) answered it: never two runs at once, never an orphan.
    const asked = texts.filter((x) => x === 'Which day?').length;
    const waited = texts.filter((x) => /still working on your previous message/.test(x)).length;
    const answered = texts.filter((x) => x === '9-17 on opening hours?').length;
    expect(asked + waited + answered).toBe(10);
    expect(waited).toBeGreaterThan(0);
    expect(answered === asked || answered === asked - 1).toBe(true);
    // One run per question asked (each with its one credit), at most one of them still waiting.
    const runs = (await app.api.get(`${P}/${created.body.id}/runs`, t.staff)).body.runs.filter((r: { test?: boolean }) => r.test !== true);
    expect(runs).toHaveLength(asked);
    expect(runs.filter((r: { outcome: string }) => r.outcome === 'waiting_for_patient')).toHaveLength(asked - answered);
    // A run still waiting takes the patient's actual answer.
    if (asked > answered)
      expect((await app.api.post('/widget/v1/messages', { message: 'Monday' }, session)).body.replies).toEqual([{ type: 'text', text: '9-17 on Monday' }]);
  });
});
