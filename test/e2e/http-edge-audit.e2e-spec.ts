import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { TestApp } from '@svc/testing';
import { openCase, rawHttp, update, widgetToken } from './case-helpers';

/**
 * The HTTP edge over raw sockets (docs/decisions.md, "Errors and the HTTP edge", "Raw HTTP:
 * pipelining, half-close, methods, codings"): pipelined requests keep their answers when a bad request
 * follows, a client's FIN after its request does not lose the answer, a request without Host,
 * CONNECT and QUERY get the service's error answers, unknown content and transfer codings are
 * 415, and attachment items are the same on both routes that take them.
 */

const SECURITY = ['cache-control: no-store', 'x-content-type-options: nosniff', 'referrer-policy: no-referrer'];

interface Answer {
  status: number;
  head: string;
  body: any;
}

/** The HTTP/1.1 answers in what a connection received, in order (bodies by content-length or chunked). */
function answersIn(text: string): Answer[] {
  const out: Answer[] = [];
  let i = 0;
  while (i < text.length) {
    const end = text.indexOf('\r\n\r\n', i);
    if (end < 0) throw new Error(`not an HTTP answer: ${JSON.stringify(text.slice(i, i + 200))}`);
    const head = text.slice(i, end);
    const status = Number(head.split(' ')[1]);
    let j = end + 4;
    let raw = '';
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (length) {
      raw = text.slice(j, j + Number(length[1]));
      j += Number(length[1]);
    } else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      for (;;) {
        const lineEnd = text.indexOf('\r\n', j);
        const size = parseInt(text.slice(j, lineEnd), 16);
        j = lineEnd + 2;
        if (!size) {
          j += 2;
          break;
        }
        raw += text.slice(j, j + size);
        j += size + 2;
      }
    }
    let body: unknown;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    out.push({ status, head: head.toLowerCase(), body });
    i = j;
  }
  return out;
}

describe('HTTP edge audit (e2e, raw sockets)', () => {
  const app = new TestApp();
  let t: Awaited<ReturnType<TestApp['tenant']>>;
  beforeAll(async () => {
    await app.start();
    t = await app.tenant();
  });
  afterAll(() => app.stop());

  /**
   * Writes `parts` on one connection (each a separate write, `gapMs` apart), then half-closes it
   * if `fin`; resolves with every answer once the server closes the connection (or after 10 s:
   * `closed: false`).
   */
  const exchange = (parts: string[], options: { fin?: boolean; gapMs?: number } = {}): Promise<{ answers: Answer[]; closed: boolean; text: string }> =>
    new Promise((resolve, reject) => {
      const socket = connect(Number(new URL(app.baseUrl).port), '127.0.0.1', async () => {
        for (const [n, p] of parts.entries()) {
          if (n && options.gapMs) await new Promise((r) => setTimeout(r, options.gapMs));
          socket.write(p);
        }
        if (options.fin) socket.end();
      });
      let text = '';
      const done = (closed: boolean) => {
        clearTimeout(guard);
        try {
          resolve({ answers: answersIn(text), closed, text });
        } catch (err) {
          reject(err);
        }
      };
      const guard = setTimeout(() => {
        socket.destroy();
        done(false);
      }, 10_000);
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('close', () => done(true));
      socket.on('error', () => undefined); // a reset after the answers: the answers are what is checked
    });

  const request = (method: string, path: string, headers: Record<string, string>, body?: string, version = '1.1') =>
    `${method} /api${path} HTTP/${version}\r\n${Object.entries({
      ...headers,
      ...(body !== undefined ? { 'Content-Length': String(Buffer.byteLength(body)) } : {}),
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n${body ?? ''}`;
  const ping = (extra: Record<string, string> = {}) => request('GET', '/v1/ping', { Host: 'x', Authorization: `Bearer ${t.apiKey}`, ...extra });
  const caseUpdate = (caseId: string, body: unknown) =>
    request(
      'POST',
      `/v1/clinical-cases/${caseId}/updates`,
      { Host: 'x', Authorization: `Bearer ${t.apiKey}`, 'Content-Type': 'application/json' },
      JSON.stringify(body),
    );
  const progress = async (caseId: string) => (await app.api.get(`/v1/clinical-cases/${caseId}/progress`, t.apiKey)).body;
  const withSecurityHeaders = (a: Answer) => SECURITY.every((h) => a.head.includes(h));

  describe('finding 1: a bad request pipelined after good ones', () => {
    it('answers the requests before unparseable bytes first, in order, then 400 with the error body, then closes', async () => {
      const r = await exchange([ping() + ping() + 'GARBAGE\r\n\r\n']);
      expect(r.answers.map((a) => a.status)).toEqual([200, 200, 400]);
      expect(r.answers[2].body).toEqual({ code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'malformed HTTP request' }] });
      expect(withSecurityHeaders(r.answers[2])).toBe(true);
      expect(r.closed).toBe(true);
    });

    it('a write followed by headers over 16 KiB: the write is answered 200 (and applied), then 431', async () => {
      const c = await openCase(app, t);
      const body = update(1, 'processed');
      const r = await exchange([caseUpdate(c.caseId, body) + request('GET', '/v1/ping', { Host: 'x', 'X-Big': 'a'.repeat(17_000) })]);
      expect(r.answers.map((a) => a.status)).toEqual([200, 431]);
      expect(r.answers[0].body).toMatchObject({ caseId: c.caseId, sequence: 1, duplicate: false });
      expect(r.answers[1].body).toEqual({ code: 'REQUEST_HEADERS_TOO_LARGE', message: expect.any(String) });
      expect(r.closed).toBe(true);
      expect(await progress(c.caseId)).toMatchObject({ sequence: 1 });
    });

    it('the bad request sent a moment after the write: the same', async () => {
      const c = await openCase(app, t);
      const r = await exchange([caseUpdate(c.caseId, update(1, 'processed')), 'GARBAGE\r\n\r\n'], { gapMs: 5 });
      expect(r.answers.map((a) => a.status)).toEqual([200, 400]);
    });

    it('a request whose own body breaks (bad chunk) gets the 400 as its answer, after the one before it', async () => {
      const broken =
        'POST /api/client/patient-events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n';
      const r = await exchange([ping() + broken]);
      expect(r.answers.map((a) => a.status)).toEqual([200, 400]);
      expect(r.answers[1].body).toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(withSecurityHeaders(r.answers[1])).toBe(true);
      expect(r.closed).toBe(true);
    });

    it('bytes after a request that closes the connection are ignored (RFC 9112 9.6): one answer, then the close', async () => {
      const r = await exchange([ping({ Connection: 'close' }) + ping()]);
      expect(r.answers.map((a) => a.status)).toEqual([200]);
      expect(r.closed).toBe(true);
    });

    it('a bad request alone is still answered at once', async () => {
      const r = await exchange(['GARBAGE\r\n\r\n']);
      expect(r.answers.map((a) => a.status)).toEqual([400]);
      expect(r.closed).toBe(true);
    });
  });

  describe('finding 2: the client half-closes after its request', () => {
    it('a write followed by FIN is answered (and applied), then the connection closes', async () => {
      const c = await openCase(app, t);
      const r = await exchange([caseUpdate(c.caseId, update(1, 'processed'))], { fin: true });
      expect(r.answers.map((a) => a.status)).toEqual([200]);
      expect(r.answers[0].body).toMatchObject({ caseId: c.caseId, sequence: 1, duplicate: false });
      expect(r.closed).toBe(true);
      expect(await progress(c.caseId)).toMatchObject({ sequence: 1 });
    });

    it('two pipelined requests and FIN: both answered', async () => {
      const r = await exchange([ping() + ping()], { fin: true });
      expect(r.answers.map((a) => a.status)).toEqual([200, 200]);
      expect(r.closed).toBe(true);
    });

    it('a body cut short by FIN is still 400 with the error body', async () => {
      const r = await exchange(['POST /api/client/patient-events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"a"'], {
        fin: true,
      });
      expect(r.answers.map((a) => a.status)).toEqual([400]);
      expect(r.answers[0].body).toMatchObject({ code: 'VALIDATION_FAILED' });
    });
  });

  describe('finding 3: Host', () => {
    it('an HTTP/1.1 request without Host is 400 VALIDATION_FAILED with the error body and the security headers, then the close', async () => {
      for (const req of [
        `GET /api/v1/ping HTTP/1.1\r\nAuthorization: Bearer ${t.apiKey}\r\n\r\n`,
        'POST /api/client/patient-events HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
      ]) {
        const r = await exchange([req]);
        expect(r.answers.map((a) => a.status)).toEqual([400]);
        expect(r.answers[0].body).toEqual({ code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: 'Host', message: expect.any(String) }] });
        expect(withSecurityHeaders(r.answers[0])).toBe(true);
        expect(r.answers[0].head).toContain('connection: close');
        expect(r.closed).toBe(true);
      }
    });

    it('two Host lines are 400 too (RFC 9112 3.2); one Host, an empty Host, or HTTP/1.0 without Host are served', async () => {
      const two = await exchange([`GET /api/v1/ping HTTP/1.1\r\nHost: x\r\nHost: y\r\nAuthorization: Bearer ${t.apiKey}\r\n\r\n`]);
      expect(two.answers.map((a) => [a.status, a.body?.details?.[0]?.path])).toEqual([[400, 'Host']]);
      const served = await exchange([ping(), ping({ Host: '' }), `GET /api/v1/ping HTTP/1.0\r\nAuthorization: Bearer ${t.apiKey}\r\n\r\n`]);
      expect(served.answers.map((a) => a.status)).toEqual([200, 200, 200]);
    });
  });

  describe('a fuzzer, afterwards: what follows an answer that closes the connection', () => {
    const createKey = (name: string) =>
      request('POST', `${t.env}/api-keys`, { Host: 'x', Authorization: `Bearer ${t.staff}`, 'Content-Type': 'application/json' }, JSON.stringify({ name }));
    const keyNames = async () => ((await app.api.get(`${t.env}/api-keys`, t.staff)).body.apiKeys as { name: string }[]).map((k) => k.name);

    it('a request pipelined after a 400 for its Host lines, or a 417, is not processed (was: executed, never answered)', async () => {
      for (const first of [`GET /api/v1/ping HTTP/1.1\r\nAuthorization: Bearer ${t.apiKey}\r\n\r\n`, ping({ Expect: 'foo' })]) {
        const name = `after-closing-${randomUUID()}`;
        const r = await exchange([first + createKey(name)]);
        expect(r.answers.map((a) => a.status)).toEqual([first.includes('Expect') ? 417 : 400]);
        expect(r.closed).toBe(true);
        expect(await keyNames()).not.toContain(name);
      }
    });

    it('a request with Upgrade is answered, then the connection is closed (Node drops what follows in that read): nothing after it is processed', async () => {
      for (const upgrade of [
        { Upgrade: 'websocket', Connection: 'Upgrade' } as Record<string, string>,
        { Upgrade: 'h2c', Connection: 'Upgrade, HTTP2-Settings', 'HTTP2-Settings': 'AAMAAABkAARAAAAAAAIAAAAA' },
      ]) {
        const name = `after-upgrade-${randomUUID()}`;
        const started = Date.now();
        const r = await exchange([ping(upgrade) + createKey(name)]);
        expect(r.answers.map((a) => a.status)).toEqual([200]);
        expect(r.answers[0].head).toContain('connection: close');
        expect(r.closed).toBe(true);
        expect(Date.now() - started).toBeLessThan(5000); // closed after the answer, not at the keep-alive timeout
        expect(await keyNames()).not.toContain(name);
      }
    });

    it('a request answered before its body was read (415) gets that one answer, also when its body then breaks off', async () => {
      const r = await exchange(
        [
          `POST /api/client/patient-events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.apiKey}\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789`,
        ],
        { fin: true },
      );
      expect(r.answers.map((a) => a.status)).toEqual([415]);
      expect(r.closed).toBe(true);
    });
  });

  describe('finding 4: CONNECT', () => {
    it('is 404 NOT_FOUND with the error body and the security headers, then the close', async () => {
      for (const target of ['127.0.0.1:4322', '/api/v1/ping']) {
        const r = await exchange([`CONNECT ${target} HTTP/1.1\r\nHost: 127.0.0.1:4322\r\n\r\n`]);
        expect(r.answers.map((a) => a.status)).toEqual([404]);
        expect(r.answers[0].body).toEqual({ code: 'NOT_FOUND', message: expect.any(String) });
        expect(withSecurityHeaders(r.answers[0])).toBe(true);
        expect(r.closed).toBe(true);
      }
    });

    it('after the answer to a request pipelined before it', async () => {
      const r = await exchange([ping() + 'CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\n\r\n']);
      expect(r.answers.map((a) => a.status)).toEqual([200, 404]);
      expect(r.closed).toBe(true);
    });
  });

  describe('finding 5: QUERY', () => {
    it('is 404 NOT_FOUND on any path, with or without a content type (no route takes it)', async () => {
      for (const path of ['/nope', '/v1/ping', `/v1/clinical-cases/${randomUUID()}/updates`, '/widget/v1/messages']) {
        const bare = await exchange([`QUERY /api${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`]);
        expect({ path, answers: bare.answers.map((a) => [a.status, a.body]) }).toEqual({
          path,
          answers: [[404, { code: 'NOT_FOUND', message: 'Route not found' }]],
        });
        expect(withSecurityHeaders(bare.answers[0])).toBe(true);
        const typed = await rawHttp(app, 'QUERY', path, { 'content-type': 'application/json' }, '{}');
        expect({ path, status: typed.status, code: typed.body?.code }).toEqual({ path, status: 404, code: 'NOT_FOUND' });
      }
    });
  });

  describe('finding 6: content and transfer codings the service does not decode', () => {
    const post = (headers: Record<string, string>) =>
      rawHttp(app, 'POST', '/client/patient-events', { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json', ...headers }, '{}');

    it('any Content-Encoding but identity is 415 UNSUPPORTED_MEDIA_TYPE, after authentication', async () => {
      for (const coding of ['pack200-gzip', 'aes128gcm', 'exi', 'foo', 'gzip', 'identity, zstd', 'x-gzip']) {
        const r = await post({ 'content-encoding': coding });
        expect({ coding, status: r.status, body: r.body }).toEqual({
          coding,
          status: 415,
          body: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('Content-Encoding') },
        });
      }
      const anonymous = await rawHttp(app, 'POST', '/client/patient-events', { 'content-type': 'application/json', 'content-encoding': 'foo' }, '{}');
      expect(anonymous.status).toBe(401);
      // read as plain: identity, an empty value, and the charset some clients send there by mistake
      for (const coding of ['identity', '', 'IDENTITY, identity', 'utf-8']) {
        const r = await post({ 'content-encoding': coding });
        expect({ coding, status: r.status, code: r.body?.code }).toEqual({ coding, status: 400, code: 'VALIDATION_FAILED' });
      }
    });

    it('Transfer-Encoding: gzip, chunked is 415 (the body is de-chunked, not decompressed); chunked alone is read', async () => {
      const chunkedBody = (te: string) =>
        `POST /api/client/patient-events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.apiKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: ${te}\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n`;
      const gz = await exchange([chunkedBody('gzip, chunked')]);
      expect(gz.answers.map((a) => [a.status, a.body])).toEqual([
        [415, { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('Transfer-Encoding') }],
      ]);
      const plain = await exchange([chunkedBody('chunked')]);
      expect(plain.answers.map((a) => [a.status, a.body?.code])).toEqual([[400, 'VALIDATION_FAILED']]);
    });
  });

  describe('attachments: the same items on the inbound message and the widget message', () => {
    const sha = 'a'.repeat(64);
    const item = (over: Record<string, unknown>) => ({ id: randomUUID(), fileName: 'photo.jpg', contentType: 'image/jpeg', sha256: sha, ...over });
    const cases: [Record<string, unknown>, string][] = [
      [{ fileName: '' }, 'attachments[0].fileName'],
      [{ contentType: '' }, 'attachments[0].contentType'],
      [{ fileName: 'x'.repeat(201) }, 'attachments[0].fileName'],
      [{ contentType: 'x'.repeat(161) }, 'attachments[0].contentType'],
    ];

    it('an empty fileName or contentType is 400 on both; 1 and 200/160 characters pass on both', async () => {
      const c = await openCase(app, t);
      const session = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId: null });
      for (const [over, path] of cases) {
        const inbound = await app.api.post(
          `/v1/conversations/${c.caseId}/messages`,
          { requestId: randomUUID(), message: 'hi', attachments: [item(over)] },
          t.apiKey,
        );
        expect({ over, status: inbound.status, paths: inbound.body.details?.map((d: { path: string }) => d.path) }).toEqual({
          over,
          status: 400,
          paths: [path],
        });
        const widget = await app.api.post('/widget/v1/messages', { message: 'hi', attachments: [item(over)] }, session);
        expect({ over, status: widget.status, paths: widget.body.details?.map((d: { path: string }) => d.path) }).toEqual({ over, status: 400, paths: [path] });
      }
      for (const over of [
        { fileName: 'a', contentType: 'b' },
        { fileName: 'x'.repeat(200), contentType: 'x'.repeat(160) },
        { id: randomUUID().toUpperCase() },
      ]) {
        const inbound = await app.api.post(
          `/v1/conversations/${c.caseId}/messages`,
          { requestId: randomUUID(), message: 'hi', attachments: [item(over)] },
          t.apiKey,
        );
        expect({ over, status: inbound.status }).toEqual({ over, status: 201 });
        const widget = await app.api.post('/widget/v1/messages', { message: 'hi', attachments: [item(over)] }, session);
        expect({ over, status: widget.status }).toEqual({ over, status: 201 });
      }
    });
  });

  describe('doubtful point: a zero-length body labelled JSON', () => {
    it('passes on an operation that takes no body (as without the header); still 400 "empty body" where a body is taken', async () => {
      const key = await app.api.post(`${t.env}/api-keys`, { name: 'to-revoke' }, t.staff);
      expect(key.status).toBe(201);
      const revoke = await rawHttp(
        app,
        'DELETE',
        `${t.env}/api-keys/${key.body.id}`,
        { authorization: `Bearer ${t.staff}`, 'content-type': 'application/json' },
        '',
      );
      expect(revoke.status).toBe(204);
      expect((await app.api.get('/v1/ping', key.body.key)).status).toBe(401);
      // an anonymous call is still 401 first
      const anonymous = await rawHttp(app, 'DELETE', `${t.env}/api-keys/${key.body.id}`, { 'content-type': 'application/json' }, '');
      expect(anonymous.status).toBe(401);
      const taken = await rawHttp(app, 'POST', '/client/patient-events', { authorization: `Bearer ${t.apiKey}`, 'content-type': 'application/json' }, '');
      expect({ status: taken.status, body: taken.body }).toEqual({
        status: 400,
        body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'empty body' }] },
      });
    });
  });
});
