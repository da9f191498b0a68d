import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { onTopology, TestApp, TestResponse } from '@svc/testing';
import { WebhookReceiver, until } from '../../apps/webhook-dispatcher/test/receiver';
import { Tenant } from './case-helpers';

/**
 * Bounded lists (decisions "Bounded lists", docs/decisions.md): the conversation read takes `limit`
 * (1-500, default 100) beside `afterSequence` and answers `hasMore`; the staff lists of cases,
 * webhook deliveries and workflow runs take `limit` (1-200, default 50) and an opaque `cursor`, and
 * answer `nextCursor` (null at the end). Over real HTTP.
 */
const redisPrefix = `svc-e2e-paging-${randomUUID()}`;
// Standalone: once on each read store. The topology has its own (Redis): once, against it.
const stores: [string, Record<string, string>][] = onTopology()
  ? [['the topology', {}]]
  : [
      ['SQLite read store', {}],
      ['Redis read store', { READ_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: redisPrefix }],
    ];

afterAll(async () => {
  const redis = new Redis('redis://127.0.0.1:6379');
  const keys = await redis.keys(`${redisPrefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

describe.each(stores)('bounded lists (e2e, real HTTP, %s)', (_name, env) => {
  const app = new TestApp(undefined, env);
  const receiver = new WebhookReceiver();
  let t: Tenant;
  let other: Tenant;
  let endpointId: string;
  let otherEndpointId: string;
  /** Case ids opened in `t`'s sandbox, all at once (so that several share a millisecond). */
  let caseIds: string[];

  const CASES = 55;

  beforeAll(async () => {
    await receiver.start();
    await app.start();
    t = await app.tenant();
    other = await app.tenant();
    const url = receiver.script('/paging', [200]);
    const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url, events: ['clinical_case.opened'] }, t.staff);
    expect(ep.status).toBe(201);
    endpointId = ep.body.id;
    const ep2 = await app.api.post(`${t.env}/webhook-endpoints`, { url: receiver.script('/paging-2', [200]), events: ['clinical_case.resolved'] }, t.staff);
    expect(ep2.status).toBe(201);
    otherEndpointId = ep2.body.id;
    const { patientId } = await app.enrolledPatient(t);
    const opened = await Promise.all(
      Array.from({ length: CASES }, async (_, i) => {
        const r = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: `Please call the patient back (${i})` }, t.staff);
        expect(r.status).toBe(201);
        return r.body.caseId as string;
      }),
    );
    caseIds = opened;
  });
  afterAll(async () => {
    await app.stop();
    await receiver.stop();
  });

  /** Follows `nextCursor` from the first page to the end; answers every page's items (by `idOf`). */
  async function walk(path: string, array: string, idOf: (item: any) => string, limit: number, token = t.staff) {
    const pages: string[][] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 1000; i++) {
      const q: URLSearchParams = new URLSearchParams({ limit: String(limit), ...(cursor === null ? {} : { cursor }) });
      const r: TestResponse = await app.api.get(`${path}${path.includes('?') ? '&' : '?'}${q}`, token);
      expect([r.status, r.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
      expect(r.body).toHaveProperty('nextCursor');
      const items = r.body[array] as unknown[];
      expect(items.length).toBeLessThanOrEqual(limit);
      pages.push(items.map(idOf));
      cursor = r.body.nextCursor as string | null;
      if (cursor === null) return pages;
      expect(typeof cursor).toBe('string');
      expect(items.length).toBe(limit); // a page short of its limit is the last one
    }
    throw new Error('walk did not end');
  }

  /** 400 VALIDATION_FAILED naming `path`. */
  function expectInvalid(r: { status: number; body: any }, path: string, what: string) {
    expect([what, r.status, r.body?.code, r.body?.details?.map((d: { path: string }) => d.path)]).toEqual([what, 400, 'VALIDATION_FAILED', [path]]);
  }

  describe('GET /v1/conversations/{id}/messages', () => {
    const list = (id: string, query = '') => app.api.get(`/v1/conversations/${id}/messages${query}`, t.apiKey);
    let conversationId: string;
    beforeAll(async () => {
      conversationId = caseIds[0];
      const long = 'My knee is still swollen after the walk; '.repeat(100); // ~4 KB each
      for (let i = 1; i <= 300; i++) {
        const r = await app.api.post(`/v1/conversations/${conversationId}/messages`, { requestId: randomUUID(), message: `${i}: ${long}` }, t.apiKey);
        expect(r.status).toBe(201);
      }
    });

    it('answers the first 100 by default with hasMore, then walks with afterSequence to the end', async () => {
      const first = await list(conversationId);
      expect(first.status).toBe(200);
      expect(first.body.conversationId).toBe(conversationId);
      expect(first.body.hasMore).toBe(true);
      expect(first.body.messages.map((m: { sequence: number }) => m.sequence)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      expect(first.body.messages[99].message).toMatch(/^100: My knee/);
      expect(first.text.length).toBeLessThan(600_000);

      const seen: number[] = [];
      let after = 0;
      let hasMore = true;
      let pages = 0;
      while (hasMore) {
        const r = await list(conversationId, `?afterSequence=${after}&limit=70`);
        expect(r.status).toBe(200);
        const seqs = r.body.messages.map((m: { sequence: number }) => m.sequence);
        seen.push(...seqs);
        hasMore = r.body.hasMore;
        if (hasMore) expect(seqs).toHaveLength(70);
        after = seqs.at(-1) ?? after;
        if (++pages > 10) throw new Error('walk did not end');
      }
      expect(pages).toBe(5); // 70, 70, 70, 70, 20
      expect(seen).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    });

    it('hasMore is exact at the boundaries; limit 1 and 500 are accepted', async () => {
      const all = await list(conversationId, '?limit=500');
      expect([all.body.messages.length, all.body.hasMore]).toEqual([300, false]);
      const exact = await list(conversationId, '?limit=300');
      expect([exact.body.messages.length, exact.body.hasMore]).toEqual([300, false]);
      const one = await list(conversationId, '?limit=1');
      expect([one.body.messages.map((m: { sequence: number }) => m.sequence), one.body.hasMore]).toEqual([[1], true]);
      const last = await list(conversationId, '?afterSequence=299&limit=1');
      expect([last.body.messages.map((m: { sequence: number }) => m.sequence), last.body.hasMore]).toEqual([[300], false]);
      const beyond = await list(conversationId, '?afterSequence=300');
      expect(beyond.body).toEqual({ conversationId, messages: [], hasMore: false });
      const huge = await list(conversationId, '?afterSequence=99999999999999999999');
      expect(huge.body).toEqual({ conversationId, messages: [], hasMore: false });
    });

    it('rejects a limit out of 1-500 or not an integer: 400 naming limit', async () => {
      for (const bad of ['0', '501', 'abc', '-1', '1.5', '', '1e2', ' 5']) {
        expectInvalid(await list(conversationId, `?limit=${encodeURIComponent(bad)}`), 'limit', bad);
      }
      expectInvalid(await list(conversationId, '?limit=1&limit=2'), 'limit', 'repeated');
      // The id is checked first: an unknown conversation is 404 whatever the query.
      expect((await list(randomUUID(), '?limit=5')).status).toBe(404);
    });
  });

  describe('GET E/clinical-cases', () => {
    const path = () => `${t.env}/clinical-cases`;

    it('answers 50 by default with nextCursor; a cursor walk sees every case exactly once, in the unpaged order', async () => {
      const first = await app.api.get(path(), t.staff);
      expect(first.status).toBe(200);
      expect(first.body.clinicalCases).toHaveLength(50);
      expect(typeof first.body.nextCursor).toBe('string');
      const all = await app.api.get(`${path()}?limit=200`, t.staff);
      expect(all.body.nextCursor).toBeNull();
      const order = all.body.clinicalCases.map((c: { caseId: string }) => c.caseId);
      expect([...order].sort()).toEqual([...caseIds].sort());
      // Newest first (items sharing a timestamp keep one order: the read-store conformance suite pins the tiebreaker).
      const opened = all.body.clinicalCases.map((c: { openedAt: string }) => Date.parse(c.openedAt));
      expect(opened).toEqual([...opened].sort((a, b) => b - a));
      expect(first.body.clinicalCases.map((c: { caseId: string }) => c.caseId)).toEqual(order.slice(0, 50));

      for (const limit of [1, 4, 7, 50, 54, 55]) {
        const pages = await walk(path(), 'clinicalCases', (c) => c.caseId, limit);
        expect([limit, pages.flat()]).toEqual([limit, order]);
        expect(pages.length).toBe(Math.ceil(CASES / limit));
      }
    });

    it('an empty list answers nextCursor null', async () => {
      const r = await app.api.get(`${other.env}/clinical-cases`, other.staff);
      expect(r.body).toEqual({ clinicalCases: [], nextCursor: null });
    });

    it('rejects a bad limit or cursor, and a cursor of another list, environment or organization: 400', async () => {
      for (const bad of ['0', '201', 'abc', '-3', '2.0', ''])
        expectInvalid(await app.api.get(`${path()}?limit=${encodeURIComponent(bad)}`, t.staff), 'limit', bad);
      expect((await app.api.get(`${path()}?limit=200`, t.staff)).status).toBe(200);
      const cursor = (await app.api.get(`${path()}?limit=2`, t.staff)).body.nextCursor as string;
      const forged = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
      for (const bad of ['', 'x', 'not base64!', forged({}), forged([1, 2]), forged('abc'), cursor.slice(0, -3), `${cursor}AAAA`, 'A'.repeat(5000)]) {
        expectInvalid(await app.api.get(`${path()}?cursor=${encodeURIComponent(bad)}`, t.staff), 'cursor', bad.slice(0, 40));
      }
      // Another organization's list, and the production environment of the same organization.
      expectInvalid(await app.api.get(`${other.env}/clinical-cases?cursor=${encodeURIComponent(cursor)}`, other.staff), 'cursor', 'other organization');
      const production = `/organizations/${t.orgId}/environments/${t.production}/clinical-cases`;
      expectInvalid(await app.api.get(`${production}?cursor=${encodeURIComponent(cursor)}`, t.staff), 'cursor', 'production environment');
      // A cursor of the deliveries list is not a cursor of the cases list (and the other way round).
      const dCursor = (await app.api.get(`${t.env}/webhook-endpoints/${endpointId}/deliveries?limit=1`, t.staff)).body.nextCursor as string;
      expect(typeof dCursor).toBe('string');
      expectInvalid(await app.api.get(`${path()}?cursor=${encodeURIComponent(dCursor)}`, t.staff), 'cursor', 'deliveries cursor');
      expectInvalid(
        await app.api.get(`${t.env}/webhook-endpoints/${endpointId}/deliveries?cursor=${encodeURIComponent(cursor)}`, t.staff),
        'cursor',
        'cases cursor',
      );
    });
  });

  describe('GET E/webhook-endpoints/{id}/deliveries', () => {
    const path = (id = endpointId) => `${t.env}/webhook-endpoints/${id}/deliveries`;
    let order: string[];
    beforeAll(async () => {
      const all = await until(
        async () => {
          const r = await app.api.get(`${path()}?limit=200`, t.staff);
          return r.body.deliveries?.length === CASES ? r.body : null;
        },
        30_000,
        `${CASES} deliveries`,
      );
      expect(all.nextCursor).toBeNull();
      order = all.deliveries.map((d: { id: string }) => d.id);
    });

    it('answers 50 by default with nextCursor; a cursor walk sees every delivery exactly once, in the unpaged order', async () => {
      const first = await app.api.get(path(), t.staff);
      expect(first.status).toBe(200);
      expect(first.body.deliveries.map((d: { id: string }) => d.id)).toEqual(order.slice(0, 50));
      expect(typeof first.body.nextCursor).toBe('string');
      for (const limit of [1, 6, 50, 55]) {
        const pages = await walk(path(), 'deliveries', (d) => d.id, limit);
        expect([limit, pages.flat()]).toEqual([limit, order]);
      }
      // With ?status= too (every one of these was delivered).
      await until(
        async () => ((await app.api.get(`${path()}?status=delivered&limit=200`, t.staff)).body.deliveries.length === CASES ? true : null),
        // On the topology deliveries go through Kafka and the dispatcher's retries: a loaded CI machine needs more than standalone.
        90_000,
        'all delivered',
      );
      const delivered = await walk(`${path()}?status=delivered`, 'deliveries', (d) => d.id, 8);
      expect(delivered.flat()).toEqual(order);
    });

    it('rejects a bad limit, a bad cursor, and a cursor of another endpoint or status list: 400', async () => {
      for (const bad of ['0', '201', 'abc', '1000']) expectInvalid(await app.api.get(`${path()}?limit=${bad}`, t.staff), 'limit', bad);
      expect((await app.api.get(`${path()}?limit=1`, t.staff)).status).toBe(200);
      const cursor = (await app.api.get(`${path()}?limit=3`, t.staff)).body.nextCursor as string;
      expectInvalid(await app.api.get(`${path()}?cursor=garbage`, t.staff), 'cursor', 'garbage');
      expectInvalid(await app.api.get(`${path(otherEndpointId)}?cursor=${encodeURIComponent(cursor)}`, t.staff), 'cursor', 'other endpoint');
      expectInvalid(await app.api.get(`${path()}?status=pending&cursor=${encodeURIComponent(cursor)}`, t.staff), 'cursor', 'status list');
      expect((await app.api.get(path(otherEndpointId), t.staff)).body).toEqual({ deliveries: [], nextCursor: null });
    });
  });

  describe('GET P/{profileId}/runs', () => {
    const P = () => `${t.env}/conversation-workflows`;
    const RUNS = 13;
    let workflowId: string;
    let otherWorkflowId: string;
    beforeAll(async () => {
      const definition = {
        category: 'support',
        description: 'Hours',
        triggerPhrases: ['hours'],
        steps: [{ id: 'r', type: 'reply', message: 'We open at nine.' }],
      };
      const wf = await app.api.post(P(), { stableKey: 'paged_runs', name: 'Paged runs', definition }, t.staff);
      if (wf.status !== 201) throw new Error(wf.text);
      workflowId = wf.body.id;
      const wf2 = await app.api.post(P(), { stableKey: 'other_runs', name: 'Other runs', definition }, t.staff);
      expect(wf2.status).toBe(201);
      otherWorkflowId = wf2.body.id;
      const versionId = wf.body.draftVersionId as string;
      for (let i = 0; i < RUNS; i++) {
        const r = await app.api.post(`${P()}/versions/${versionId}/test`, { expectedRevision: 1, opening: 'hours', replies: [] }, t.staff);
        expect(r.status).toBe(201);
      }
    });

    it('a cursor walk sees every run exactly once, newest first; default 50 with nextCursor null at the end', async () => {
      const all = await app.api.get(`${P()}/${workflowId}/runs`, t.staff);
      expect(all.status).toBe(200);
      expect(all.body.runs).toHaveLength(RUNS);
      expect(all.body.nextCursor).toBeNull();
      const order = all.body.runs.map((r: { runId: string }) => r.runId);
      const started = all.body.runs.map((r: { startedAt: string }) => Date.parse(r.startedAt));
      expect(started).toEqual([...started].sort((a, b) => b - a));
      for (const limit of [1, 5, 13]) {
        const pages = await walk(`${P()}/${workflowId}/runs`, 'runs', (r) => r.runId, limit);
        expect([limit, pages.flat()]).toEqual([limit, order]);
      }
      expect((await app.api.get(`${P()}/${otherWorkflowId}/runs`, t.staff)).body).toEqual({ runs: [], nextCursor: null });
    });

    it('rejects a bad limit, a bad cursor, and a cursor of another workflow: 400', async () => {
      for (const bad of ['0', '201', 'abc']) expectInvalid(await app.api.get(`${P()}/${workflowId}/runs?limit=${bad}`, t.staff), 'limit', bad);
      expect((await app.api.get(`${P()}/${workflowId}/runs?limit=200`, t.staff)).status).toBe(200);
      const cursor = (await app.api.get(`${P()}/${workflowId}/runs?limit=2`, t.staff)).body.nextCursor as string;
      expectInvalid(await app.api.get(`${P()}/${workflowId}/runs?cursor=%7B%7D`, t.staff), 'cursor', '{}');
      expectInvalid(await app.api.get(`${P()}/${otherWorkflowId}/runs?cursor=${encodeURIComponent(cursor)}`, t.staff), 'cursor', 'other workflow');
      expectInvalid(await app.api.get(`${t.env}/clinical-cases?cursor=${encodeURIComponent(cursor)}`, t.staff), 'cursor', 'runs cursor on cases');
    });
  });
});
