import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { DevClock } from '@svc/clock';
import { WidgetSessions } from '@svc/http';
import { Keyring } from '@svc/security';
import { TestApp } from '@svc/testing';

export type Tenant = Awaited<ReturnType<TestApp['tenant']>>;

/** Opens a staff_chat case for a patient of the environment (a freshly enrolled one unless given); returns its ids. */
export async function openCase(app: TestApp, t: Tenant, request = 'Please review the patient medication plan (canary-staff-note)', patientId?: string) {
  let externalPatientId: string | null = null;
  if (!patientId) ({ patientId, externalPatientId } = await app.enrolledPatient(t));
  const r = await app.api.post(`${t.env}/clinical-cases`, { patientId, request }, t.staff);
  if (r.status !== 201) throw new Error(`open case: ${r.status} ${r.text}`);
  return { caseId: r.body.caseId as string, reference: r.body.reference as string, priority: r.body.priority as string, patientId, externalPatientId };
}

export function update(sequence: number, status: string, extra: Record<string, unknown> = {}) {
  return { updateId: randomUUID(), sequence, status, externalReference: `ext-${sequence}`, ...extra };
}

/**
 * A widget session token as the widget session endpoint would issue it (same master key, same clock).
 * A linked session names both the patient and the external id it was signed in with (the service
 * checks the link with the external id on every request that needs it).
 */
export async function widgetToken(app: TestApp, session: { organizationId: string; environmentId: string; patientId: string | null; externalPatientId?: string | null }): Promise<string> {
  const keyring = new Keyring(Buffer.from(readFileSync(join(app.dataDir, 'master.key'), 'utf8').trim(), 'base64'));
  const sessions = new WidgetSessions(keyring, new DevClock(join(app.dataDir, 'clock.json')));
  const { sessionToken } = await sessions.issue({ sessionId: randomUUID(), externalPatientId: null, email: null, ...session });
  return sessionToken;
}

/**
 * An identity token for `sub` as the caller's site signs it (decisions 7): HS256 with the
 * environment's identity_token secret, issued now on the service clock, five minutes' life, with a
 * fresh `jti` (unless `claims` names one): a token opens one session only, and two tokens minted in
 * the same second for the same patient without a jti would be the same token.
 */
export async function identityToken(app: TestApp, secret: string, sub: string, claims: Record<string, string> = {}): Promise<string> {
  const now = Math.floor(Date.parse(await app.advanceClock(0)) / 1000);
  return new SignJWT({ jti: randomUUID(), ...claims }).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setIssuedAt(now).setExpirationTime(now + 300).sign(new TextEncoder().encode(secret));
}

export async function eventually<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 5000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The in-process broker of a TestApp (standalone): lets a test watch topics and send commands. */
export function brokerOf(app: TestApp): import('@svc/messaging').InProcessBroker {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { IN_PROCESS_BROKER } = require('@svc/platform');
  return (app as unknown as { app: { get(token: unknown): import('@svc/messaging').InProcessBroker } }).app.get(IN_PROCESS_BROKER);
}

/** Collects the integration messages published on a topic. */
export function watchTopic(app: TestApp, topic: string) {
  const seen: import('@svc/messaging').IntegrationMessage<any>[] = [];
  const stop = brokerOf(app).subscribe(topic, (m) => {
    seen.push(m.data as import('@svc/messaging').IntegrationMessage<any>);
  });
  return { seen, stop };
}

/** Request/reply on the app's bus. */
export function busRequest<T = any>(app: TestApp, pattern: string, data: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    brokerOf(app).request(pattern, data, (packet) => {
      if (packet.err !== undefined) reject(packet.err);
      else if (packet.response !== undefined) resolve(packet.response as T);
    });
  });
}

/**
 * One HTTP request with the path sent exactly as given (no URL normalisation, unlike fetch), e.g.
 * a badly percent-encoded `%zz`. `path` is relative to the app's base URL (`/api` included there).
 */
export function rawRequest(app: TestApp, method: string, path: string, options: { token?: string; body?: string } = {}): Promise<{ status: number; body: any; text: string }> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  return rawHttp(app, method, path, headers, options.body);
}

/** A request over node:http with exactly the headers given (plus content-length for a body): fetch would add or normalise some. */
export function rawHttp(app: TestApp, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: any; text: string }> {
  const base = new URL(app.baseUrl);
  const sent = { ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) };
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: base.port, method, path: `${base.pathname}${path}`, headers: sent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
