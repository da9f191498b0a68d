import 'reflect-metadata';
import { Server } from 'node:http';
import { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { BadRequestException, Controller, Module, Post, Req, UseGuards } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import {
  DestinationCallGuard,
  WebhookGuard,
  WebhookVerificationError,
  destinationCallOf,
  expressDestinationCall,
  expressWebhook,
  fastifyDestinationCall,
  fastifyWebhook,
  signDestinationCall,
  signWebhook,
  webhookEventOf,
} from '../src';

/**
 * Each adapter on its real framework over real HTTP: a delivery signed as the service signs it is let
 * through with its event, one byte changed is refused 400 with the reason, and the adapter gets the raw
 * bytes as the documented set-up gives them.
 */

const SECRET = 'whsec_adapter';
const ID = '3f1c2b4a-0d9e-4f5a-8b6c-7d8e9f0a1b2c';
const BODY = JSON.stringify({
  id: ID,
  type: 'subscription.updated',
  createdAt: '2026-03-01T12:00:00.000Z',
  data: { status: 'active', previousStatus: 'grace_period', recovered: true },
});
const ORDER = JSON.stringify({ version: 1, type: 'order_lookup.requested', requestId: 'run-9', patient: { externalId: 'ext-9' } });

function webhookRequest(body = BODY, secret = SECRET): RequestInit {
  const ts = Math.floor(Date.now() / 1000);
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-svc-event-id': ID,
      'x-svc-event-type': 'subscription.updated',
      'x-svc-timestamp': String(ts),
      'x-svc-signature': signWebhook(secret, ts, body),
      'idempotency-key': ID,
    },
    body,
  };
}

function destinationRequest(pathAndQuery: string, body = ORDER, secret = SECRET): RequestInit {
  const ts = Math.floor(Date.now() / 1000);
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-svc-timestamp': String(ts),
      'x-svc-signature': signDestinationCall(secret, ts, 'POST', pathAndQuery, body),
    },
    body,
  };
}

/** The checks every adapter passes: the event through, tampering and another secret refused with their reasons. */
async function checkWebhookRoute(url: string, rejected: WebhookVerificationError[]) {
  const ok = await fetch(url, webhookRequest());
  expect(ok.status).toBe(200);
  expect(await ok.json()).toEqual({ id: ID, type: 'subscription.updated', recovered: true });
  const tampered = { ...webhookRequest(), body: BODY.replace('active', 'canceled') };
  const bad = await fetch(url, tampered);
  expect(bad.status).toBe(400);
  const missing = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: BODY });
  expect(missing.status).toBe(400);
  const other = await fetch(url, webhookRequest(BODY, 'whsec_other'));
  expect(other.status).toBe(400);
  expect(rejected.map((e) => e.reason)).toEqual(['BAD_SIGNATURE', 'MISSING_HEADER', 'BAD_SIGNATURE']);
  return { bad, missing };
}

const portOf = (server: Server) => (server.address() as AddressInfo).port;

describe('Express adapter (express 5)', () => {
  let server: Server;
  let base = '';
  const rejected: WebhookVerificationError[] = [];

  beforeAll(async () => {
    const app = express();
    const hooks = express.Router();
    // The webhook route gets the raw bytes (mounted under a path: the signature uses req.originalUrl).
    hooks.post('/svc', express.raw({ type: 'application/json' }), expressWebhook({ secret: SECRET, onRejected: (e) => rejected.push(e) }), (req, res) => {
      const event = webhookEventOf(req);
      res.json({ id: event.id, type: event.type, recovered: event.type === 'subscription.updated' ? event.data.recovered : null });
    });
    const raw = express();
    raw.post('/orders/lookup', expressDestinationCall({ secret: SECRET }), (req, res) => {
      const call = destinationCallOf<{ patient: { externalId: string } }>(req);
      res.json({ orders: [], externalId: call.body?.patient.externalId, pathAndQuery: call.pathAndQuery });
    });
    // Mounted before the app-wide express.json(), which would otherwise have parsed (and spent) the bytes.
    app.use('/hooks', hooks);
    app.use('/api', raw); // no body parser at all on the Destination route: the middleware reads the stream
    app.use(express.json()); // the app's other routes parse JSON
    // A route whose body express.json() already parsed: the adapter cannot verify and says why (500).
    app.post('/parsed', expressWebhook({ secret: SECRET }), (_req, res) => res.json({}));
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => res.status(500).json({ message: err.message }));
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${portOf(server)}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('lets a signed delivery through and refuses the others 400 with { code, message }', async () => {
    const { bad } = await checkWebhookRoute(`${base}/hooks/svc`, rejected);
    expect(await bad.json()).toEqual({ code: 'BAD_SIGNATURE', message: expect.any(String) });
  });

  it('verifies a Destination call read straight from the stream, with the mount path and query', async () => {
    const r = await fetch(`${base}/api/orders/lookup?src=svc`, destinationRequest('/api/orders/lookup?src=svc'));
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ orders: [], externalId: 'ext-9', pathAndQuery: '/api/orders/lookup?src=svc' });
    const wrongPath = await fetch(`${base}/api/orders/lookup?src=svc`, destinationRequest('/orders/lookup?src=svc'));
    expect(wrongPath.status).toBe(400);
  });

  it('says plainly when the body was parsed before it (the bytes are gone)', async () => {
    const r = await fetch(`${base}/parsed`, webhookRequest());
    expect(r.status).toBe(500);
    expect(((await r.json()) as { message: string }).message).toMatch(/raw request body is not available.*express\.raw/);
  });
});

describe('Fastify adapter (fastify 5)', () => {
  const app = Fastify();
  let base = '';
  const rejected: WebhookVerificationError[] = [];

  beforeAll(async () => {
    app.register(async (scope) => {
      await scope.register(fastifyWebhook({ secret: SECRET, onRejected: (e) => rejected.push(e) }));
      scope.post('/hooks/svc', async (request) => {
        const event = webhookEventOf(request);
        return { id: event.id, type: event.type, recovered: event.type === 'subscription.updated' ? event.data.recovered : null };
      });
    });
    app.register(async (scope) => {
      await scope.register(fastifyDestinationCall({ secret: SECRET }));
      scope.post('/orders/lookup', async (request) => ({ orders: [], pathAndQuery: destinationCallOf(request).pathAndQuery }));
    });
    // Outside those scopes JSON is parsed as usual.
    app.post('/other', async (request) => ({ parsed: (request.body as { a: number }).a }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${portOf(app.server)}`;
  });
  afterAll(() => app.close());

  it('lets a signed delivery through and refuses the others 400 with { code, message }', async () => {
    const { missing } = await checkWebhookRoute(`${base}/hooks/svc`, rejected);
    expect(await missing.json()).toEqual({ code: 'MISSING_HEADER', message: expect.stringMatching(/x-svc-event-id/) });
  });

  it('verifies a Destination call, and leaves the JSON parsing of routes outside its scope alone', async () => {
    const r = await fetch(`${base}/orders/lookup?x=1`, destinationRequest('/orders/lookup?x=1'));
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ orders: [], pathAndQuery: '/orders/lookup?x=1' });
    const other = await fetch(`${base}/other`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
    expect(await other.json()).toEqual({ parsed: 1 });
  });
});

describe('NestJS adapter (Nest 11 on Fastify, rawBody: true)', () => {
  const rejected: WebhookVerificationError[] = [];

  @Controller()
  class HooksController {
    @Post('hooks/svc')
    @UseGuards(new WebhookGuard({ secret: SECRET, onRejected: (e) => rejected.push(e) }))
    receive(@Req() req: object) {
      const event = webhookEventOf(req);
      return { id: event.id, type: event.type, recovered: event.type === 'subscription.updated' ? event.data.recovered : null };
    }

    @Post('orders/lookup')
    @UseGuards(new DestinationCallGuard({ secret: SECRET, toHttpException: (e) => new BadRequestException({ code: e.reason, message: e.message }) }))
    lookup(@Req() req: object) {
      return { orders: [], pathAndQuery: destinationCallOf(req).pathAndQuery };
    }
  }

  @Module({ controllers: [HooksController] })
  class HooksModule {}

  let app: NestFastifyApplication;
  let base = '';
  beforeAll(async () => {
    app = await NestFactory.create<NestFastifyApplication>(HooksModule, new FastifyAdapter(), { rawBody: true, logger: false });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });
  afterAll(() => app.close());

  it('lets a signed delivery through to the handler and refuses the others 400', async () => {
    const ok = await fetch(`${base}/hooks/svc`, webhookRequest());
    expect(ok.status).toBe(201); // Nest's POST default
    expect(await ok.json()).toEqual({ id: ID, type: 'subscription.updated', recovered: true });
    const bad = await fetch(`${base}/hooks/svc`, { ...webhookRequest(), body: BODY.replace('active', 'canceled') });
    expect(bad.status).toBe(400);
    expect(rejected.map((e) => e.reason)).toEqual(['BAD_SIGNATURE']);
  });

  it("verifies a Destination call; the guard throws the app's own HTTP exception when asked to", async () => {
    const r = await fetch(`${base}/orders/lookup?x=1`, destinationRequest('/orders/lookup?x=1'));
    expect(r.status).toBe(201);
    expect(await r.json()).toEqual({ orders: [], pathAndQuery: '/orders/lookup?x=1' });
    const stale = await fetch(`${base}/orders/lookup?x=1`, {
      ...destinationRequest('/orders/lookup?x=1'),
      headers: {
        'content-type': 'application/json',
        'x-svc-timestamp': '1000',
        'x-svc-signature': signDestinationCall(SECRET, 1000, 'POST', '/orders/lookup?x=1', ORDER),
      },
    });
    expect(stale.status).toBe(400);
    expect(await stale.json()).toEqual({ code: 'STALE_TIMESTAMP', message: expect.any(String) });
  });
});
