// Over 400 lines: the gateway proxy's forwarding rules, one case each.
import 'reflect-metadata';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo, Socket, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Body, CanActivate, Controller, ExecutionContext, Get, Module, Post, UnauthorizedException, UseGuards } from '@nestjs/common';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { SqliteReadStore } from '@svc/read-store';
import { freePort } from '@svc/testing';
import { GatewayProxy, announceUpstream, createHttpApp, loadConfig, requestIdFrom, routesOf, trustedPeer } from '@svc/platform';

/**
 * The gateway's reverse proxy (distributed mode) between a real client and a real upstream server:
 * what reaches the app is the request as it came, what reaches the client is the app's answer,
 * the gateway's HTTP edge applies, and an app that is down or silent is 503 UNAVAILABLE quickly.
 */

@Controller()
class OwnController {
  @Get('own')
  own() {
    return { servedBy: 'gateway' };
  }
}

@Module({ controllers: [OwnController] })
class GatewayTestModule {}

/** A credential looked up in a store (a few milliseconds): `Bearer good` passes, anything else is 401. */
class SlowKeyGuard implements CanActivate {
  async canActivate(context: ExecutionContext): Promise<boolean> {
    await sleep(100);
    if (context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers.authorization !== 'Bearer good') throw new UnauthorizedException();
    return true;
  }
}

/** An app with the service's HTTP edge (createHttpApp) and one guarded route taking a JSON body. */
@Controller()
class GuardedController {
  @Post('guarded/items')
  @UseGuards(new SlowKeyGuard())
  create(@Body() body: unknown) {
    return { got: body };
  }
}

@Module({ controllers: [GuardedController] })
class GuardedAppModule {}

// The service log: a run of the whole suite sends every log to one file (SVC_LOG_FILE); else this file's own.
const logDir = mkdtempSync(join(tmpdir(), 'gateway-proxy-log-'));
process.env.SVC_LOG_FILE ??= join(logDir, 'service.log');
const logFile = process.env.SVC_LOG_FILE;
afterAll(() => rmSync(logDir, { recursive: true, force: true }));

interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  headers: IncomingMessage['headers'];
  body: Buffer;
}

describe('GatewayProxy', () => {
  let dir: string;
  let store: SqliteReadStore;
  let upstream: Server;
  let upstreamPort: number;
  let silent: Server;
  const silentSockets: Socket[] = [];
  let gateway: NestFastifyApplication;
  let proxy: GatewayProxy;
  let base: string;
  let seen: Seen[] = [];
  let answer: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;
  /** A real app behind the gateway (the service's edge, a guarded route). */
  let guardedApp: NestFastifyApplication;
  let upstreamClosed: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-proxy-'));
    store = new SqliteReadStore(join(dir, 'read.sqlite'));
    upstream = createServer((req, res) => {
      req.on('close', () => upstreamClosed.push(req.url!));
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        seen.push({ method: req.method!, url: req.url!, rawHeaders: req.rawHeaders, headers: req.headers, body });
        answer(req, res, body);
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamPort = (upstream.address() as AddressInfo).port;
    // Accepts connections and never answers (an app that hangs).
    silent = createServer(() => undefined);
    silent.on('connection', (s) => silentSockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentPort = (silent.address() as AddressInfo).port;
    // A port nothing listens on (an app that is down).
    const downPort = await freePort();
    await announceUpstream(store, {
      app: 'case-ledger',
      origin: `http://127.0.0.1:${upstreamPort}`,
      routes: [
        { method: 'GET', url: '/api/v1/clinical-cases/:caseId/progress' },
        { method: 'POST', url: '/api/v1/clinical-cases/:caseId/updates' },
        { method: 'DELETE', url: '/api/things/:id' },
        { method: 'GET', url: '/api/healthz' },
      ],
      announcedAt: new Date().toISOString(),
    });
    await announceUpstream(store, {
      app: 'slow-app',
      origin: `http://127.0.0.1:${silentPort}`,
      routes: [{ method: 'GET', url: '/api/slow' }],
      announcedAt: new Date().toISOString(),
    });
    await announceUpstream(store, {
      app: 'down-app',
      origin: `http://127.0.0.1:${downPort}`,
      routes: [
        { method: 'GET', url: '/api/down/:id' },
        { method: 'POST', url: '/api/down/:id' },
      ],
      announcedAt: new Date().toISOString(),
    });

    const config = loadConfig({ NODE_ENV: 'test', SVC_DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', SVC_RATE_LIMITS: 'off' }, 'distributed');
    guardedApp = await createHttpApp(GuardedAppModule, config);
    await guardedApp.listen(0, '127.0.0.1');
    await announceUpstream(store, {
      app: 'guarded-app',
      origin: `http://127.0.0.1:${(guardedApp.getHttpServer().address() as AddressInfo).port}`,
      routes: [{ method: 'POST', url: '/api/guarded/items' }],
      announcedAt: new Date().toISOString(),
    });
    gateway = await createHttpApp(GatewayTestModule, config);
    proxy = new GatewayProxy({ readStore: store, self: 'gateway', timeoutMs: 400, refreshMs: 100, bodyLimit: 1024 * 1024 });
    await proxy.start();
    proxy.register(gateway.getHttpAdapter().getInstance() as never);
    await gateway.listen(0, '127.0.0.1');
    proxy.setOwnRoutes(routesOf(gateway));
    base = `http://127.0.0.1:${(gateway.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await gateway?.close();
    await guardedApp?.close();
    await proxy?.close();
    for (const s of silentSockets) s.destroy();
    silent?.closeAllConnections();
    upstream?.closeAllConnections();
    await new Promise((r) => silent?.close(r));
    await new Promise((r) => upstream?.close(r));
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    seen = [];
    upstreamClosed = [];
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-app': 'case-ledger' });
      res.end('{"ok":true}');
    };
  });

  it('forwards method, path and query byte for byte, the end-to-end headers, and the body unchanged', async () => {
    const body = Buffer.from('{"note":"caf\u00e9 \u{1F600}","n":1}   ', 'utf8');
    const res = await fetch(`${base}/api/v1/clinical-cases/AbC%2Fd/updates?x=%20y&x=2`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer svc_sb_key', 'idempotency-key': 'k1', 'x-forwarded-for': '6.6.6.6' },
      body,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    expect(seen).toHaveLength(1);
    const s = seen[0];
    expect(s.method).toBe('POST');
    expect(s.url).toBe('/api/v1/clinical-cases/AbC%2Fd/updates?x=%20y&x=2');
    expect(s.body.equals(body)).toBe(true);
    expect(s.headers['content-length']).toBe(String(body.length));
    expect(s.headers.authorization).toBe('Bearer svc_sb_key');
    expect(s.headers['idempotency-key']).toBe('k1');
    expect(s.headers['content-type']).toBe('application/json');
    expect(s.headers.host).toBe(new URL(base).host);
    // The client's X-Forwarded-For is replaced by the address the gateway saw.
    expect(s.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it("sends the gateway's request id, never the client's, and the gateway logs the request under it", async () => {
    const planted = '00000000-0000-4000-8000-0000000000aa';
    const res = await fetch(`${base}/api/v1/clinical-cases/c2/progress`, { headers: { 'x-request-id': planted } });
    expect(res.status).toBe(200);
    const id = seen[0].headers['x-request-id'] as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(id).not.toBe(planted);
    await waitFor(() => readFileSync(logFile, 'utf8').includes(id));
    const line = readFileSync(logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes(id) && l.includes('"msg":"request"'));
    expect(JSON.parse(line!)).toMatchObject({ reqId: id, upstream: 'case-ledger', route: '/api/v1/clinical-cases/:caseId/progress' });
  });

  it('keeps hop-by-hop headers (and those the Connection header names) to its own hop, repeated headers kept', async () => {
    const raw = await rawRequest(
      base,
      'GET /api/v1/clinical-cases/c1/progress HTTP/1.1\r\nHost: gw\r\nConnection: close, x-hop\r\nX-Hop: drop me\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Twice: 1\r\nX-Twice: 2\r\nExpect: 100-continue\r\n\r\n',
    );
    // The gateway's edge met the Expect (100 Continue); the app is not asked to.
    expect(raw).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    const h = seen[0].headers;
    expect([h['x-hop'], h['keep-alive'], h.te, h.expect]).toEqual([undefined, undefined, undefined, undefined]);
    expect(seen[0].rawHeaders.filter((_v, i, a) => i % 2 === 1 && a[i - 1].toLowerCase() === 'x-twice')).toEqual(['1', '2']);
  });

  it('passes a chunked JSON body on with its bytes unchanged', async () => {
    const parts = ['{"a":', '"', 'x'.repeat(70_000), '"}'];
    const raw = await rawRequest(
      base,
      `POST /api/v1/clinical-cases/c1/updates HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
        parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join('') +
        '0\r\n\r\n',
    );
    expect(raw).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen[0].body.toString()).toBe(parts.join(''));
    // Read whole at the gateway (within the limit), sent on with its length.
    expect(seen[0].headers['content-length']).toBe(String(Buffer.byteLength(parts.join(''))));
  });

  it('a JSON body over the limit is 413 PAYLOAD_TOO_LARGE at the gateway, declared or chunked, and nothing reaches the app', async () => {
    const big = Buffer.alloc(1024 * 1024 + 1, 0x20);
    const declared = await fetch(`${base}/api/v1/clinical-cases/c1/updates`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: big,
    });
    expect(declared.status).toBe(413);
    expect(await declared.json()).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) });
    expect(declared.headers.get('cache-control')).toBe('no-store');
    const chunked = await rawRequest(
      base,
      'POST /api/v1/clinical-cases/c1/updates HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' +
        `${(600 * 1024).toString(16)}\r\n${' '.repeat(600 * 1024)}\r\n`.repeat(2) +
        '0\r\n\r\n',
    );
    expect(chunked).toMatch(/^HTTP\/1\.1 413 /);
    expect(chunked).toContain('"code":"PAYLOAD_TOO_LARGE"');
    expect(seen).toHaveLength(0);
    // Exactly the limit passes, whole.
    const atLimit = await fetch(`${base}/api/v1/clinical-cases/c1/updates`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: big.subarray(1),
    });
    expect(atLimit.status).toBe(200);
    expect(seen[0].body.length).toBe(1024 * 1024);
  });

  it('a body of another type is streamed to the app as it is (the app answers it; nothing is read here)', async () => {
    answer = (_req, res, body) => {
      res.writeHead(415, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ code: 'UNSUPPORTED_MEDIA_TYPE', message: `got ${body.length}` }));
    };
    const res = await fetch(`${base}/api/v1/clinical-cases/c1/updates`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: Buffer.alloc(2 * 1024 * 1024, 0x61),
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({ code: 'UNSUPPORTED_MEDIA_TYPE', message: `got ${2 * 1024 * 1024}` });
  });

  it('Transfer-Encoding: gzip, chunked reaches the app with its coding, which answers it as standalone: 415 after the credential', async () => {
    const send = (te: string, auth?: string) =>
      rawRequest(
        base,
        `POST /api/guarded/items HTTP/1.1\r\nHost: gw\r\n${auth ? `Authorization: ${auth}\r\n` : ''}Content-Type: application/json\r\nTransfer-Encoding: ${te}\r\nConnection: close\r\n\r\n7\r\n{"a":1}\r\n0\r\n\r\n`,
      );
    const gz = answerOf(await send('gzip, chunked', 'Bearer good'));
    expect(gz).toEqual({ status: 415, body: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('Transfer-Encoding') } });
    expect(answerOf(await send('gzip, chunked')).status).toBe(401);
    expect(answerOf(await send('chunked', 'Bearer good'))).toEqual({ status: 201, body: { got: { a: 1 } } });
    // What the app gets: the bytes, and the coding Node did not undo (chunked again).
    await rawRequest(
      base,
      'POST /api/v1/clinical-cases/c1/updates HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    );
    expect([seen[0].headers['transfer-encoding'], seen[0].headers['content-length'], seen[0].body.toString()]).toEqual(['gzip, chunked', undefined, '{}']);
  });

  it("a streamed body broken off by FIN gets the app's answer, given without reading it (415 after the credential), then the close", async () => {
    const broken = (auth?: string) =>
      rawRequest(
        base,
        `POST /api/guarded/items HTTP/1.1\r\nHost: gw\r\n${auth ? `Authorization: ${auth}\r\n` : ''}Content-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789`,
        { fin: true },
      );
    const typed = answerOf(await broken('Bearer good'));
    expect(typed).toEqual({ status: 415, body: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.any(String) } });
    expect(answerOf(await broken()).status).toBe(401);
  });

  it("a streamed body broken off by FIN that the app does not answer: the edge's 400 after the answer timeout, and the app's request is closed", async () => {
    const started = performance.now();
    const raw = await rawRequest(
      base,
      'POST /api/v1/clinical-cases/c1/updates HTTP/1.1\r\nHost: gw\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789',
      { fin: true },
    );
    expect(answerOf(raw)).toEqual({
      status: 400,
      body: { code: 'VALIDATION_FAILED', message: expect.any(String), details: [{ path: '', message: 'malformed HTTP request' }] },
    });
    expect(raw.toLowerCase()).toContain('cache-control: no-store');
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    await waitFor(() => upstreamClosed.includes('/api/v1/clinical-cases/c1/updates'));
  });

  it("answers with the app's status, headers and body, plus the gateway's security headers", async () => {
    answer = (_req, res) => {
      res.writeHead(409, [
        ['content-type', 'application/json; charset=utf-8'],
        ['retry-after', '7'],
        ['x-custom', 'a'],
        ['x-custom', 'b'],
        ['keep-alive', 'timeout=1'],
      ] as unknown as Record<string, string>);
      res.end('{"code":"SEQUENCE_CONFLICT","message":"m","expectedSequence":3}');
    };
    const res = await fetch(`${base}/api/v1/clinical-cases/c1/progress`);
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ code: 'SEQUENCE_CONFLICT', message: 'm', expectedSequence: 3 });
    expect(res.headers.get('retry-after')).toBe('7');
    expect(res.headers.get('x-custom')).toBe('a, b');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('keep-alive')).not.toBe('timeout=1');
  });

  it('HEAD follows GET; a 204 has no body', async () => {
    const head = await fetch(`${base}/api/v1/clinical-cases/c1/progress`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(seen[0].method).toBe('HEAD');
    answer = (_req, res) => {
      res.writeHead(204);
      res.end();
    };
    const del = await fetch(`${base}/api/things/1`, { method: 'DELETE' });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe('');
  });

  it("serves the gateway's own routes itself, and a route no app announced is the gateway's 404", async () => {
    const own = await fetch(`${base}/api/own`);
    expect(await own.json()).toEqual({ servedBy: 'gateway' });
    const unknown = await fetch(`${base}/api/no/such/route`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ code: 'NOT_FOUND', message: 'Route not found' });
    expect(unknown.headers.get('cache-control')).toBe('no-store');
    // The method is part of the route: POST on a GET route is unknown too.
    const wrongMethod = await fetch(`${base}/api/v1/clinical-cases/c1/progress`, {
      method: 'PUT',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    expect(wrongMethod.status).toBe(404);
    expect(seen).toHaveLength(0);
  });

  it("logs the request once at the gateway, naming the owning app's route and the app", async () => {
    const res = await fetch(`${base}/api/v1/clinical-cases/4f7c9a0e-0000-4000-8000-00000000abcd/progress?secret=canary-query`);
    expect(res.status).toBe(200);
    await waitFor(() => readFileSync(logFile, 'utf8').includes('"upstream":"case-ledger"'));
    const lines = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"msg":"request"') && l.includes('"upstream":"case-ledger"') && l.includes('/progress'));
    expect(JSON.parse(lines[lines.length - 1])).toMatchObject({
      method: 'GET',
      route: '/api/v1/clinical-cases/:caseId/progress',
      upstream: 'case-ledger',
      statusCode: 200,
    });
    // Metadata only: no path ids, no query.
    expect(lines.join('\n')).not.toContain('canary-query');
    expect(lines.join('\n')).not.toContain('4f7c9a0e');
  });

  it('an app that is down is 503 UNAVAILABLE with Retry-After at once', async () => {
    const started = performance.now();
    const res = await fetch(`${base}/api/down/1`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.json()).toEqual({ code: 'UNAVAILABLE', message: expect.any(String) });
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('a browser opening a page of an app that is down gets a page (503, in its language, no script), an API client the JSON', async () => {
    const browser = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
    const english = await fetch(`${base}/api/down/1?token=canary-token`, { headers: { accept: browser, 'accept-language': 'en-US,en;q=0.9,es;q=0.5' } });
    expect(english.status).toBe(503);
    expect(english.headers.get('retry-after')).toBe('1');
    expect(english.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(english.headers.get('cache-control')).toBe('no-store');
    expect(english.headers.get('referrer-policy')).toBe('no-referrer');
    expect(english.headers.get('content-security-policy')).toContain("default-src 'none'");
    const page = await english.text();
    expect(page).toContain('<html lang="en">');
    expect(page).toContain('Please try again in a minute.');
    expect(page).not.toMatch(/<script|<style|UNAVAILABLE|canary-token|down\/1/);

    const spanish = await fetch(`${base}/api/down/1`, { headers: { accept: browser, 'accept-language': 'es-MX,es;q=0.9,en;q=0.8' } });
    expect(spanish.status).toBe(503);
    expect(await spanish.text()).toContain('Inténtelo de nuevo en un minuto.');

    for (const accept of [undefined, '*/*', 'application/json']) {
      const api = await fetch(`${base}/api/down/1`, { headers: accept ? { accept } : {} });
      expect([accept, api.status, api.headers.get('content-type')]).toEqual([accept, 503, 'application/json; charset=utf-8']);
    }
    // A write is never a page.
    const post = await fetch(`${base}/api/down/1`, { method: 'POST', headers: { accept: browser, 'content-type': 'application/json' }, body: '{}' });
    expect([post.status, post.headers.get('content-type')]).toEqual([503, 'application/json; charset=utf-8']);
  });

  it('an app that does not answer is 503 UNAVAILABLE after the timeout, never a hang', async () => {
    const started = performance.now();
    const res = await fetch(`${base}/api/slow`, { signal: AbortSignal.timeout(5000) });
    const elapsed = performance.now() - started;
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(elapsed).toBeGreaterThanOrEqual(390);
    expect(elapsed).toBeLessThan(3000);
  });

  it('the gateway edge answers before any app: a request without Host is 400 and nothing is forwarded', async () => {
    const raw = await rawRequest(base, 'GET /api/v1/clinical-cases/c1/progress HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toContain('"code":"VALIDATION_FAILED"');
    expect(seen).toHaveLength(0);
  });

  it('a client that goes away cancels its request to the app', async () => {
    let closed!: () => void;
    const appSawClose = new Promise<void>((r) => (closed = r));
    answer = (req, res) => {
      res.on('close', () => closed());
      // never answered
      void req;
    };
    const socket = connect(new URL(base).port as unknown as number, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write('GET /api/v1/clinical-cases/c1/progress HTTP/1.1\r\nHost: gw\r\n\r\n');
    await waitFor(() => seen.length === 1);
    // A reset (a client's FIN alone leaves the connection half open: its answer is still written, as standalone does).
    socket.resetAndDestroy();
    // At once, not when the answer timeout (400 ms here) gives up on the app.
    await expect(Promise.race([appSawClose.then(() => 'closed'), sleep(250).then(() => 'still open')])).resolves.toBe('closed');
  });
});

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms).unref());
}

async function waitFor(ok: () => boolean, ms = 2000) {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error('timed out');
    await sleep(10);
  }
}

/** Sends raw bytes (then a FIN if `fin`) and reads until the server closes the connection. */
function rawRequest(base: string, text: string, options: { fin?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(base).port), '127.0.0.1');
    let out = '';
    socket.on('data', (d) => (out += d.toString()));
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
    socket.setTimeout(5000, () => {
      socket.destroy();
      resolve(out);
    });
    socket.write(text);
    if (options.fin) socket.end();
  });
}

/** The status and JSON body of the one answer a raw exchange received (by its content-length). */
function answerOf(raw: string): { status: number; body: unknown } {
  const end = raw.indexOf('\r\n\r\n');
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(raw.slice(0, end))?.[1] ?? -1);
  expect(raw.length).toBe(end + 4 + length);
  return { status: Number(raw.split(' ')[1]), body: JSON.parse(raw.slice(end + 4)) };
}

describe('request ids across the gateway', () => {
  it('trustedPeer reads SVC_TRUST_PROXY as Fastify does: none, a hop count, addresses, CIDRs, range names', () => {
    expect(trustedPeer(false)('127.0.0.1')).toBe(false);
    expect(trustedPeer(1)('203.0.113.9')).toBe(true);
    const loopback = trustedPeer(['loopback']);
    expect([loopback('127.0.0.1'), loopback('::1'), loopback('::ffff:127.0.0.1'), loopback('10.0.0.2')]).toEqual([true, true, true, false]);
    const local = trustedPeer(['uniquelocal']);
    expect([local('10.1.2.3'), local('172.20.0.5'), local('192.168.1.1'), local('fd00::1'), local('8.8.8.8')]).toEqual([true, true, true, true, false]);
    const listed = trustedPeer(['203.0.113.7', '198.51.100.0/24']);
    expect([listed('203.0.113.7'), listed('203.0.113.8'), listed('198.51.100.42'), listed(undefined), listed('not an address')]).toEqual([
      true,
      false,
      true,
      false,
      false,
    ]);
  });

  it("an app logs a forwarded request under the gateway's id only when the gateway is a proxy it trusts", async () => {
    const id = '6b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8';
    const req = (remoteAddress: string, header?: string) =>
      ({ headers: header === undefined ? {} : { 'x-request-id': header }, socket: { remoteAddress } }) as never;
    expect(requestIdFrom(req('127.0.0.1', id), trustedPeer(['loopback']))).toBe(id);
    expect(requestIdFrom(req('127.0.0.1', id.toUpperCase()), trustedPeer(['loopback']))).toBe(id);
    expect(requestIdFrom(req('127.0.0.1', id), trustedPeer(false))).toBeUndefined();
    expect(requestIdFrom(req('203.0.113.9', id), trustedPeer(['loopback']))).toBeUndefined();
    expect(requestIdFrom(req('127.0.0.1', 'canary-not-a-uuid'), trustedPeer(['loopback']))).toBeUndefined();
    expect(requestIdFrom(req('127.0.0.1'), trustedPeer(['loopback']))).toBeUndefined();

    // Through a real app's edge: its request log line carries the id.
    const dir = mkdtempSync(join(tmpdir(), 'request-id-'));
    const app = await createHttpApp(
      GatewayTestModule,
      loadConfig({ NODE_ENV: 'test', SVC_DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', SVC_TRUST_PROXY: 'loopback' }, 'distributed'),
    );
    try {
      await app.listen(0, '127.0.0.1');
      const url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}/api/own`;
      expect((await fetch(url, { headers: { 'x-request-id': id } })).status).toBe(200);
      await waitFor(() => readFileSync(logFile, 'utf8').includes(`"reqId":"${id}"`));
    } finally {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
