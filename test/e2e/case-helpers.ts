import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { basename, join } from 'node:path';
import { Logger } from '@nestjs/common';
import { SignJWT } from 'jose';
import { Kafka, logLevel } from 'kafkajs';
import { lastValueFrom } from 'rxjs';
import { DevClock } from '@svc/clock';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { WidgetSessions } from '@svc/http';
import { ask, busClient, BusRecord, IntegrationMessage, MetadataHeaders, Patterns } from '@svc/messaging';
import { eventStoreSettings, openRawEventStore, serviceEventStore } from '@svc/platform';
import { Keyring } from '@svc/security';
import { onTopology, TestApp, topologyDatabaseUrl, topologyDataDir, topologyKafkaBrokers } from '@svc/testing';

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
 * A widget session token as the widget session endpoint would issue it: the master key of the
 * service's data dir (the app's own on standalone, the topology's shared one), issued now on the
 * service clock (read through the dev tools). A linked session names both the patient and the
 * external id it was signed in with (the service checks the link with the external id on every
 * request that needs it).
 */
export async function widgetToken(
  app: TestApp,
  session: { organizationId: string; environmentId: string; patientId: string | null; externalPatientId?: string | null },
): Promise<string> {
  const keyring = masterKeyring(serviceDataDir(app));
  const offsetMs = Date.parse(await app.advanceClock(0)) - Date.now();
  const clock = new DevClock();
  clock.follow(offsetMs);
  const sessions = new WidgetSessions(keyring, clock);
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
  return new SignJWT({ jti: randomUUID(), ...claims })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setIssuedAt(now)
    .setExpirationTime(now + 300)
    .sign(new TextEncoder().encode(secret));
}

export async function eventually<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = onTopology() ? 15_000 : 5000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The in-process broker of a TestApp (standalone only): lets a test hold or reorder messages inside the process. */
export function brokerOf(app: TestApp): import('@svc/messaging').InProcessBroker {
  if (onTopology()) throw new Error('brokerOf(): the shared topology has no in-process broker (its bus is Kafka); use watchTopic, busRequest or publishEvent');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { IN_PROCESS_BROKER } = require('@svc/platform');
  return (app as unknown as { app: { get(token: unknown): import('@svc/messaging').InProcessBroker } }).app.get(IN_PROCESS_BROKER);
}

/**
 * What the suite opens on the topology's infrastructure (e2e-target.ts): one Kafka bus client (its
 * reply consumer group named after the suite file) for the requests and events a test sends, the
 * watch consumers, the event store reader; all closed after the suite's last test.
 */
const topology = {
  group: `e2e-${basename(expect.getState().testPath ?? 'suite').replace(/\.e2e-spec\.ts$/, '')}-${randomUUID().slice(0, 8)}`,
  client: undefined as undefined | Promise<import('@svc/messaging').AnyClientProxy>,
  store: undefined as undefined | Promise<EventStore>,
  open: new Set<() => Promise<void>>(),
};
if (onTopology()) {
  afterAll(async () => {
    await Promise.all([...topology.open].map((close) => close()));
    topology.open.clear();
  });
}

function kafkaClient(): Promise<import('@svc/messaging').AnyClientProxy> {
  topology.client ??= (async () => {
    // Nest's Kafka client logs every join and stop through Nest's logger: errors only in a test run.
    Logger.overrideLogger(['error']);
    const client = busClient(topology.group, { kind: 'kafka', brokers: topologyKafkaBrokers(), replyPatterns: Object.values(Patterns), replyWaitMs: 30_000 });
    topology.open.add(() => client.close());
    await client.connect();
    return client;
  })();
  return topology.client;
}

/**
 * The service's event store as the service reads it (payloads decrypted): the in-process one on
 * standalone; on the topology its PostgreSQL event store, opened beside it as the audit CLI opens
 * it (no schema created, no LISTEN) with the topology's master key, closed after the suite.
 */
export function eventStoreOf(app: TestApp): Promise<EventStore> {
  if (!onTopology()) return Promise.resolve((app as unknown as { app: { get(token: symbol): EventStore } }).app.get(EVENT_STORE));
  topology.store ??= (async () => {
    const raw = await openRawEventStore(eventStoreSettings({ EVENT_STORE: 'postgres', DATABASE_URL: topologyDatabaseUrl() }), { tool: true });
    topology.open.add(() => raw.close());
    return serviceEventStore(raw, masterKeyring(topologyDataDir()));
  })();
  return topology.store;
}

/** The service's data dir: the app's own on standalone, the topology's shared one (its master key, the dev tools' outbox). */
export function serviceDataDir(app: TestApp): string {
  return onTopology() ? topologyDataDir() : app.dataDir;
}

function masterKeyring(dataDir: string): Keyring {
  return new Keyring(Buffer.from(readFileSync(join(dataDir, 'master.key'), 'utf8').trim(), 'base64'));
}

export interface TopicWatch {
  /** The integration messages published on the topic since the watch began, in the order received. */
  seen: IntegrationMessage<any>[];
  stop(): Promise<void>;
}

/**
 * Collects the integration messages published on a topic from now on: on standalone, a
 * subscriber of the in-process broker; on the topology, a Kafka consumer of a group of the suite's
 * own that starts at the topic's end offsets as they are when this resolves (each record once).
 */
export async function watchTopic(app: TestApp, topic: string): Promise<TopicWatch> {
  const seen: IntegrationMessage<any>[] = [];
  if (!onTopology()) {
    const stop = brokerOf(app).subscribe(topic, (m) => {
      seen.push(m.data as IntegrationMessage<any>);
    });
    return { seen, stop: async () => stop() };
  }
  const k = new Kafka({ clientId: `${topology.group}-watch`, brokers: topologyKafkaBrokers(), logLevel: logLevel.NOTHING });
  const admin = k.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect());
  const consumer = k.consumer({ groupId: `${topology.group}-watch-${randomUUID().slice(0, 8)}`, maxWaitTimeInMs: 100 });
  const close = () => consumer.disconnect();
  topology.open.add(close);
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: false });
  // A record fetched before the seek below took effect comes again after it: kept once.
  const taken = new Set<string>();
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      const id = `${partition}:${message.offset}`;
      if (taken.has(id) || !message.value) return;
      taken.add(id);
      seen.push(JSON.parse(message.value.toString('utf8')) as IntegrationMessage<any>);
    },
  });
  for (const { partition, offset } of ends) consumer.seek({ topic, partition, offset });
  return {
    seen,
    stop: async () => {
      topology.open.delete(close);
      await close();
    },
  };
}

/**
 * Request/reply on the service's bus (the in-process broker, or Kafka through libs/messaging's
 * client on the topology): resolves with the reply, rejects with the refusal as the bus carries
 * it (`{ status, code, message, details? }`).
 */
export async function busRequest<T = any>(app: TestApp, pattern: string, data: unknown): Promise<T> {
  if (onTopology()) return ask<T>(await kafkaClient(), pattern, data, { timeoutMs: 30_000 });
  return new Promise((resolve, reject) => {
    brokerOf(app).request(pattern, data, (packet) => {
      if (packet.err !== undefined) reject(packet.err);
      else if (packet.response !== undefined) resolve(packet.response as T);
    });
  });
}

/**
 * Publishes an integration message on the service's bus as its producing app would (keyed by
 * stream id, metadata in headers on Kafka): the in-process broker, or the real topic on the
 * topology's Kafka. Resolves once the broker has it (standalone: once its subscribers ran).
 */
export async function publishEvent(app: TestApp, topic: string, m: IntegrationMessage<any>): Promise<void> {
  if (!onTopology()) {
    await brokerOf(app).publish(topic, m, { key: m.streamId });
    return;
  }
  const md = m.metadata;
  const headers: Record<string, string> = {
    [MetadataHeaders.eventId]: md.eventId,
    [MetadataHeaders.eventType]: m.type,
    [MetadataHeaders.correlationId]: md.correlationId,
    [MetadataHeaders.actor]: md.actor,
    [MetadataHeaders.recordedAt]: md.recordedAt,
    [MetadataHeaders.streamId]: m.streamId,
    [MetadataHeaders.position]: String(m.position),
    ...(md.causationId != null ? { [MetadataHeaders.causationId]: md.causationId } : {}),
    ...(md.organizationId != null ? { [MetadataHeaders.organizationId]: md.organizationId } : {}),
    ...(md.environmentId != null ? { [MetadataHeaders.environmentId]: md.environmentId } : {}),
  };
  await lastValueFrom((await kafkaClient()).emit(topic, new BusRecord(m.streamId, m, headers)), { defaultValue: undefined });
}

/**
 * One HTTP request with the path sent exactly as given (no URL normalisation, unlike fetch), e.g.
 * a badly percent-encoded `%zz`. `path` is relative to the app's base URL (`/api` included there).
 */
export function rawRequest(
  app: TestApp,
  method: string,
  path: string,
  options: { token?: string; body?: string } = {},
): Promise<{ status: number; body: any; text: string }> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  return rawHttp(app, method, path, headers, options.body);
}

/** A request over node:http with exactly the headers given (plus content-length for a body): fetch would add or normalise some. */
export function rawHttp(
  app: TestApp,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: any; text: string }> {
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
