import { createHmac } from 'node:crypto';
import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import { TestApp } from '@svc/testing';
import { until } from '../../apps/webhook-dispatcher/test/receiver';
import { RetryWorker } from '../../apps/webhook-dispatcher/src/application/retry-worker';

/**
 * Audit finding 3 (effects): a secret rotation (201) and an endpoint deletion (204) hold for the
 * attempts already under way when they are asked for. Many retries fall due at once (a failing
 * receiver, then the dev clock) and the change is asked for while they fire; a real receiver on
 * 127.0.0.1 checks each attempt, on arrival, against the secret in force for it at that moment
 * (the old one until the test holds the 201, the new one after) and records when it arrived.
 */
describe('webhook secret rotation and endpoint deletion vs attempts in flight (e2e, real HTTP)', () => {
  const app = new TestApp();
  /** Deliveries due at once in each round (more than the sender's 64 sockets per origin). */
  const CASES = 100;
  /** How long the receiver takes to answer (500). */
  const ANSWER_MS = 30;
  let webhooks: RetryWorker;

  interface Arrival {
    path: string;
    at: number;
    headers: IncomingHttpHeaders;
    rawBody: Buffer;
    /** Signed with the secret in force for this path when it arrived. */
    current: boolean;
  }
  const arrivals: Arrival[] = [];
  /** Per path: the secret a receiver following the API would verify with at this moment. */
  const currentSecret = new Map<string, string>();
  let server: Server;
  let baseUrl = '';

  const signedWith = (a: { headers: IncomingHttpHeaders; rawBody: Buffer }, secret: string) => {
    const ts = String(a.headers['x-svc-timestamp']);
    const expected = 'v1=' + createHmac('sha256', secret).update(`${ts}.`).update(a.rawBody).digest('hex');
    return a.headers['x-svc-signature'] === expected;
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        const rawBody = Buffer.concat(chunks);
        const secret = currentSecret.get(path);
        const at = performance.now();
        arrivals.push({ path, at, headers: req.headers, rawBody, current: secret !== undefined && signedWith({ headers: req.headers, rawBody }, secret) });
        // Always failing (every delivery stays pending and retries on the schedule), and a little
        // slow: with more attempts at once than the sender's sockets per origin (64), the others
        // wait for a socket after they were signed, as they would for a busy receiver.
        setTimeout(() => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"nope"}'), ANSWER_MS);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    await app.start();
    webhooks = (app as unknown as { app: { get<T>(t: unknown): T } }).app.get(RetryWorker);
  });
  afterAll(async () => {
    await app.stop();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const on = (path: string) => arrivals.filter((a) => a.path === path);

  /** Fires every timer due now and waits until no attempt is running (see webhooks.e2e-spec). */
  async function settleTimers() {
    const scheduler = (webhooks as unknown as { scheduler: { tick(): Promise<void>; inFlightCount: number } }).scheduler;
    await scheduler.tick();
    await until(async () => scheduler.inFlightCount === 0, 20_000, 'running attempts to finish');
  }

  /**
   * When the change is asked for, after the clock step (ms): the retries fire some 10-20 ms after
   * the step; a change asked for meanwhile meets them between their read of the endpoint and
   * their send (the window of the audit's finding).
   */
  const DELAYS_MS = [0, 2, 4, 6, 8, 10, 12, 14, 16];

  /**
   * A tenant, an endpoint on `path` (always 500) and CASES staff cases: CASES failed first
   * attempts, each delivery pending with its retry 5-6 s later (service clock).
   */
  async function failingDeliveries(path: string) {
    const t = await app.tenant();
    const { patientId } = await app.enrolledPatient(t);
    const created = await app.api.post(`${t.env}/webhook-endpoints`, { url: `${baseUrl}${path}`, events: ['clinical_case.opened'] }, t.staff);
    expect(created.status).toBe(201);
    const ep = created.body as { id: string; secret: string };
    currentSecret.set(path, ep.secret);
    const opened = await Promise.all(
      Array.from({ length: CASES }, (_, i) => app.api.post(`${t.env}/clinical-cases`, { patientId, request: `Please review ${i}` }, t.staff)),
    );
    expect(opened.map((r) => r.status)).toEqual(Array(CASES).fill(201));
    await until(
      async () => {
        const r = await app.api.get(`${t.env}/webhook-endpoints/${ep.id}/deliveries?status=pending&limit=${CASES}`, t.staff);
        const d = r.body.deliveries as { attempts: unknown[]; nextAttemptAt: string | null }[];
        return d.length === CASES && d.every((x) => x.attempts.length === 1 && x.nextAttemptAt) ? d : null;
      },
      20_000,
      'every first attempt recorded',
    );
    expect(on(path)).toHaveLength(CASES);
    expect(on(path).every((a) => a.current)).toBe(true);
    return { t, ep };
  }

  it('after the rotation answers 201, no attempt signed with the old secret arrives (retries due at that moment included)', async () => {
    let inflightAtChange = 0;
    for (let round = 0; round < DELAYS_MS.length; round++) {
      const path = `/rotate-${round}`;
      const { t, ep } = await failingDeliveries(path);
      // Every retry falls due (5 s + at most 20%) and fires; the rotation is asked for meanwhile.
      const clock = app.advanceClock(7);
      await new Promise((r) => setTimeout(r, DELAYS_MS[round]));
      const before = on(path).length;
      const rotated = await app.api.post(`${t.env}/webhook-endpoints/${ep.id}/rotate-secret`, undefined, t.staff);
      const answeredAt = performance.now();
      expect(rotated.status).toBe(201);
      const newSecret = rotated.body.secret as string;
      // From here a receiver following the API verifies with the new secret only.
      currentSecret.set(path, newSecret);
      await clock;
      await settleTimers();
      const all = on(path);
      const retries = all.slice(CASES);
      // All the retries went out (none was lost to the change), each signed with one of the two.
      expect(retries).toHaveLength(CASES);
      for (const a of retries) expect(signedWith(a, ep.secret) || signedWith(a, newSecret)).toBe(true);
      const late = all.filter((a) => a.at > answeredAt && signedWith(a, ep.secret));
      expect({ round, oldSignedAfter201: late.length }).toEqual({ round, oldSignedAfter201: 0 });
      expect(all.filter((a) => a.at > answeredAt).every((a) => a.current)).toBe(true);
      inflightAtChange += all.length - before - all.filter((a) => a.at > answeredAt).length;
    }
    // The change really met attempts under way (else the test proves nothing): some retries
    // arrived while the rotation was being answered.
    expect(inflightAtChange).toBeGreaterThan(0);
  });

  it('after the deletion answers 204, no attempt reaches the endpoint; the due deliveries end failed', async () => {
    let inflightAtChange = 0;
    for (let round = 0; round < DELAYS_MS.length; round++) {
      const path = `/delete-${round}`;
      const { t, ep } = await failingDeliveries(path);
      const clock = app.advanceClock(7);
      await new Promise((r) => setTimeout(r, DELAYS_MS[round]));
      const before = on(path).length;
      const deleted = await app.api.delete(`${t.env}/webhook-endpoints/${ep.id}`, t.staff);
      const answeredAt = performance.now();
      expect(deleted.status).toBe(204);
      await clock;
      await settleTimers();
      // Later retries too: the next pause is 5 min (+20%).
      await app.advanceClock(400);
      await settleTimers();
      const after = on(path).filter((a) => a.at > answeredAt);
      expect({ round, attemptsAfter204: after.length, msAfter: after.map((a) => Math.round(a.at - answeredAt)) }).toEqual({
        round,
        attemptsAfter204: 0,
        msAfter: [],
      });
      inflightAtChange += on(path).length - before;
      // Every delivery has ended: failed (abandoned, or recorded then abandoned), none pending.
      const svc = webhooks as unknown as { readStore: { list<T>(c: string, p: string, o?: { limit: number }): Promise<T[]> } };
      const docs = await until(
        async () => {
          const list = await svc.readStore.list<{ status: string }>('webhooks.deliveries', ep.id, { limit: 1000 });
          return list.length === CASES && list.every((d) => d.status === 'failed') ? list : null;
        },
        10_000,
        'every delivery of the deleted endpoint failed',
      );
      expect(docs).toHaveLength(CASES);
    }
    expect(inflightAtChange).toBeGreaterThan(0);
  });
});
