import { createHmac } from 'node:crypto';
import { IncomingHttpHeaders, Server, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { WebhookVerificationError, isOrderLookupRequested, signDestinationCall, signWebhook, verifyDestinationCall, verifyWebhook } from '../src';
import { sendWebhook } from '../../../apps/webhook-dispatcher/src/adapters/outbound/send-webhook';
import { callDestination } from '../../../apps/workflow-engine/src/adapters/outbound/destination-client';

const SECRET = 'whsec_test_secret';
const NOW = new Date('2026-03-01T12:00:00.000Z');
const NOW_S = Math.floor(NOW.getTime() / 1000);
const ID = '8b0e6a43-9a59-4c53-a47e-1b2c3d4e5f60';
const envelope = { id: ID, type: 'clinical_case.opened', createdAt: '2026-03-01T11:59:59.000Z', data: { caseId: 'c', patientNotes: 'é — naïve' } };
const BODY = Buffer.from(JSON.stringify(envelope), 'utf8');

/** The spec's formula, written out here on its own (not the package's code): `v1=` + hex HMAC-SHA256 of `<ts>.<raw body>`. */
const specWebhookSignature = (secret: string, ts: number | string, body: Buffer) =>
  `v1=${createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(Buffer.concat([Buffer.from(`${ts}.`), body]))
    .digest('hex')}`;
const headersFor = (ts: number | string = NOW_S, body = BODY, secret = SECRET) => ({
  'x-svc-event-id': ID,
  'x-svc-event-type': 'clinical_case.opened',
  'x-svc-timestamp': String(ts),
  'x-svc-signature': specWebhookSignature(secret, ts, body),
  'idempotency-key': ID,
});

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof WebhookVerificationError) {
      expect(e.statusCode).toBe(400);
      return e.reason;
    }
    throw e;
  }
  return 'verified';
}

describe('verifyWebhook', () => {
  it('returns the typed event of a delivery signed as the spec says', () => {
    const event = verifyWebhook(BODY, headersFor(), SECRET, { now: NOW });
    expect(event).toEqual(envelope);
    if (event.type === 'clinical_case.opened') expect(event.data.caseId).toBe('c'); // narrowed by type
    // The package's signer gives the spec's signature, byte for byte.
    expect(signWebhook(SECRET, NOW_S, BODY)).toBe(specWebhookSignature(SECRET, NOW_S, BODY));
  });

  it('takes the body as a Buffer, a Uint8Array or a string, and headers in any case or as Fetch Headers', () => {
    const h = headersFor();
    expect(verifyWebhook(new Uint8Array(BODY), h, SECRET, { now: NOW }).id).toBe(ID);
    expect(verifyWebhook(BODY.toString('utf8'), h, SECRET, { now: NOW.getTime() }).id).toBe(ID);
    const upper = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook(BODY, upper, SECRET, { now: NOW }).id).toBe(ID);
    expect(verifyWebhook(BODY, new Headers(h), SECRET, { now: NOW }).id).toBe(ID);
  });

  it('says why it refuses: missing headers, unparseable headers or body, bad signature, stale timestamp', () => {
    const h = headersFor();
    const { 'x-svc-signature': _s, ...noSignature } = h;
    const { 'x-svc-event-id': _i, ...noId } = h;
    expect(reasonOf(() => verifyWebhook(BODY, {}, SECRET, { now: NOW }))).toBe('MISSING_HEADER');
    expect(reasonOf(() => verifyWebhook(BODY, noSignature, SECRET, { now: NOW }))).toBe('MISSING_HEADER');
    expect(reasonOf(() => verifyWebhook(BODY, noId, SECRET, { now: NOW }))).toBe('MISSING_HEADER');
    expect(reasonOf(() => verifyWebhook(BODY, { ...h, 'x-svc-timestamp': '' }, SECRET, { now: NOW }))).toBe('MISSING_HEADER');
    expect(reasonOf(() => verifyWebhook(BODY, { ...h, 'x-svc-timestamp': '1.5e9' }, SECRET, { now: NOW }))).toBe('UNPARSEABLE');
    expect(reasonOf(() => verifyWebhook(BODY, { ...h, 'x-svc-signature': 'v1=abc' }, SECRET, { now: NOW }))).toBe('UNPARSEABLE');
    expect(reasonOf(() => verifyWebhook(BODY, { ...h, 'x-svc-signature': h['x-svc-signature'].toUpperCase() }, SECRET, { now: NOW }))).toBe('UNPARSEABLE');
    expect(reasonOf(() => verifyWebhook(BODY, { ...h, 'x-svc-signature': [h['x-svc-signature'], h['x-svc-signature']] }, SECRET, { now: NOW }))).toBe(
      'UNPARSEABLE',
    );
    // One byte changed, another secret, another timestamp than the one signed.
    expect(reasonOf(() => verifyWebhook(Buffer.concat([BODY, Buffer.from(' ')]), h, SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyWebhook(BODY, h, 'whsec_other', { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyWebhook(BODY, { ...h, 'x-svc-timestamp': String(NOW_S + 1) }, SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
    // Stale either way, 300 s by default, the tolerance as given.
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S - 300), SECRET, { now: NOW }))).toBe('verified');
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S - 301), SECRET, { now: NOW }))).toBe('STALE_TIMESTAMP');
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S + 301), SECRET, { now: NOW }))).toBe('STALE_TIMESTAMP');
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S - 3 * 86_400), SECRET, { now: NOW }))).toBe('STALE_TIMESTAMP');
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S - 3 * 86_400), SECRET, { now: NOW, toleranceSeconds: 4 * 86_400 }))).toBe('verified');
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S - 11), SECRET, { now: NOW, toleranceSeconds: 10 }))).toBe('STALE_TIMESTAMP');
    // Without `now`: the receiver's own clock.
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(Math.floor(Date.now() / 1000)), SECRET))).toBe('verified');
    expect(reasonOf(() => verifyWebhook(BODY, headersFor(NOW_S), SECRET))).toBe('STALE_TIMESTAMP');
  });

  it('parses only after the signature verified, and only an envelope of a known event whose id is x-svc-event-id', () => {
    const signed = (body: string, id = ID) => ({ ...headersFor(NOW_S, Buffer.from(body)), 'x-svc-event-id': id });
    const cases: [string, string][] = [
      ['not json', 'UNPARSEABLE'],
      ['[]', 'UNPARSEABLE'],
      [JSON.stringify({ ...envelope, id: 'another' }), 'UNPARSEABLE'],
      [JSON.stringify({ ...envelope, type: 'clinical_case.closed' }), 'UNPARSEABLE'],
      [JSON.stringify({ ...envelope, createdAt: 'yesterday' }), 'UNPARSEABLE'],
      [JSON.stringify({ ...envelope, data: [] }), 'UNPARSEABLE'],
    ];
    for (const [body, reason] of cases)
      expect({ body, reason: reasonOf(() => verifyWebhook(body, signed(body), SECRET, { now: NOW })) }).toEqual({ body, reason });
    // Unsigned garbage is a bad signature, never a parse attempt.
    expect(reasonOf(() => verifyWebhook('not json', headersFor(), SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
  });

  it('accepts a list of secrets while rotating, and refuses an empty secret as a programming error', () => {
    expect(verifyWebhook(BODY, headersFor(), ['whsec_new', SECRET], { now: NOW }).id).toBe(ID);
    expect(() => verifyWebhook(BODY, headersFor(), '', { now: NOW })).toThrow(TypeError);
    expect(() => verifyWebhook(BODY, headersFor(), [], { now: NOW })).toThrow(TypeError);
    expect(() => verifyWebhook(JSON.parse(BODY.toString()) as never, headersFor(), SECRET, { now: NOW })).toThrow(TypeError);
  });
});

const ORDER_LOOKUP = JSON.stringify({ version: 1, type: 'order_lookup.requested', requestId: 'run-1', patient: { externalId: 'ext-1' } });

describe('verifyDestinationCall', () => {
  const body = ORDER_LOOKUP;
  const specSignature = (ts: number, method: string, target: string, raw: string) =>
    `v1=${createHmac('sha256', SECRET).update(`${ts}.${method} ${target}\n${raw}`).digest('hex')}`;
  const call = (over: Partial<{ method: string; url: string; rawBody: string; ts: number; signed: string }> = {}) => {
    const method = over.method ?? 'POST';
    const url = over.url ?? '/api/orders/lookup?src=svc';
    const ts = over.ts ?? NOW_S;
    const raw = over.rawBody ?? body;
    return { method, url, rawBody: raw, headers: { 'x-svc-timestamp': String(ts), 'x-svc-signature': over.signed ?? specSignature(ts, method, url, raw) } };
  };

  it('verifies method, path and query and body, and parses the body after', () => {
    const verified = verifyDestinationCall(call(), SECRET, { now: NOW });
    expect(verified).toEqual({ method: 'POST', pathAndQuery: '/api/orders/lookup?src=svc', timestamp: NOW_S, body: JSON.parse(body) });
    expect(isOrderLookupRequested(verified.body)).toBe(true);
    expect(signDestinationCall(SECRET, NOW_S, 'POST', '/api/orders/lookup?src=svc', body)).toBe(
      specSignature(NOW_S, 'POST', '/api/orders/lookup?src=svc', body),
    );
    // A GET without a body; an absolute URL counts by its path and query.
    const get = call({ method: 'GET', url: '/api/orders/A-1', rawBody: '' });
    expect(verifyDestinationCall({ ...get, rawBody: undefined }, SECRET, { now: NOW })).toMatchObject({ method: 'GET', body: undefined });
    expect(verifyDestinationCall({ ...get, url: 'https://orders.example/api/orders/A-1' }, SECRET, { now: NOW }).pathAndQuery).toBe('/api/orders/A-1');
  });

  it('refuses another method, path, query, body or secret, a stale call, and missing or malformed headers', () => {
    const good = call();
    expect(reasonOf(() => verifyDestinationCall({ ...good, method: 'PUT' }, SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyDestinationCall({ ...good, url: '/api/orders/lookup' }, SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyDestinationCall({ ...good, url: '/orders/lookup?src=svc' }, SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyDestinationCall({ ...good, rawBody: body.replace('ext-1', 'ext-2') }, SECRET, { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyDestinationCall(good, 'another', { now: NOW }))).toBe('BAD_SIGNATURE');
    expect(reasonOf(() => verifyDestinationCall(good, SECRET, { now: new Date(NOW.getTime() + 301_000) }))).toBe('STALE_TIMESTAMP');
    expect(reasonOf(() => verifyDestinationCall({ ...good, headers: {} }, SECRET, { now: NOW }))).toBe('MISSING_HEADER');
    expect(reasonOf(() => verifyDestinationCall({ ...good, headers: { ...good.headers, 'x-svc-timestamp': 'now' } }, SECRET, { now: NOW }))).toBe(
      'UNPARSEABLE',
    );
    const notJson = call({ rawBody: 'orders please' });
    expect(reasonOf(() => verifyDestinationCall(notJson, SECRET, { now: NOW }))).toBe('UNPARSEABLE');
    expect(isOrderLookupRequested({ version: 2, type: 'order_lookup.requested', requestId: 'r', patient: { externalId: 'e' } })).toBe(false);
  });
});

/** A loopback server that records each request as received (target, headers, raw bytes). */
async function recorder(): Promise<{
  url: string;
  got: { method: string; target: string; headers: IncomingHttpHeaders; raw: Buffer }[];
  close(): Promise<void>;
}> {
  const got: { method: string; target: string; headers: IncomingHttpHeaders; raw: Buffer }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ method: req.method!, target: req.url!, headers: req.headers, raw: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"orders":[]}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    got,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe("the service's own senders, over real HTTP, verify with the package", () => {
  it('a webhook attempt of the dispatcher (sendWebhook)', async () => {
    const server = await recorder();
    try {
      const signedAt = new Date();
      const r = await sendWebhook({
        url: `${server.url}/hooks/svc`,
        payload: BODY.toString('utf8'),
        secret: SECRET,
        eventId: ID,
        eventType: 'clinical_case.opened',
        at: new Date(signedAt.getTime() + 86_400_000),
        signedAt,
        production: false,
      });
      expect(r.attempt.statusCode).toBe(200);
      const [req] = server.got;
      expect(verifyWebhook(req.raw, req.headers, SECRET)).toEqual(envelope);
      expect(reasonOf(() => verifyWebhook(req.raw, req.headers, 'whsec_other'))).toBe('BAD_SIGNATURE');
    } finally {
      await server.close();
    }
  });

  it("a Destination call of the workflow engine (callDestination), the Destination's base path and a query included", async () => {
    const server = await recorder();
    try {
      const nowS = Math.floor(Date.now() / 1000);
      const out = await callDestination({
        baseUrl: `${server.url}/api?tenant=t1`,
        path: '/orders/A%201?full=1',
        method: 'POST',
        body: ORDER_LOOKUP,
        headers: {},
        secret: SECRET,
        nowS,
        timeoutMs: 2000,
        production: false,
      });
      expect(out.kind).toBe('response');
      const [req] = server.got;
      expect(req.target).toBe('/api/orders/A%201?tenant=t1&full=1');
      const verified = verifyDestinationCall({ method: req.method, url: req.target, rawBody: req.raw, headers: req.headers }, SECRET);
      expect(verified).toMatchObject({ method: 'POST', pathAndQuery: req.target, timestamp: nowS });
      expect(isOrderLookupRequested(verified.body)).toBe(true);
      const get = await callDestination({
        baseUrl: server.url,
        path: '/orders/A-1',
        method: 'GET',
        body: undefined,
        headers: {},
        secret: SECRET,
        nowS,
        timeoutMs: 2000,
        production: false,
      });
      expect(get.kind).toBe('response');
      const second = server.got[1];
      expect(verifyDestinationCall({ method: second.method, url: second.target, rawBody: second.raw, headers: second.headers }, SECRET).body).toBeUndefined();
    } finally {
      await server.close();
    }
  });
});
