import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { TestApp } from '@svc/testing';
import { Tenant, openCase, rawHttp, update } from './case-helpers';

/**
 * GET progress and POST updates are lean routes (libs/http registerLeanRoute: Fastify serves them
 * without Nest's per-request context) and GET progress writes its answers at the end of the
 * event-loop turn, the turn's together. These are the edge rules a controller route gets from Nest's
 * guards, pipes and filter, held on the two lean routes over real HTTP: credentials before the body,
 * BAA, revocation, HEAD, empty and upper-case path ids, security headers; coalesced answers in
 * request order on pipelining connections; and no answer held back while the rest of its own
 * request is still being read (a withdrawn global deferral answered a 413 as 400). That progress
 * answers are coalesced at all is pinned by libs/http/test/lean-route.spec.ts.
 */

const JSON_CT = { 'content-type': 'application/json' };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Raw answers of requests written in one go on one connection (pipelined), split by Content-Length. */
function pipelined(app: TestApp, requests: string[]): Promise<{ status: number; body: any }[]> {
  const base = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(base.port), '127.0.0.1');
    let buf = Buffer.alloc(0);
    const answers: { status: number; body: any }[] = [];
    const guard = setTimeout(() => {
      socket.destroy();
      reject(new Error(`only ${answers.length} of ${requests.length} answers`));
    }, 10_000);
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) break;
        const head = buf.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) break;
        const body = buf.subarray(end + 4, end + 4 + length).toString('utf8');
        answers.push({ status: Number(head.split(' ')[1]), body: body ? JSON.parse(body) : undefined });
        buf = buf.subarray(end + 4 + length);
      }
      if (answers.length === requests.length) {
        clearTimeout(guard);
        socket.destroy();
        resolve(answers);
      }
    });
    socket.on('error', reject);
    socket.write(requests.join(''));
  });
}

describe('lean case routes: GET progress and POST updates (e2e, real HTTP)', () => {
  const app = new TestApp();
  let t: Tenant;
  let noBaa: Tenant;
  let caseId: string;
  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
    noBaa = await app.tenant({ baa: false });
    ({ caseId } = await openCase(app, t));
  });
  afterAll(() => app.stop());

  const progress = (id: string) => `/v1/clinical-cases/${id}/progress`;
  const updates = (id: string) => `/v1/clinical-cases/${id}/updates`;

  it('judges the credential before the body: 401 without or with a wrong key, 403 without a BAA, then the body problem', async () => {
    const bodies = [
      { headers: JSON_CT, body: '{bad', status: 400, code: 'VALIDATION_FAILED' },
      { headers: { 'content-type': 'text/plain' }, body: 'x', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
      { headers: JSON_CT, body: '', status: 400, code: 'VALIDATION_FAILED' },
      { headers: JSON_CT, body: JSON.stringify({ ...update(1, 'processed'), extra: 1 }), status: 400, code: 'VALIDATION_FAILED' },
    ];
    for (const b of bodies) {
      for (const headers of [{}, bearer('svc_sb_not-a-key'), bearer(t.staff)]) {
        const r = await rawHttp(app, 'POST', updates(caseId), { ...b.headers, ...headers }, b.body);
        expect({ status: r.status, body: r.body }).toEqual({ status: 401, body: { code: 'INVALID_API_CREDENTIAL', message: expect.any(String) } });
      }
      const refused = await rawHttp(app, 'POST', updates(caseId), { ...b.headers, ...bearer(noBaa.apiKey) }, b.body);
      expect({ status: refused.status, body: refused.body }).toEqual({ status: 403, body: { code: 'BAA_REQUIRED', message: expect.any(String) } });
      const judged = await rawHttp(app, 'POST', updates(caseId), { ...b.headers, ...bearer(t.apiKey) }, b.body);
      expect({ status: judged.status, code: judged.body?.code }).toEqual({ status: b.status, code: b.code });
    }
    const unknownField = await rawHttp(
      app,
      'POST',
      updates(caseId),
      { ...JSON_CT, ...bearer(t.apiKey) },
      JSON.stringify({ ...update(1, 'processed'), extra: 1 }),
    );
    expect(unknownField.body.details).toEqual([{ path: 'extra', message: expect.any(String) }]);
    // Nothing of the refused requests was written.
    const p = await app.api.get(progress(caseId), t.apiKey);
    expect(p.body.nextSequence).toBe(1);
  });

  it('GET progress: 401 without a key, 403 BAA_REQUIRED without a BAA, 404 for another tenant’s case; a body sent with it is ignored, as on every GET', async () => {
    expect((await rawHttp(app, 'GET', progress(caseId), {})).body).toEqual({ code: 'INVALID_API_CREDENTIAL', message: expect.any(String) });
    const noBaaAnswer = await rawHttp(app, 'GET', progress(caseId), bearer(noBaa.apiKey));
    expect({ status: noBaaAnswer.status, code: noBaaAnswer.body.code }).toEqual({ status: 403, code: 'BAA_REQUIRED' });
    const other = await app.tenant();
    const foreign = await rawHttp(app, 'GET', progress(caseId), bearer(other.apiKey));
    expect({ status: foreign.status, code: foreign.body.code }).toEqual({ status: 404, code: 'NOT_FOUND' });
    for (const [headers, body] of [
      [JSON_CT, ''],
      [{ 'content-type': 'text/plain' }, 'x'],
      [JSON_CT, '{bad'],
    ] as const) {
      const r = await rawHttp(app, 'GET', progress(caseId), { ...headers, ...bearer(t.apiKey) }, body);
      expect({ status: r.status, caseId: r.body?.caseId }).toEqual({ status: 200, caseId });
    }
  });

  it('a key revoked after it was accepted on the lean routes is refused on the next request', async () => {
    const staffKey = await app.api.post(`${t.env}/api-keys`, { name: 'revoked-soon' }, t.staff);
    const key = staffKey.body.key as string;
    expect((await app.api.get(progress(caseId), key)).status).toBe(200);
    expect((await app.api.post(updates(caseId), { ...update(99, 'processed') }, key)).status).toBe(409); // accepted, sequence refused
    expect((await app.api.delete(`${t.env}/api-keys/${staffKey.body.id}`, t.staff)).status).toBe(204);
    for (const r of [await app.api.get(progress(caseId), key), await app.api.post(updates(caseId), update(1, 'processed'), key)]) {
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 401, code: 'INVALID_API_CREDENTIAL' });
    }
  });

  it('HEAD progress answers GET’s headers without a body; without a key 401', async () => {
    const get = await rawHttp(app, 'GET', progress(caseId), bearer(t.apiKey));
    const head = await app.api.request('HEAD', progress(caseId), { token: t.apiKey });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(get.text)));
    expect((await app.api.request('HEAD', progress(caseId))).status).toBe(401);
  });

  it('an empty case id is an unknown route, an upper-case one the same case, a non-uuid one 400; every answer carries the security headers', async () => {
    for (const [method, path] of [
      ['GET', '/v1/clinical-cases//progress'],
      ['POST', '/v1/clinical-cases//updates'],
    ] as const) {
      const r = await rawHttp(app, method, path, { ...JSON_CT, ...bearer(t.apiKey) }, method === 'POST' ? JSON.stringify(update(1, 'processed')) : undefined);
      expect({ status: r.status, body: r.body }).toEqual({ status: 404, body: { code: 'NOT_FOUND', message: 'Route not found' } });
    }
    const upper = await app.api.get(progress(caseId.toUpperCase()), t.apiKey);
    expect({ status: upper.status, caseId: upper.body.caseId }).toEqual({ status: 200, caseId });
    const notUuid = await app.api.post(updates('not-a-case'), update(1, 'processed'), t.apiKey);
    expect({ status: notUuid.status, body: notUuid.body }).toEqual({
      status: 400,
      body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: 'caseId', message: expect.any(String) }] },
    });
    for (const r of [upper, notUuid, await app.api.get(progress(caseId))]) {
      expect({
        cache: r.headers.get('cache-control'),
        sniff: r.headers.get('x-content-type-options'),
        referrer: r.headers.get('referrer-policy'),
        type: r.headers.get('content-type'),
      }).toEqual({ cache: 'no-store', sniff: 'nosniff', referrer: 'no-referrer', type: 'application/json; charset=utf-8' });
    }
  });

  it('an update accepted by the lean route is read back at once, also with its id in capitals as a retry', async () => {
    const body = update(1, 'processed');
    const first = await app.api.post(updates(caseId), body, t.apiKey);
    expect(first.status).toBe(200);
    const retry = await app.api.post(updates(caseId.toUpperCase()), { ...body, updateId: body.updateId.toUpperCase() }, t.apiKey);
    expect({ status: retry.status, duplicate: retry.body.duplicate }).toEqual({ status: 200, duplicate: true });
    const p = await app.api.get(progress(caseId), t.apiKey);
    expect({ status: p.body.status, nextSequence: p.body.nextSequence, externalReference: p.body.externalReference }).toEqual({
      status: 'processed',
      nextSequence: 2,
      externalReference: body.externalReference,
    });
  });

  it('24 connections pipelining progress reads at once: each gets its answers in request order, a 404 between coalesced 200s in its place', async () => {
    const cases: string[] = [];
    for (let i = 0; i < 6; i++) cases.push((await openCase(app, t)).caseId);
    const host = new URL(app.baseUrl).host;
    const prefix = new URL(app.baseUrl).pathname;
    const unknown = randomUUID();
    // Each connection reads its own sequence of cases (one of them unknown: a 404 between 200s).
    const runs = Array.from({ length: 24 }, (_, c) => {
      const ids = Array.from({ length: 8 }, (_, i) => (i === 3 ? unknown : cases[(c + i) % cases.length]));
      const requests = ids.map((id) => `GET ${prefix}${progress(id)} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${t.apiKey}\r\n\r\n`);
      return pipelined(app, requests).then((answers) => ({ ids, answers }));
    });
    for (const { ids, answers } of await Promise.all(runs)) {
      expect(answers.map((a) => (a.status === 200 ? a.body.caseId : `${a.status}:${a.body.code}`))).toEqual(
        ids.map((id) => (id === unknown ? '404:NOT_FOUND' : id)),
      );
    }
  });

  it('a body over the limit is 413 on the update route every time: no answer waits past a read of its own request (the parse error of what follows never answers first)', async () => {
    const host = new URL(app.baseUrl).host;
    const prefix = new URL(app.baseUrl).pathname;
    const size = 1_100_000;
    for (let i = 0; i < 16; i++) {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(app.baseUrl).port), '127.0.0.1');
        let text = '';
        socket.on('data', (c) => (text += c.toString('latin1')));
        socket.on('close', () => resolve(text));
        socket.on('error', () => resolve(text));
        setTimeout(() => {
          socket.destroy();
          reject(new Error('no answer'));
        }, 10_000).unref();
        socket.write(
          `POST ${prefix}${updates(caseId)} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${t.apiKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
            `${size.toString(16)}\r\n${'x'.repeat(size)}\r\nZZ\r\n`,
        );
      });
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
    }
  });
});
