// Over 400 lines: the clinical-case contract end to end on one service and its shared tenants.
import { randomUUID } from 'node:crypto';
import { IntegrationEventTypes, Patterns, Topics } from '@svc/messaging';
import { TestApp } from '@svc/testing';
import { Tenant, TopicWatch, busRequest, eventually, openCase, publishEvent, rawHttp, rawRequest, update, watchTopic } from './case-helpers';

/** Issue 4: clinical cases over real HTTP (standalone with its in-process bus, or the topology with Kafka). */
describe('clinical cases (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Tenant;
  let caseEvents: TopicWatch;
  beforeAll(async () => {
    await app.start();
    caseEvents = await watchTopic(app, Topics.caseEvents);
    t = await app.tenant();
  });
  afterAll(async () => {
    await caseEvents.stop();
    await app.stop();
  });

  /**
   * Resolves the case and waits for its clinical_case.resolved on the topic: every event the case
   * published before is in caseEvents.seen then (one stream, published and delivered in order).
   */
  const eventsUpTo = async (caseId: string) => {
    const next = (await progress(caseId)).body.nextSequence as number;
    if (next === 1) expect((await post(caseId, update(1, 'processed'))).status).toBe(200);
    const r = await post(
      caseId,
      update(Math.max(next, 2), 'resolved', { resolutionOutcome: 'provider_follow_up', resolutionNote: 'Follow-up booked with the clinic' }),
    );
    expect(r.status).toBe(200);
    const resolved = await eventually(
      async () => caseEvents.seen.find((m) => m.type === 'clinical_case.resolved' && m.data.caseId === caseId),
      (v) => !!v,
      15_000,
    );
    expect(resolved).toBeDefined();
  };
  const progress = (caseId: string, key = t.apiKey) => app.api.get(`/v1/clinical-cases/${caseId}/progress`, key);
  const post = (caseId: string, body: unknown, key = t.apiKey) => app.api.post(`/v1/clinical-cases/${caseId}/updates`, body, key);
  const message = (caseId: string, body: unknown, key = t.apiKey) => app.api.post(`/v1/clinical-cases/${caseId}/messages`, body, key);

  it('opens a staff_chat case: reference, priority from emergency words (English and Spanish), opened event with the spec data', async () => {
    const { patientId } = await app.enrolledPatient(t);
    const routine = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Please call about the refill' }, t.staff);
    expect(routine.status).toBe(201);
    expect(routine.body).toEqual({ caseId: expect.any(String), reference: expect.stringMatching(/^CC-[A-HJ-NP-Z2-9]{8}$/), priority: 'urgent' });

    const en = await openCase(app, t, 'Patient reports chest pain since this morning');
    expect(en.priority).toBe('emergency');
    const es = await openCase(app, t, 'Dice que tiene dificultad para respirar');
    expect(es.priority).toBe('emergency');

    const detail = await app.api.get(`${t.env}/clinical-cases/${en.caseId}`, t.staff);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({
      caseId: en.caseId,
      reference: en.reference,
      source: 'staff_chat',
      priority: 'emergency',
      status: 'awaiting_processing',
      patientNotes: '',
      symptomScores: {},
      internalNote: 'Patient reports chest pain since this morning',
    });
    expect(detail.body.matchedRules).toEqual(['staff_request:chat', 'emergency_terms:chest_pain']);
    const esDetail = await app.api.get(`${t.env}/clinical-cases/${es.caseId}`, t.staff);
    expect(esDetail.body.matchedRules).toEqual(['staff_request:chat', 'emergency_terms:breathing']);

    const opened = await eventually(
      async () => caseEvents.seen.find((m) => m.type === 'clinical_case.opened' && m.data.caseId === en.caseId),
      (v) => !!v,
    );
    expect(opened!.data).toEqual({
      caseId: en.caseId,
      patientId: en.patientId,
      priority: 'emergency',
      source: 'staff_chat',
      patientNotes: '',
      symptomScores: {},
      matchedRules: ['staff_request:chat', 'emergency_terms:chest_pain'],
      stoppedEarly: false,
      handoff: {
        progressPath: `/v1/clinical-cases/${en.caseId}/progress`,
        updatesPath: `/v1/clinical-cases/${en.caseId}/updates`,
        messagesPath: `/v1/clinical-cases/${en.caseId}/messages`,
      },
    });
    expect(opened!.metadata).toMatchObject({ organizationId: t.orgId, environmentId: t.sandbox, eventId: expect.any(String) });

    const list = await app.api.get(`${t.env}/clinical-cases`, t.staff);
    expect(list.status).toBe(200);
    expect(list.body.clinicalCases.map((c: { caseId: string }) => c.caseId)).toEqual(expect.arrayContaining([routine.body.caseId, en.caseId, es.caseId]));
    expect(JSON.stringify(list.body)).not.toContain('chest pain');

    const bad = await app.api.post(`${t.env}/clinical-cases`, { patientId: 'nope', request: '' }, t.staff);
    expect(bad.status).toBe(400);
    expect(bad.body.details.map((d: { path: string }) => d.path).sort()).toEqual(['patientId', 'request']);
  });

  it('opens cases over the bus idempotently by (environment, requestId)', async () => {
    const cmd = {
      requestId: randomUUID(),
      organizationId: t.orgId,
      environmentId: t.sandbox,
      patientId: randomUUID(),
      source: 'check_in',
      priority: 'routine',
      patientNotes: 'feeling a bit tired',
      symptomScores: { pain: 3 },
      matchedRules: ['score:routine:pain>=3'],
      stoppedEarly: false,
      actor: 'system',
    };
    const [a, b] = await Promise.all([busRequest(app, Patterns.openClinicalCase, cmd), busRequest(app, Patterns.openClinicalCase, cmd)]);
    expect(a.caseId).toBe(b.caseId);
    expect(a.reference).toBe(b.reference);
    expect([a.duplicate, b.duplicate].sort()).toEqual([false, true]);
    const again = await busRequest(app, Patterns.openClinicalCase, cmd);
    expect(again).toEqual({ caseId: a.caseId, reference: a.reference, priority: 'routine', duplicate: true });
    // Same requestId in another environment: another case.
    const other = await busRequest(app, Patterns.openClinicalCase, { ...cmd, environmentId: t.production });
    expect(other.caseId).not.toBe(a.caseId);
    const p = await progress(a.caseId);
    expect(p.status).toBe(200);
    expect(p.body.confirmationDueAt).toBeDefined();
    await expect(busRequest(app, Patterns.openClinicalCase, { ...cmd, requestId: 'x' })).rejects.toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    // the same requestId with another body is not a duplicate (the "idempotency lives in the streams" rule)
    for (const change of [{ patientNotes: 'something else' }, { priority: 'urgent' }, { symptomScores: { pain: 4 } }, { patientId: randomUUID() }]) {
      await expect(busRequest(app, Patterns.openClinicalCase, { ...cmd, ...change })).rejects.toMatchObject({ status: 409, code: 'IDEMPOTENCY_KEY_REUSED' });
    }
    // the whole payload is validated
    const invalid: [Record<string, unknown>, string][] = [
      [{ patientNotes: 5 }, 'patientNotes'],
      [{ patientNotes: undefined }, 'patientNotes'],
      [{ symptomScores: null }, 'symptomScores'],
      [{ symptomScores: [1] }, 'symptomScores'],
      [{ symptomScores: { pain: { deep: 1 } } }, 'symptomScores'],
      [{ matchedRules: 'score:x' }, 'matchedRules'],
      [{ matchedRules: [1] }, 'matchedRules'],
      [{ stoppedEarly: 'no' }, 'stoppedEarly'],
    ];
    for (const [change, path] of invalid) {
      await expect(busRequest(app, Patterns.openClinicalCase, { ...cmd, requestId: randomUUID(), ...change })).rejects.toMatchObject({
        status: 400,
        code: 'VALIDATION_FAILED',
        details: [{ path, message: 'invalid' }],
      });
    }
  });

  it('reads progress: fresh case, 404 for another environment or unknown ids, 400 for a non-uuid id', async () => {
    const c = await openCase(app, t);
    const p = await progress(c.caseId);
    expect(p.status).toBe(200);
    expect(p.body).toEqual({
      caseId: c.caseId,
      status: 'awaiting_processing',
      sequence: 0,
      nextSequence: 1,
      confirmationOverdue: false,
      confirmationDueAt: expect.any(String),
      transportDelivered: false,
      scheduledFor: null,
      externalReference: null,
      updatedAt: expect.any(String),
    });
    // urgent: two hours
    expect(Date.parse(p.body.confirmationDueAt) - Date.parse(p.body.updatedAt)).toBe(2 * 3600_000);

    const other = await app.tenant();
    for (const key of [other.apiKey]) {
      expect((await progress(c.caseId, key)).status).toBe(404);
      expect((await post(c.caseId, update(1, 'processed'), key)).status).toBe(404);
      expect((await message(c.caseId, { messageId: randomUUID(), message: 'hi', externalReference: 'r' }, key)).status).toBe(404);
    }
    expect((await app.api.get(`${other.env}/clinical-cases/${c.caseId}`, other.staff)).status).toBe(404);
    expect((await app.api.post(`${other.env}/clinical-cases/${c.caseId}/acknowledge`, {}, other.staff)).status).toBe(404);
    // A case reference (or anything else) that is not a uuid: 400 naming caseId (docs/decisions.md, "Path parameters").
    const notUuid = await progress('CC-ABCDEFGH');
    expect(notUuid.status).toBe(400);
    expect(notUuid.body).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ path: 'caseId' }] });
    expect((await progress(randomUUID())).status).toBe(404);
    expect((await post('nope', update(1, 'processed'))).status).toBe(400);
    expect((await post(randomUUID(), update(1, 'processed'))).status).toBe(404);
    expect((await progress(c.caseId, 'svc_sb_invalid')).status).toBe(401);
  });

  it('validates update bodies (400) before anything else', async () => {
    const c = await openCase(app, t);
    const cases: [unknown, string[]][] = [
      [{}, ['updateId', 'sequence', 'status', 'externalReference']],
      [{ ...update(0, 'processed') }, ['sequence']],
      [{ ...update(1_000_001, 'processed') }, ['sequence']],
      [{ ...update(1.5, 'processed') }, ['sequence']],
      [{ ...update(1, 'processed'), updateId: 'x' }, ['updateId']],
      [{ ...update(1, 'done') }, ['status']],
      [{ ...update(1, 'processed'), externalReference: '' }, ['externalReference']],
      [{ ...update(1, 'processed'), externalReference: 'x'.repeat(201) }, ['externalReference']],
      [{ ...update(1, 'processed'), extra: true }, ['extra']],
      [{ ...update(2, 'scheduled') }, ['scheduledFor']],
      [{ ...update(2, 'scheduled', { scheduledFor: 'tomorrow' }) }, ['scheduledFor']],
      [{ ...update(2, 'resolved') }, ['resolutionOutcome', 'resolutionNote']],
      [{ ...update(2, 'resolved', { resolutionOutcome: 'other', resolutionNote: 'too short' }) }, ['resolutionNote']],
      [{ ...update(2, 'resolved', { resolutionOutcome: 'cured', resolutionNote: 'long enough note' }) }, ['resolutionOutcome']],
      [{ ...update(2, 'resolved', { resolutionOutcome: 'other', resolutionNote: 'x'.repeat(2001) }) }, ['resolutionNote']],
      // impossible dates and times, or no time zone
      ...[
        '2026-13-45T99:99Z',
        '2026-02-30T10:00:00Z',
        '2025-02-29T10:00Z',
        '2026-04-31T10:00Z',
        '2026-01-01T24:00:00Z',
        '2026-01-01T10:60Z',
        '2026-01-01T10:00:61Z',
        '2026-01-01T10:00+25:00',
        '2026-01-01T10:00:00',
      ].map((scheduledFor): [unknown, string[]] => [{ ...update(2, 'scheduled', { scheduledFor }) }, ['scheduledFor']]),
      // explicit null for optional non-nullable fields
      [{ ...update(1, 'processed', { scheduledFor: null }) }, ['scheduledFor']],
      [{ ...update(1, 'processed', { resolutionOutcome: null }) }, ['resolutionOutcome']],
      [{ ...update(1, 'processed', { resolutionNote: null }) }, ['resolutionNote']],
    ];
    for (const [body, paths] of cases) {
      const r = await post(c.caseId, body);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect([...new Set(r.body.details.map((d: { path: string }) => d.path))].sort()).toEqual([...paths].sort());
    }
    const malformed = await app.api.request('POST', `/v1/clinical-cases/${c.caseId}/updates`, { rawBody: '{"updateId":', token: t.apiKey });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'malformed JSON' }] });
    expect((await progress(c.caseId)).body.sequence).toBe(0);
    // real date-times with a zone still pass (leap day, offsets, fractions)
    expect((await post(c.caseId, update(1, 'processed'))).status).toBe(200);
    for (const [i, scheduledFor] of ['2028-02-29T23:59:59Z', '2026-12-31T00:00+05:30', '2026-06-01T08:15:30.123-04:00'].entries()) {
      expect((await post(c.caseId, update(i + 2, 'scheduled', { scheduledFor }))).status).toBe(200);
    }
  });

  it('refuses unknown fields named like Object.prototype members (400 naming the path); nothing is recorded', async () => {
    const c = await openCase(app, t);
    const first = update(1, 'processed');
    for (const key of [
      'constructor',
      'toString',
      'valueOf',
      'hasOwnProperty',
      'isPrototypeOf',
      'toLocaleString',
      'propertyIsEnumerable',
      '__defineGetter__',
      '__lookupSetter__',
      'prototype',
    ]) {
      const r = await app.api.request('POST', `/v1/clinical-cases/${c.caseId}/updates`, {
        rawBody: JSON.stringify(first).replace(/}$/, `,${JSON.stringify(key)}:{"x":1}}`),
        token: t.apiKey,
      });
      expect({ key, status: r.status, body: r.body }).toEqual({
        key,
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: key, message: 'unknown field' }] },
      });
      const m = await app.api.request('POST', `/v1/clinical-cases/${c.caseId}/messages`, {
        rawBody: `{"messageId":"${randomUUID()}","message":"hi","externalReference":"r",${JSON.stringify(key)}:1}`,
        token: t.apiKey,
      });
      expect({ key, status: m.status, details: m.body.details }).toEqual({ key, status: 400, details: [{ path: key, message: 'unknown field' }] });
    }
    // reported with the other errors
    const mixed = await app.api.request('POST', `/v1/clinical-cases/${c.caseId}/updates`, {
      rawBody: '{"sequence":0,"constructor":{"x":1},"extra":1}',
      token: t.apiKey,
    });
    expect(mixed.status).toBe(400);
    expect([...new Set(mixed.body.details.map((d: { path: string }) => d.path))].sort()).toEqual([
      'constructor',
      'externalReference',
      'extra',
      'sequence',
      'status',
      'updateId',
    ]);
    // nothing was recorded: the same updateId without the extra member is a first write, not a duplicate
    expect((await progress(c.caseId)).body.sequence).toBe(0);
    const ok = await post(c.caseId, first);
    expect(ok.status).toBe(200);
    expect(ok.body.duplicate).toBe(false);
    // The same updateId in capitals is the same update: a duplicate with the original result.
    const shouted = await post(c.caseId, { ...first, updateId: (first.updateId as string).toUpperCase() });
    expect(shouted.status).toBe(200);
    expect(shouted.body).toEqual({ ...ok.body, duplicate: true });
  });

  it('answers bodies that are not JSON objects and badly encoded URLs with VALIDATION_FAILED and details', async () => {
    const c = await openCase(app, t);
    const path = `/v1/clinical-cases/${c.caseId}/updates`;
    for (const [rawBody, detail] of [
      ['{bad', 'malformed JSON'],
      ['', 'empty body'],
      ['{"__proto__":{"x":1}}', expect.stringContaining('forbidden key')],
      ['{"constructor":{"prototype":{"x":1}}}', expect.stringContaining('forbidden key')],
      [`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`, 'nested too deeply'],
      [JSON.stringify(Object.fromEntries(Array.from({ length: 80_000 }, (_, i) => [`k${i}`, 1]))), 'more than 2000 members in one object'],
      [
        JSON.stringify({ ...update(1, 'processed'), x: { y: Object.fromEntries(Array.from({ length: 2001 }, (_, i) => [`k${i}`, 1])) } }),
        'more than 2000 members in one object',
      ],
    ] as const) {
      const r = await app.api.request('POST', path, { rawBody, token: t.apiKey });
      expect({ rawBody, status: r.status, body: r.body }).toEqual({
        rawBody,
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: detail }] },
      });
    }
    // Fastify's own answer to a badly percent-encoded path is replaced by the error body of docs/decisions.md, "Errors and the HTTP edge"
    for (const [method, url, body] of [
      ['GET', '/v1/clinical-cases/%zz/progress', undefined],
      ['POST', '/v1/clinical-cases/%zz/updates', JSON.stringify(update(1, 'processed'))],
      ['POST', '/v1/clinical-cases/%E0%A4%A/messages', '{}'],
    ] as const) {
      const r = await rawRequest(app, method, url, { token: t.apiKey, body });
      expect({ url, status: r.status, body: r.body }).toEqual({
        url,
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: 'url', message: expect.any(String) }] },
      });
    }
    // Bytes that are not UTF-8, and a string with an unpaired surrogate escape: not repaired, refused.
    const invalidUtf8 = Buffer.concat([
      Buffer.from('{"updateId":"'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('","sequence":1,"status":"processed","externalReference":"r"}'),
    ]);
    const notUtf8 = await rawHttp(
      app,
      'POST',
      path,
      { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' },
      invalidUtf8 as unknown as string,
    );
    expect({ status: notUtf8.status, body: notUtf8.body }).toEqual({
      status: 400,
      body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'not UTF-8' }] },
    });
    for (const lone of ['{"externalReference":"a\\ud800b"}', '{"x\\udc00":1}', '["\\ud83d"]']) {
      const r = await app.api.request('POST', path, { rawBody: lone, token: t.apiKey });
      expect({ lone, status: r.status, details: r.body.details }).toEqual({
        lone,
        status: 400,
        details: [{ path: '', message: expect.stringContaining('unpaired surrogate') }],
      });
    }
    // A surrogate pair (an emoji) is text like any other.
    const emoji = await app.api.request('POST', path, {
      rawBody: JSON.stringify({ ...update(1, 'processed'), externalReference: 'ok \ud83d\ude00' }),
      token: t.apiKey,
    });
    expect(emoji.status).toBe(200);
    expect((await progress(c.caseId)).body.externalReference).toBe('ok \u{1F600}');
    // 2000 members still reach validation (each an unknown field).
    const wide = await app.api.request('POST', path, {
      rawBody: JSON.stringify({ ...update(1, 'processed'), ...Object.fromEntries(Array.from({ length: 1996 }, (_, i) => [`k${i}`, 1])) }),
      token: t.apiKey,
    });
    expect(wide.status).toBe(400);
    expect(wide.body.details).toHaveLength(1996);
    expect(wide.body.details[0]).toEqual({ path: 'k0', message: 'unknown field' });
    expect((await progress(c.caseId)).body.sequence).toBe(1);
  });

  it('finds a case addressed by its uuid in upper case; another environment still gets 404', async () => {
    const c = await openCase(app, t);
    const upper = c.caseId.toUpperCase();
    const p = await progress(upper);
    expect(p.status).toBe(200);
    expect(p.body.caseId).toBe(c.caseId);
    const first = update(1, 'processed');
    const ok = await post(upper, first);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ caseId: c.caseId, updateId: first.updateId, sequence: 1, status: 'processed', duplicate: false });
    // the same case: the lower-case retry is the duplicate, progress moved
    expect((await post(c.caseId, first)).body.duplicate).toBe(true);
    expect((await progress(c.caseId)).body.nextSequence).toBe(2);
    const pm = { messageId: randomUUID(), message: 'Please call us', externalReference: 'm-1' };
    const sent = await message(upper, pm);
    expect(sent.status).toBe(200);
    expect(sent.body.caseId).toBe(c.caseId);
    expect((await message(c.caseId, pm)).body.duplicate).toBe(true);
    expect((await app.api.get(`${t.env}/clinical-cases/${upper}`, t.staff)).body.caseId).toBe(c.caseId);
    expect((await app.api.post(`${t.env}/clinical-cases/${upper}/acknowledge`, {}, t.staff)).status).toBe(200);

    const other = await app.tenant();
    expect((await progress(upper, other.apiKey)).status).toBe(404);
    expect((await post(upper, update(2, 'clinician_responded'), other.apiKey)).status).toBe(404);
    expect((await message(upper, { messageId: randomUUID(), message: 'hi', externalReference: 'r' }, other.apiKey)).status).toBe(404);
    expect((await app.api.get(`${other.env}/clinical-cases/${upper}`, other.staff)).status).toBe(404);
  });

  it('stores and returns scheduledFor in RFC 3339 form: seconds added when left out, T/Z upper-cased, offsets as ±hh:mm, other values exactly as sent', async () => {
    const c = await openCase(app, t);
    expect((await post(c.caseId, update(1, 'processed'))).status).toBe(200);
    const cases: [string, string][] = [
      ['2031-01-01T00:00Z', '2031-01-01T00:00:00Z'],
      ['2031-06-15T08:30+05:30', '2031-06-15T08:30:00+05:30'],
      ['2031-06-15T23:59-04:00', '2031-06-15T23:59:00-04:00'],
      ['2031-01-01T00:00:00Z', '2031-01-01T00:00:00Z'],
      ['2031-01-01T10:20:30.5+01:00', '2031-01-01T10:20:30.5+01:00'],
      // other ISO 8601 / RFC 3339 spellings of a date-time with a time zone: returned in RFC 3339 form
      ['2031-01-01t10:00:00z', '2031-01-01T10:00:00Z'],
      ['2031-01-01T10:00:00+02', '2031-01-01T10:00:00+02:00'],
      ['2031-01-01T10:00-0330', '2031-01-01T10:00:00-03:30'],
      ['2031-01-01T10:00:00.1234567890Z', '2031-01-01T10:00:00.1234567890Z'],
    ];
    for (const [i, [sent, returned]] of cases.entries()) {
      const body = update(i + 2, 'scheduled', { scheduledFor: sent });
      expect((await post(c.caseId, body)).status).toBe(200);
      const p = await progress(c.caseId);
      expect({ sent, scheduledFor: p.body.scheduledFor }).toEqual({ sent, scheduledFor: returned });
      expect(Number.isFinite(Date.parse(p.body.scheduledFor))).toBe(true);
      // an identical retry is still the same request
      expect((await post(c.caseId, body)).body.duplicate).toBe(true);
    }
    const detail = await app.api.get(`${t.env}/clinical-cases/${c.caseId}`, t.staff);
    expect(detail.body.scheduledFor).toBe('2031-01-01T10:00:00.1234567890Z');
  });

  it('applies the update rules in the decided order, with read-your-writes and resolution', async () => {
    const c = await openCase(app, t);
    // processed at 2 on a fresh case: SEQUENCE_CONFLICT naming the expected value
    const skip = await post(c.caseId, update(2, 'processed'));
    expect(skip.status).toBe(409);
    expect(skip.body.code).toBe('SEQUENCE_CONFLICT');
    expect(skip.body.message).toContain('expected sequence is 1');
    expect(skip.body.expectedSequence).toBe(1);
    // scheduled at 1: INVALID_TRANSITION
    const wrongFirst = await post(c.caseId, update(1, 'scheduled', { scheduledFor: '2026-12-01T10:00:00Z' }));
    expect(wrongFirst.status).toBe(409);
    expect(wrongFirst.body.code).toBe('INVALID_TRANSITION');

    const first = update(1, 'processed');
    const ok = await post(c.caseId, first);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ caseId: c.caseId, updateId: first.updateId, sequence: 1, status: 'processed', duplicate: false });
    // read your writes
    const p1 = await progress(c.caseId);
    expect(p1.body).toMatchObject({ status: 'processed', sequence: 1, nextSequence: 2, externalReference: 'ext-1', confirmationOverdue: false });

    const retry = await post(c.caseId, first);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual({ ...ok.body, duplicate: true });
    const reused = await post(c.caseId, { ...first, externalReference: 'other' });
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    // reused updateId with another sequence: idempotency comes before the sequence check
    expect((await post(c.caseId, { ...first, sequence: 7 })).body.code).toBe('IDEMPOTENCY_KEY_REUSED');

    const again = await post(c.caseId, update(2, 'processed'));
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('INVALID_TRANSITION');
    const reusedSeq = await post(c.caseId, update(1, 'clinician_responded'));
    expect(reusedSeq.body.code).toBe('SEQUENCE_CONFLICT');
    expect(reusedSeq.body.message).toContain('expected sequence is 2');
    expect(reusedSeq.body.expectedSequence).toBe(2);
    const jump = await post(c.caseId, update(5, 'clinician_responded'));
    expect(jump.body).toEqual({ code: 'SEQUENCE_CONFLICT', message: expect.stringContaining('expected sequence is 2'), expectedSequence: 2 });

    const sched = await post(c.caseId, update(2, 'scheduled', { scheduledFor: '2026-12-01T10:00:00+01:00' }));
    expect(sched.status).toBe(200);
    expect((await progress(c.caseId)).body).toMatchObject({
      status: 'scheduled',
      sequence: 2,
      nextSequence: 3,
      scheduledFor: '2026-12-01T10:00:00+01:00',
      externalReference: 'ext-2',
    });
    expect((await post(c.caseId, update(3, 'patient_contacted'))).status).toBe(200);
    expect((await post(c.caseId, update(4, 'clinician_responded'))).status).toBe(200);
    expect((await post(c.caseId, update(5, 'clinician_responded'))).status).toBe(200);
    expect((await post(c.caseId, update(6, 'scheduled', { scheduledFor: '2026-12-02T09:00:00Z' }))).status).toBe(200);

    const resolve = update(7, 'resolved', { resolutionOutcome: 'provider_follow_up', resolutionNote: 'Follow-up booked with the clinic' });
    const resolved = await post(c.caseId, resolve);
    expect(resolved.status).toBe(200);
    expect(resolved.body).toEqual({ caseId: c.caseId, updateId: resolve.updateId, sequence: 7, status: 'resolved', duplicate: false });
    expect((await progress(c.caseId)).body).toMatchObject({ status: 'resolved', sequence: 7, nextSequence: 8 });

    // after resolution: identical retries are still duplicates with the original result; new ones CASE_RESOLVED
    const late = await post(c.caseId, first);
    expect(late.status).toBe(200);
    expect(late.body).toEqual({ caseId: c.caseId, updateId: first.updateId, sequence: 1, status: 'processed', duplicate: true });
    expect((await post(c.caseId, resolve)).body).toMatchObject({ duplicate: true, status: 'resolved' });
    const after = await post(c.caseId, update(8, 'clinician_responded'));
    expect(after.status).toBe(409);
    expect(after.body.code).toBe('CASE_RESOLVED');
    // CASE_RESOLVED comes before SEQUENCE_CONFLICT
    expect((await post(c.caseId, update(3, 'clinician_responded'))).body.code).toBe('CASE_RESOLVED');
    expect((await post(c.caseId, { ...resolve, resolutionNote: 'A different note text' })).body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const msg = await message(c.caseId, { messageId: randomUUID(), message: 'Any news?', externalReference: 'm-1' });
    expect(msg.status).toBe(409);
    expect(msg.body.code).toBe('CASE_RESOLVED');

    const ev = await eventually(
      async () => caseEvents.seen.find((m) => m.type === 'clinical_case.resolved' && m.data.caseId === c.caseId),
      (v) => !!v,
    );
    expect(ev!.data).toEqual({
      caseId: c.caseId,
      patientId: c.patientId,
      status: 'resolved',
      resolutionOutcome: 'provider_follow_up',
      resolutionNote: 'Follow-up booked with the clinic',
    });
    const detail = await app.api.get(`${t.env}/clinical-cases/${c.caseId}`, t.staff);
    expect(detail.body).toMatchObject({
      status: 'resolved',
      resolutionOutcome: 'provider_follow_up',
      resolutionNote: 'Follow-up booked with the clinic',
      resolvedAt: expect.any(String),
    });
    // a resolved case cannot be acknowledged
    expect((await app.api.post(`${t.env}/clinical-cases/${c.caseId}/acknowledge`, {}, t.staff)).body.code).toBe('CASE_RESOLVED');
  });

  it('progress reads interleaved with updates of other cases and of the same case always show the last answered update', async () => {
    const a = await openCase(app, t);
    const b = await openCase(app, t);
    expect((await progress(a.caseId)).body).toMatchObject({ sequence: 0, nextSequence: 1 }); // now remembered
    expect((await post(b.caseId, update(1, 'processed'))).status).toBe(200);
    expect((await progress(a.caseId)).body).toMatchObject({ sequence: 0, nextSequence: 1, status: 'awaiting_processing' });
    expect((await progress(b.caseId)).body).toMatchObject({ sequence: 1, nextSequence: 2, status: 'processed' });
    for (let seq = 1; seq <= 4; seq++) {
      const r = await post(a.caseId, update(seq, seq === 1 ? 'processed' : 'clinician_responded'));
      expect(r.status).toBe(200);
      // Right after the 200, whatever was remembered before: the new sequence and externalReference.
      expect((await progress(a.caseId)).body).toMatchObject({ sequence: seq, nextSequence: seq + 1, externalReference: `ext-${seq}` });
      expect((await post(b.caseId, update(seq + 1, 'clinician_responded'))).status).toBe(200);
      expect((await progress(b.caseId)).body).toMatchObject({ sequence: seq + 1, nextSequence: seq + 2 });
    }
  });

  it('fifty concurrent updates with one sequence: exactly one 200; fifty identical: one effect, 49 duplicates', async () => {
    const c = await openCase(app, t);
    const racers = Array.from({ length: 50 }, () => update(1, 'processed'));
    const results = await Promise.all(racers.map((b) => post(c.caseId, b)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(49);
    expect(new Set(results.filter((r) => r.status === 409).map((r) => r.body.code))).toEqual(new Set(['SEQUENCE_CONFLICT']));
    expect((await progress(c.caseId)).body).toMatchObject({ sequence: 1, nextSequence: 2 });

    const same = update(2, 'clinician_responded');
    const dup = await Promise.all(Array.from({ length: 50 }, () => post(c.caseId, same)));
    expect(dup.every((r) => r.status === 200)).toBe(true);
    expect(dup.filter((r) => r.body.duplicate === false)).toHaveLength(1);
    expect(dup.filter((r) => r.body.duplicate === true)).toHaveLength(49);
    expect((await progress(c.caseId)).body).toMatchObject({ sequence: 2, nextSequence: 3, status: 'clinician_responded' });
    const detail = await app.api.get(`${t.env}/clinical-cases/${c.caseId}`, t.staff);
    expect(detail.body.sequence).toBe(2);
  });

  it('takes provider messages: idempotent by messageId, shown in the case thread with sender provider', async () => {
    const c = await openCase(app, t);
    const body = { messageId: randomUUID(), message: 'Your prescription is ready to pick up.', externalReference: 'msg-ext-1' };
    const r = await message(c.caseId, body);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ caseId: c.caseId, messageId: body.messageId, duplicate: false, createdAt: expect.any(String) });
    const again = await message(c.caseId, body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...r.body, duplicate: true });
    const reused = await message(c.caseId, { ...body, message: 'Something else' });
    expect(reused.status).toBe(409);
    expect(reused.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    for (const bad of [
      {},
      { ...body, message: '' },
      { ...body, message: 'x'.repeat(4001) },
      { ...body, messageId: 'x' },
      { ...body, externalReference: '' },
      { ...body, extra: 1 },
    ]) {
      const b = await message(c.caseId, bad);
      expect(b.status).toBe(400);
      expect(b.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await message('not-a-uuid', body)).status).toBe(400);
    expect((await message(randomUUID(), { ...body, messageId: randomUUID() })).status).toBe(404);

    const thread = await app.api.get(`/v1/conversations/${c.caseId}/messages`, t.apiKey);
    expect(thread.status).toBe(200);
    expect(thread.body.conversationId).toBe(c.caseId);
    expect(thread.body.messages).toHaveLength(1);
    expect(thread.body.messages[0]).toEqual({
      id: expect.any(String),
      conversationId: c.caseId,
      sequence: 1,
      sender: 'provider',
      message: 'Your prescription is ready to pick up.',
      externalMessageId: 'msg-ext-1',
      attachments: [],
      createdAt: expect.any(String),
      delivery: null,
    });
  });

  it('acknowledges a case: 200, status unchanged, clinical_case.acknowledged with the status at that moment', async () => {
    const c = await openCase(app, t);
    expect((await post(c.caseId, update(1, 'processed'))).status).toBe(200);
    const ack = await app.api.post(`${t.env}/clinical-cases/${c.caseId}/acknowledge`, {}, t.staff);
    expect(ack.status).toBe(200);
    expect(ack.body).toEqual({ caseId: c.caseId, status: 'processed', acknowledgedAt: expect.any(String) });
    expect((await progress(c.caseId)).body.status).toBe('processed');
    const ev = await eventually(
      async () => caseEvents.seen.find((m) => m.type === 'clinical_case.acknowledged' && m.data.caseId === c.caseId),
      (v) => !!v,
    );
    expect(ev!.data).toEqual({ caseId: c.caseId, patientId: c.patientId, status: 'processed', resolutionOutcome: null, resolutionNote: null });
    // again: 200, no second event
    expect((await app.api.post(`${t.env}/clinical-cases/${c.caseId}/acknowledge`, {}, t.staff)).status).toBe(200);
    await eventsUpTo(c.caseId);
    expect(caseEvents.seen.filter((m) => m.type === 'clinical_case.acknowledged' && m.data.caseId === c.caseId)).toHaveLength(1);
    expect((await app.api.post(`${t.env}/clinical-cases/${randomUUID()}/acknowledge`, {}, t.staff)).status).toBe(404);
    // only the four clinical_case.* types leave on the topic
    expect(new Set(caseEvents.seen.map((m) => m.type))).toEqual(new Set(caseEvents.seen.map((m) => m.type).filter((x) => x.startsWith('clinical_case.'))));
  });

  it('an operation that takes no body refuses one with members (400 naming each unknown field) and anything but an object, nothing written; {} or no body pass; authentication first', async () => {
    const c = await openCase(app, t);
    const ack = `${t.env}/clinical-cases/${c.caseId}/acknowledge`;
    const bad = await rawRequest(app, 'POST', ack, { token: t.staff, body: '{"x":1,"note":"hi"}' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({
      code: 'VALIDATION_FAILED',
      message: expect.any(String),
      details: [
        { path: 'x', message: 'unknown field' },
        { path: 'note', message: 'unknown field' },
      ],
    });
    for (const body of ['[]', '"x"', '1', 'null']) {
      const r = await rawRequest(app, 'POST', ack, { token: t.staff, body });
      expect({ body, status: r.status, code: r.body.code }).toEqual({ body, status: 400, code: 'VALIDATION_FAILED' });
    }
    expect((await rawRequest(app, 'POST', ack, { body: '{"x":1}' })).status).toBe(401);
    expect((await app.api.get(`${t.env}/clinical-cases/${c.caseId}`, t.staff)).body.acknowledgedAt).toBeNull();
    await new Promise((r) => setTimeout(r, 50));
    expect(caseEvents.seen.filter((m) => m.type === 'clinical_case.acknowledged' && m.data.caseId === c.caseId)).toHaveLength(0);
    // A compressed body is 415; a coding that compresses nothing (a mislabelled utf-8) passes.
    const gz = await rawHttp(app, 'POST', ack, { authorization: `Bearer ${t.staff}`, 'content-type': 'application/json', 'content-encoding': 'gzip' }, '{}');
    expect(gz.status).toBe(415);
    expect(
      (await rawHttp(app, 'POST', ack, { authorization: `Bearer ${t.staff}`, 'content-type': 'application/json', 'content-encoding': 'utf-8' }, '{}')).status,
    ).toBe(200);
    expect((await rawRequest(app, 'POST', ack, { token: t.staff, body: '{}' })).status).toBe(200);
    expect((await rawRequest(app, 'POST', ack, { token: t.staff })).status).toBe(200);
    // One event: the first acknowledgement that passed (none from the refused ones, none from the repeats).
    await eventsUpTo(c.caseId);
    expect(caseEvents.seen.filter((m) => m.type === 'clinical_case.acknowledged' && m.data.caseId === c.caseId).map((m) => m.data.status)).toEqual([
      'awaiting_processing',
    ]);
  });

  it('marks transportDelivered from the dispatcher event of the opened webhook (dedupe by event id)', async () => {
    const c = await openCase(app, t);
    const marker = await openCase(app, t);
    // One stream key: the events reach the case-ledger in the order published (on Kafka, one partition).
    const msg = (caseId: string, eventType: string) => ({
      type: IntegrationEventTypes.webhookDelivered,
      data: { organizationId: t.orgId, environmentId: t.sandbox, eventId: randomUUID(), eventType, caseId, deliveredAt: new Date().toISOString() },
      metadata: {
        eventId: randomUUID(),
        correlationId: randomUUID(),
        causationId: null,
        organizationId: t.orgId,
        environmentId: t.sandbox,
        actor: 'system',
        recordedAt: new Date().toISOString(),
      },
      streamId: `webhook-dispatcher-delivery-${c.caseId}`,
      position: 1,
    });
    await publishEvent(app, Topics.dispatcherEvents, msg(c.caseId, 'clinical_case.acknowledged'));
    // The marker case's delivery comes after it: once the marker shows it, the acknowledged one was handled.
    await publishEvent(app, Topics.dispatcherEvents, msg(marker.caseId, 'clinical_case.opened'));
    expect(
      (
        await eventually(
          () => progress(marker.caseId),
          (r) => r.body.transportDelivered === true,
          15_000,
        )
      ).body.transportDelivered,
    ).toBe(true);
    expect((await progress(c.caseId)).body.transportDelivered).toBe(false);
    const delivered = msg(c.caseId, 'clinical_case.opened');
    await publishEvent(app, Topics.dispatcherEvents, delivered);
    await publishEvent(app, Topics.dispatcherEvents, delivered);
    const p = await eventually(
      () => progress(c.caseId),
      (r) => r.body.transportDelivered === true,
      15_000,
    );
    expect(p.body.transportDelivered).toBe(true);
    expect(p.body.status).toBe('awaiting_processing');
  });
});

describe('confirmation deadline follows the service clock', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('is opened + 15 min (emergency) / 2 h (urgent) / 24 h (routine); overdue until processed', async () => {
    const t = await app.tenant();
    const emergency = await openCase(app, t, 'Suicidal thoughts reported by the patient');
    const urgent = await openCase(app, t, 'Please review the lab result');
    const routine = await busRequest(app, Patterns.openClinicalCase, {
      requestId: randomUUID(),
      organizationId: t.orgId,
      environmentId: t.sandbox,
      patientId: randomUUID(),
      source: 'patient_concern',
      priority: 'routine',
      patientNotes: 'mild rash',
      symptomScores: {},
      matchedRules: ['phrase:rash'],
      stoppedEarly: false,
      actor: 'system',
    });
    const get = async (id: string) => (await app.api.get(`/v1/clinical-cases/${id}/progress`, t.apiKey)).body;
    const e0 = await get(emergency.caseId);
    expect(Date.parse(e0.confirmationDueAt) - Date.parse(e0.updatedAt)).toBe(15 * 60_000);
    const r0 = await get(routine.caseId);
    expect(Date.parse(r0.confirmationDueAt) - Date.parse(r0.updatedAt)).toBe(24 * 3600_000);

    await app.advanceClock(15 * 60 + 5);
    expect((await get(emergency.caseId)).confirmationOverdue).toBe(true);
    expect((await get(urgent.caseId)).confirmationOverdue).toBe(false);
    // processed ends it
    expect((await app.api.post(`/v1/clinical-cases/${emergency.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
    expect((await get(emergency.caseId)).confirmationOverdue).toBe(false);
    await app.advanceClock(2 * 3600);
    expect((await get(urgent.caseId)).confirmationOverdue).toBe(true);
    expect((await get(routine.caseId)).confirmationOverdue).toBe(false);
    await app.advanceClock(22 * 3600);
    expect((await get(routine.caseId)).confirmationOverdue).toBe(true);
    const list = await app.api.get(`${t.env}/clinical-cases`, await app.staffToken({ sub: t.ownerSub }));
    expect(list.body.clinicalCases.find((c: { caseId: string }) => c.caseId === urgent.caseId).confirmationOverdue).toBe(true);
  });
});
