import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { verifyWebhook } from '@svc/security';
import { WebhookSender } from '../src/adapters/outbound/webhook-sender';
import { RecordingServer } from './receiver';

/**
 * The sender thread is compiled JavaScript: these tests run the build's own worker file
 * (`npm test` builds first), so what is tested is what `npm start` runs.
 */
const BUILT_WORKER = resolve(__dirname, '../../../dist/apps/webhook-dispatcher/src/adapters/outbound/sender-worker.js');

describe('WebhookSender (attempts on a thread of their own)', () => {
  const receiver = new RecordingServer();
  const got = receiver.got;
  let port: number;
  const senders: WebhookSender[] = [];
  const sender = (workerFile: string | null) => {
    const s = new WebhookSender({ workerFile });
    senders.push(s);
    return s;
  };
  beforeAll(async () => {
    await receiver.start();
    port = receiver.port;
  });
  afterAll(async () => {
    for (const s of senders) await s.close();
    await receiver.stop();
  });
  beforeEach(() => {
    got.length = 0;
    receiver.answer = (res) => res.writeHead(200).end('ok');
  });

  const input = (path: string, production = false) => ({
    url: `http://127.0.0.1:${port}${path}`,
    payload: '{"id":"e1","type":"t","createdAt":"2026-01-01T00:00:00.000Z","data":{"x":"é"}}',
    secret: 'whsec_thread',
    eventId: 'e1',
    eventType: 't',
    at: new Date(),
    signedAt: new Date(),
    production,
  });

  it('is built (run npm run build first)', () => {
    expect(existsSync(BUILT_WORKER)).toBe(true);
  });

  it('sends the exact signed bytes from the thread and answers with the attempt', async () => {
    const s = sender(BUILT_WORKER);
    expect(s.threaded).toBe(true);
    const i = input('/hook');
    const results = await Promise.all([s.send(i), s.send({ ...i, eventId: 'e2', payload: i.payload.replace('"e1"', '"e2"') })]);
    for (const r of results) expect(r.attempt).toMatchObject({ statusCode: 200, error: null, at: i.at.toISOString() });
    expect(got).toHaveLength(2);
    for (const g of got) {
      expect(g.body.toString('utf8')).toBe(i.payload.replace('"e1"', `"${g.headers['x-svc-event-id']}"`));
      await verifyWebhook({ rawBody: g.body, headers: g.headers as Record<string, string>, secret: 'whsec_thread', now: i.signedAt, seen: null });
    }
    expect(got.map((g) => g.headers['x-svc-event-id']).sort()).toEqual(['e1', 'e2']);
  });

  it('keeps the rules of the calling thread: status codes, the deadline, refused addresses in production', async () => {
    const s = sender(BUILT_WORKER);
    receiver.answer = (res) => res.writeHead(410).end();
    expect((await s.send(input('/gone'))).attempt).toMatchObject({ statusCode: 410, error: 'http_410' });
    receiver.answer = () => undefined; // never answers
    const slow = await s.send({ ...input('/slow'), timeoutMs: 300 });
    expect(slow.attempt).toMatchObject({ statusCode: null, error: 'timeout' });
    expect(slow.attempt.durationMs).toBeGreaterThanOrEqual(295);
    receiver.answer = (res) => res.writeHead(200).end();
    const before = got.length;
    expect((await s.send(input('/hook', true))).attempt.error).toBe('address_refused');
    expect(got.length).toBe(before);
    expect(s.threaded).toBe(true);
  });

  it('a thread that fails rejects the attempts it had (not known to be sent) and later attempts run on the calling thread', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sender-worker-'));
    const broken = join(dir, 'broken-worker.js');
    writeFileSync(broken, "require('node:worker_threads').parentPort.on('message', () => { throw new Error('boom'); });\n");
    try {
      const s = sender(broken);
      expect(s.threaded).toBe(true);
      await expect(s.send(input('/hook'))).rejects.toThrow();
      expect(s.threaded).toBe(false);
      const r = await s.send(input('/hook'));
      expect(r.attempt).toMatchObject({ statusCode: 200, error: null });
      expect(got).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without a worker file (running from source) it sends on the calling thread', async () => {
    const s = sender(null);
    expect(s.threaded).toBe(false);
    expect((await s.send(input('/hook'))).attempt).toMatchObject({ statusCode: 200, error: null });
  });

  it('close() rejects an attempt still out and stops the thread', async () => {
    const s = sender(BUILT_WORKER);
    receiver.answer = () => undefined;
    const out = s.send({ ...input('/slow'), timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 100));
    const refused = expect(out).rejects.toThrow(/closed/);
    await s.close();
    await refused;
    expect(s.threaded).toBe(false);
  });
});
