import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module } from '@nestjs/common';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { SqliteReadStore } from '@svc/read-store';
import { GatewayProxy, announceUpstream, createHttpApp, loadConfig, routesOf } from '@svc/platform';

/**
 * The gateway in front of several replicas of one app (docs/decisions.md, "Replicas"), with real
 * HTTP servers as the replicas: requests are spread over the live ones; a replica that refuses
 * the connection costs no 503 (the request goes to another, and the refusing one is tried last
 * for a while); a request that reached a replica and got no answer is never sent to a second
 * one (503 with Retry-After); a replica that stopped announcing is not tried while others live.
 */

@Module({})
class GatewayTestModule {}

const logDir = mkdtempSync(join(tmpdir(), 'gateway-replicas-log-'));
process.env.SVC_LOG_FILE ??= join(logDir, 'service.log');
const logFile = process.env.SVC_LOG_FILE;
afterAll(() => rmSync(logDir, { recursive: true, force: true }));

const RUN = randomBytes(4).toString('hex');
const DOWN_MS = 600;
const STALE_MS = 800;

interface Replica {
  instance: string;
  server: Server;
  port: number;
  /** Request ids (x-request-id) it received, in order. */
  seen: string[];
}

async function replica(instance: string, handler?: (req: IncomingMessage, res: ServerResponse) => void): Promise<Replica> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push(String(req.headers['x-request-id']));
      if (handler) return handler(req, res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ servedBy: instance }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { instance, server, port: (server.address() as AddressInfo).port, seen };
}

/** A port nothing listens on (a replica that died). */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}

const unreachable = (instance: string) =>
  readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"gateway: replica not reachable"') && l.includes(`"replica":"${instance}"`)).length;

describe('GatewayProxy across replicas', () => {
  let dir: string;
  let store: SqliteReadStore;
  let gateway: NestFastifyApplication;
  let proxy: GatewayProxy;
  let base: string;
  const replicas: Replica[] = [];
  /** Announcements kept beating (instance -> origin, app, route). */
  const beating = new Map<string, { app: string; origin: string; url: string }>();
  let beat = 0;
  let heart: NodeJS.Timeout;

  const announce = () =>
    Promise.all(
      [...beating].map(([instance, a]) =>
        announceUpstream(store, {
          app: a.app,
          instance,
          origin: a.origin,
          routes: [
            { method: 'GET', url: a.url },
            { method: 'POST', url: a.url },
          ],
          announcedAt: `beat-${++beat}`,
        }),
      ),
    );

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-replicas-'));
    store = new SqliteReadStore(join(dir, 'read.sqlite'));
    const one = await replica(`ledger-1-${RUN}`);
    const two = await replica(`ledger-2-${RUN}`);
    // Reads the whole request, then drops the connection without an answer (a replica killed mid-request).
    const dropper = await replica(`flaky-1-${RUN}`, (req) => req.socket.destroy());
    const steady = await replica(`flaky-2-${RUN}`);
    replicas.push(one, two, dropper, steady);
    for (const r of [one, two]) beating.set(r.instance, { app: 'case-ledger', origin: `http://127.0.0.1:${r.port}`, url: '/api/ledger' });
    beating.set(`ledger-3-${RUN}`, { app: 'case-ledger', origin: `http://127.0.0.1:${await deadPort()}`, url: '/api/ledger' });
    for (const r of [dropper, steady]) beating.set(r.instance, { app: 'flaky-app', origin: `http://127.0.0.1:${r.port}`, url: '/api/flaky' });
    beating.set(`gone-1-${RUN}`, { app: 'gone-app', origin: `http://127.0.0.1:${await deadPort()}`, url: '/api/gone' });
    beating.set(`gone-2-${RUN}`, { app: 'gone-app', origin: `http://127.0.0.1:${await deadPort()}`, url: '/api/gone' });
    await announce();
    heart = setInterval(() => void announce(), 100);

    const config = loadConfig({ NODE_ENV: 'test', SVC_DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', SVC_RATE_LIMITS: 'off' }, 'distributed');
    gateway = await createHttpApp(GatewayTestModule, config);
    proxy = new GatewayProxy({
      readStore: store,
      self: 'gateway',
      timeoutMs: 2000,
      refreshMs: 100,
      bodyLimit: 1024 * 1024,
      replicas: { downMs: DOWN_MS, staleMs: STALE_MS },
    });
    await proxy.start();
    proxy.register(gateway.getHttpAdapter().getInstance() as never);
    await gateway.listen(0, '127.0.0.1');
    proxy.setOwnRoutes(routesOf(gateway));
    base = `http://127.0.0.1:${(gateway.getHttpServer().address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    clearInterval(heart);
    await gateway?.close();
    await proxy?.close();
    for (const r of replicas) {
      r.server.closeAllConnections();
      await new Promise((done) => r.server.close(done));
    }
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = (path: string, n: number) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ n }) });

  it('spreads requests over the live replicas, and one that refuses connections costs no 503 and is tried last for a while', async () => {
    const [one, two] = replicas;
    const statuses: number[] = [];
    const t0 = performance.now();
    for (let n = 0; n < 40; n++) {
      const res = n % 2 ? await fetch(`${base}/api/ledger`) : await post('/api/ledger', n);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    const elapsed = performance.now() - t0;
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(one.seen.length).toBeGreaterThan(5);
    expect(two.seen.length).toBeGreaterThan(5);
    // Every request reached exactly one replica, once.
    expect(new Set([...one.seen, ...two.seen]).size).toBe(40);
    // The dead replica was tried at most once per down period (and at least once: it is in the pool).
    const tries = unreachable(`ledger-3-${RUN}`);
    expect(tries).toBeGreaterThanOrEqual(1);
    expect(tries).toBeLessThanOrEqual(Math.ceil(elapsed / DOWN_MS) + 1);
    expect(
      proxy
        .liveReplicas('case-ledger')
        .map((r) => r.instance)
        .sort(),
    ).toEqual([`ledger-1-${RUN}`, `ledger-2-${RUN}`, `ledger-3-${RUN}`]);
  });

  it('a request that reached a replica and got no answer is 503 with Retry-After, never sent to a second replica', async () => {
    const [, , dropper, steady] = replicas;
    const results: { status: number; retryAfter: string | null }[] = [];
    for (let n = 0; n < 12; n++) {
      const res = await post('/api/flaky', n);
      results.push({ status: res.status, retryAfter: res.headers.get('retry-after') });
      await res.arrayBuffer();
    }
    const unavailable = results.filter((r) => r.status === 503);
    expect(dropper.seen.length).toBeGreaterThan(0);
    expect(unavailable).toHaveLength(dropper.seen.length);
    expect(unavailable.every((r) => r.retryAfter === '1')).toBe(true);
    expect(results.filter((r) => r.status === 200)).toHaveLength(steady.seen.length);
    expect(dropper.seen.filter((id) => steady.seen.includes(id))).toEqual([]);
  });

  it('answers 503 only when no replica of the app is reachable', async () => {
    const res = await fetch(`${base}/api/gone`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toMatchObject({ code: 'UNAVAILABLE' });
    expect(unreachable(`gone-1-${RUN}`)).toBeGreaterThanOrEqual(1);
    expect(unreachable(`gone-2-${RUN}`)).toBeGreaterThanOrEqual(1);
  });

  it('a replica that stopped announcing is not tried while another one announces', async () => {
    beating.delete(`ledger-3-${RUN}`);
    await new Promise((r) => setTimeout(r, STALE_MS + DOWN_MS + 300));
    expect(
      proxy
        .liveReplicas('case-ledger')
        .map((r) => r.instance)
        .sort(),
    ).toEqual([`ledger-1-${RUN}`, `ledger-2-${RUN}`]);
    const before = unreachable(`ledger-3-${RUN}`);
    for (let n = 0; n < 20; n++) {
      const res = await fetch(`${base}/api/ledger`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(unreachable(`ledger-3-${RUN}`)).toBe(before);
  });
});
