import Fastify, { FastifyInstance } from 'fastify';
import { READ_MODELS_UNAVAILABLE_BODY, registerReadModelGate } from '../src/read-model-gate';

/**
 * The read-model gate over real HTTP (a Fastify server on loopback): the state it asks is the
 * ProjectionRunner's `available` / `readEpoch`, set here by hand; the runner's own side is
 * libs/read-store/test/read-store-loss.spec.ts.
 */
describe('read-model gate', () => {
  const state = { available: true, readEpoch: 0 };
  let app: FastifyInstance;
  let base: string;
  /** Resolves the slow route's answer (set while a request waits in it). */
  let release: (() => void) | null = null;

  beforeAll(async () => {
    app = Fastify();
    registerReadModelGate(app, state, '/api', ['/api/healthz']);
    app.get('/api/v1/thing', async () => ({ id: 'a' }));
    app.post('/api/v1/things', async (req, reply) => {
      const body = req.body as { lose?: boolean; refuse?: boolean };
      if (body.lose) state.readEpoch++; // a read model lost while the write was handled
      if (body.refuse) return reply.code(404).send({ code: 'NOT_FOUND', message: 'Endpoint not found' });
      return reply.code(201).header('location', '/api/v1/thing').send({ id: 'a' });
    });
    app.get('/api/v1/slow', async () => {
      await new Promise<void>((r) => (release = r));
      return { id: 'slow' };
    });
    app.get('/api/healthz', async () => ({ status: 'ok' }));
    app.get('/page', async () => 'page');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address() as { port: number };
    base = `http://127.0.0.1:${address.port}`;
  });

  afterAll(() => app.close());

  beforeEach(() => {
    state.available = true;
    state.readEpoch = 0;
  });

  it('passes requests through while the read models are available', async () => {
    const r = await fetch(`${base}/api/v1/thing`);
    expect([r.status, await r.json()]).toEqual([200, { id: 'a' }]);
  });

  it('answers 503 UNAVAILABLE with Retry-After to reads and writes while they are not, but not health or pages', async () => {
    state.available = false;
    for (const [method, path] of [
      ['GET', '/api/v1/thing'],
      ['POST', '/api/v1/things'],
    ]) {
      const r = await fetch(`${base}${path}`, { method, ...(method === 'POST' ? { body: '{}', headers: { 'content-type': 'application/json' } } : {}) });
      expect([r.status, r.headers.get('retry-after'), r.headers.get('content-type'), await r.text()]).toEqual([
        503,
        '1',
        'application/json; charset=utf-8',
        READ_MODELS_UNAVAILABLE_BODY,
      ]);
    }
    expect((await fetch(`${base}/api/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/page`)).status).toBe(200);
  });

  it('a browser opening a page while they are not gets a page saying so (503), in its language', async () => {
    state.available = false;
    const accept = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
    const r = await fetch(`${base}/api/v1/thing`, { headers: { accept, 'accept-language': 'es-ES,es;q=0.9' } });
    expect([r.status, r.headers.get('retry-after'), r.headers.get('content-type'), r.headers.get('cache-control')]).toEqual([
      503,
      '1',
      'text/html; charset=utf-8',
      'no-store',
    ]);
    expect(await r.text()).toContain('Inténtelo de nuevo en un minuto.');
    // The answer of a request that began while they were available is a page too.
    state.available = true;
    const slow = fetch(`${base}/api/v1/slow`, { headers: { accept } });
    while (!release) await new Promise((res) => setTimeout(res, 5));
    state.readEpoch++;
    const answer = release;
    release = null;
    answer();
    const late = await slow;
    expect([late.status, late.headers.get('content-type')]).toEqual([503, 'text/html; charset=utf-8']);
    expect(await late.text()).toContain('This page is not available right now');
  });

  it('a request answered after a drop began while available: 503, not what it read', async () => {
    const pending = fetch(`${base}/api/v1/slow`);
    while (!release) await new Promise((r) => setTimeout(r, 5));
    state.readEpoch++; // the store's connection dropped meanwhile, and came back
    release();
    release = null;
    const r = await pending;
    expect([r.status, r.headers.get('retry-after'), await r.json()]).toEqual([503, '1', JSON.parse(READ_MODELS_UNAVAILABLE_BODY)]);
  });

  it('a write answered after a loss keeps its success (it was done), and a refusal becomes 503', async () => {
    const ok = await fetch(`${base}/api/v1/things`, { method: 'POST', body: '{"lose":true}', headers: { 'content-type': 'application/json' } });
    expect([ok.status, ok.headers.get('location')]).toEqual([201, '/api/v1/thing']);
    const refused = await fetch(`${base}/api/v1/things`, {
      method: 'POST',
      body: '{"lose":true,"refuse":true}',
      headers: { 'content-type': 'application/json' },
    });
    expect([refused.status, refused.headers.get('retry-after'), await refused.json()]).toEqual([503, '1', JSON.parse(READ_MODELS_UNAVAILABLE_BODY)]);
  });
});
