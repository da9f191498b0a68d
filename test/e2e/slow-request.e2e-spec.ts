import { connect } from 'node:net';
import { TestApp } from '@svc/testing';

/**
 * A client that declares a body and sends only part of it (or trickles its headers) must not hold a
 * connection for ever: after SVC_REQUEST_TIMEOUT_MS (default 30 s; 1.5 s here) it gets 408
 * REQUEST_TIMEOUT with the error body, and the socket is closed.
 */
describe('slow requests (e2e, raw sockets)', () => {
  const app = new TestApp(undefined, { SVC_REQUEST_TIMEOUT_MS: '1500' });
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  const send = (parts: string[]): Promise<{ text: string; ms: number }> =>
    new Promise((resolve, reject) => {
      const { port } = new URL(app.baseUrl);
      const started = Date.now();
      const socket = connect(Number(port), '127.0.0.1', () => {
        for (const p of parts) socket.write(p);
      });
      let text = '';
      // A guard for a server that never closes; cleared when it does (a pending 10 s timer kept
      // the test worker alive after the suite).
      const guard = setTimeout(() => {
        socket.destroy();
        resolve({ text, ms: Date.now() - started });
      }, 10_000);
      socket.on('data', (d) => (text += d.toString('utf8')));
      socket.on('close', () => {
        clearTimeout(guard);
        resolve({ text, ms: Date.now() - started });
      });
      socket.on('error', reject);
    });

  it('answers a body that never arrives in full with 408 REQUEST_TIMEOUT and closes the connection', async () => {
    const r = await send([
      'POST /api/v1/clinical-cases/00000000-0000-4000-8000-000000000000/updates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n',
      '{"upd',
    ]);
    expect(r.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4))).toEqual({ code: 'REQUEST_TIMEOUT', message: expect.any(String) });
    expect(r.ms).toBeGreaterThanOrEqual(1400);
    expect(r.ms).toBeLessThan(6000);
  });

  it('answers headers that never end the same way', async () => {
    const r = await send(['GET /api/v1/ping HTTP/1.1\r\nHost: x\r\nX-Slow: a']);
    expect(r.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(r.ms).toBeLessThan(6000);
  });

  it('still serves an ordinary request on the same server', async () => {
    expect((await app.api.get('/v1/ping')).status).toBe(401);
  });
});
