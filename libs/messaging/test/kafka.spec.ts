// Over 400 lines: the Kafka adapter's suite on one real broker (relay, request/reply, offsets, dead letters), sharing its set-up.
/**
 * The bus on a real Kafka broker (kafkajs, which Nest's Kafka transport is built on).
 *
 * Which broker:
 *   - KAFKA_BROKERS when set: `npm test` (scripts/test.js) starts one from its jars and sets it;
 *     by hand, `npm run kafka:up` prints it.
 *   - otherwise testcontainers (apache/kafka, KRaft) where a Docker engine answers;
 *   - otherwise the suite says so in one line and skips, unless KAFKA_REQUIRED=1 or CI is set
 *     (scripts/test.js sets KAFKA_REQUIRED): then it fails.
 *
 * Every run uses its own topics and consumer groups (a run id in their names), so a reused broker
 * carries nothing from one run into the next; the topics are deleted at the end.
 */
import 'reflect-metadata';
import { ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  Controller,
  DynamicModule,
  INestApplicationContext,
  INestMicroservice,
  Inject,
  Injectable,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, KafkaContext, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { ConfigResourceTypes, Kafka, KafkaMessage, logLevel, Partitioners } from 'kafkajs';
import { lastValueFrom, timeout } from 'rxjs';
import type { StartedTestContainer } from 'testcontainers';
import type { NewEvent } from '../../eventstore/src/types';
import { SqliteEventStore } from '../../eventstore/src/sqlite-event-store';
import { SqliteReadStore } from '../../read-store/src/sqlite-read-store';
import {
  AnyClientProxy,
  BUS_CLIENT,
  busClient,
  BusExceptionFilter,
  BusRecord,
  IntegrationEventRelay,
  IntegrationMessage,
  kafkaBrokers,
  busServerStrategy,
  DeadLetterHeaders,
  deadLetterTopic,
  ensureTopics,
  KafkaConsumerSettings,
  KAFKA_GROUP_MEMBERSHIP,
  topicSpecs,
  MetadataHeaders,
} from '../src';

/** Fast, synchronous check (module load cannot await): does a Docker engine answer /_ping? */
function dockerEngineReachable(): boolean {
  const candidates: string[] = [];
  const host = process.env.DOCKER_HOST;
  if (host) candidates.push(host);
  for (const sock of [
    '/var/run/docker.sock',
    process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, 'docker.sock') : '',
    join(homedir(), '.docker', 'run', 'docker.sock'),
  ]) {
    if (sock && existsSync(sock)) candidates.push(`unix://${sock}`);
  }
  const script = `
    const http = require('node:http');
    const u = process.argv[1];
    const opts = u.startsWith('unix://') ? { socketPath: u.slice(7) } : (() => { const x = new URL(u.replace(/^tcp:/, 'http:')); return { host: x.hostname, port: x.port || 2375 }; })();
    const req = http.get({ ...opts, path: '/_ping', timeout: 1500 }, (res) => process.exit(res.statusCode === 200 ? 0 : 1));
    req.on('error', () => process.exit(1));
    req.on('timeout', () => process.exit(1));`;
  return candidates.some((c) => spawnSync(process.execPath, ['-e', script, c], { timeout: 3000, stdio: 'ignore' }).status === 0);
}

const GIVEN_BROKERS = (process.env.KAFKA_BROKERS ?? '').trim() ? kafkaBrokers() : null;
const DOCKER = GIVEN_BROKERS ? false : dockerEngineReachable();
const REQUIRED = process.env.KAFKA_REQUIRED === '1' || ['1', 'true'].includes((process.env.CI ?? '').toLowerCase());
const SOURCE: 'brokers' | 'docker' | 'none' = GIVEN_BROKERS ? 'brokers' : DOCKER ? 'docker' : 'none';
// Straight to stdout: Jest does not show the console output of a suite whose tests all skip.
if (SOURCE === 'none' && !REQUIRED)
  process.stdout.write('Kafka transport suite skipped: no KAFKA_BROKERS and no Docker engine reachable (npm run kafka:up starts a broker)\n');

const KAFKA_IMAGE = 'apache/kafka:3.9.0';
const START_SCRIPT = '/tmp/testcontainers_start.sh';

async function waitForAdmin(brokers: string[], timeoutMs: number): Promise<void> {
  const admin = new Kafka({ clientId: 'kafka-spec-probe', brokers, logLevel: logLevel.NOTHING }).admin();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await admin.connect();
      await admin.listTopics();
      await admin.disconnect();
      return;
    } catch (e) {
      await admin.disconnect().catch(() => undefined);
      if (Date.now() > deadline) throw new Error(`no Kafka broker answers at ${brokers.join(',')}: ${(e as Error).message}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

async function startContainer(): Promise<{ container: StartedTestContainer; brokers: string[] }> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer(KAFKA_IMAGE)
    .withExposedPorts(9092)
    .withEnvironment({
      CLUSTER_ID: '4L6g3nShT-eMCtK--X86sw',
      KAFKA_NODE_ID: '1',
      KAFKA_PROCESS_ROLES: 'broker,controller',
      KAFKA_LISTENERS: 'PLAINTEXT://0.0.0.0:9092,BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094',
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT',
      KAFKA_INTER_BROKER_LISTENER_NAME: 'BROKER',
      KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
      KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9094',
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
      KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
      KAFKA_NUM_PARTITIONS: '3',
    })
    // The advertised listener needs the mapped port, known only once the container runs:
    // wait for a start script that is copied in after start.
    .withEntrypoint(['sh', '-c'])
    .withCommand([`echo WAITING_FOR_START_SCRIPT; while [ ! -f ${START_SCRIPT} ]; do sleep 0.1; done; sh ${START_SCRIPT}`])
    .withWaitStrategy(Wait.forLogMessage('WAITING_FOR_START_SCRIPT'))
    .withStartupTimeout(120_000)
    .start();
  const broker = `${container.getHost()}:${container.getMappedPort(9092)}`;
  await container.copyContentToContainer([
    {
      content: `export KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://${broker},BROKER://localhost:9093\nexec /etc/kafka/docker/run\n`,
      target: START_SCRIPT,
      mode: 0o755,
    },
  ]);
  await waitForAdmin([broker], 90_000);
  return { container, brokers: [broker] };
}

async function eventually(check: () => void, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      check();
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

// ───────────────────────────── names of this run ─────────────────────────────

const RUN = randomUUID().slice(0, 8);
const name = (what: string) => `kafka-spec-${RUN}.${what}`;
const ECHO = name('command.echo');
const REFUSE = name('command.refuse');
const CASE_EVENTS = name('case-ledger.events');
const GATEWAY_EVENTS = name('gateway.events');
const PEER_ECHO = name('peer.echo');
const PEER_REFUSE = name('peer.refuse');
const PEER_LOSE_REPLY = name('peer.lose-reply');
const RESUME = name('resume');
const EARLIEST = name('earliest');
const FAILING = name('failing');
const SLOW = name('slow');
const ORDERED = name('ordered');
const POISON = name('poison');
const EARLY = name('command.early');
const DOCUMENTED = `kafka-spec-${RUN}-documented.`;
const PARTITIONS = 3;

// ───────────────────────────── the in-process app ─────────────────────────────

interface SeenEvent {
  topic: string;
  partition: number;
  payload: IntegrationMessage;
  key: string | null;
  headers: Record<string, string>;
}

const seen: SeenEvent[] = [];

function stringHeaders(headers: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) out[k] = String(v);
  return out;
}

@Controller()
class KafkaSpecController {
  @MessagePattern(ECHO)
  echo(@Payload() data: { text: string; when: string }) {
    return { echoed: data.text, whenType: typeof data.when };
  }

  @MessagePattern(EARLY)
  early(@Payload() data: { n: number }) {
    return { n: data.n, early: true };
  }

  @MessagePattern(REFUSE)
  refuse() {
    throw new RpcException({ status: 409, code: 'OUT_OF_ORDER', message: 'sequence 3 expected' });
  }

  @EventPattern(CASE_EVENTS)
  onCaseEvent(@Payload() payload: IntegrationMessage, @Ctx() ctx: KafkaContext) {
    this.record(payload, ctx);
  }

  @EventPattern(GATEWAY_EVENTS)
  onGatewayEvent(@Payload() payload: IntegrationMessage, @Ctx() ctx: KafkaContext) {
    this.record(payload, ctx);
  }

  private record(payload: IntegrationMessage, ctx: KafkaContext): void {
    const m = ctx.getMessage();
    seen.push({
      topic: ctx.getTopic(),
      partition: ctx.getPartition(),
      payload,
      key: m.key === null || m.key === undefined ? null : String(m.key),
      headers: stringHeaders(m.headers),
    });
  }
}

@Module({ controllers: [KafkaSpecController] })
class KafkaSpecModule {}

// ───────────────────────────── consumer-group apps ─────────────────────────────

const resumed: number[] = [];
const fromEarliest = new Map<string, number[]>();

@Controller()
class ResumeController {
  @EventPattern(RESUME)
  on(@Payload() data: { n: number }) {
    resumed.push(data.n);
  }
}

@Module({ controllers: [ResumeController] })
class ResumeModule {}

/** SLOW: each message's handler runs longer than a group member's session (KAFKA_GROUP_MEMBERSHIP). */
const slowRuns: { n: number; startedAt: number; endedAt?: number }[] = [];

@Controller()
class SlowController {
  @EventPattern(SLOW)
  async on(@Payload() data: { n: number; ms: number }) {
    const run: (typeof slowRuns)[number] = { n: data.n, startedAt: Date.now() };
    slowRuns.push(run);
    await new Promise((r) => setTimeout(r, data.ms));
    run.endedAt = Date.now();
  }
}

@Module({ controllers: [SlowController] })
class SlowModule {}

/** The app now reading EARLIEST (the test runs one at a time). */
let earliestReader = '';

@Controller()
class EarliestController {
  @EventPattern(EARLIEST)
  on(@Payload() data: { n: number }) {
    fromEarliest.set(earliestReader, [...(fromEarliest.get(earliestReader) ?? []), data.n]);
  }
}

@Module({ controllers: [EarliestController] })
class EarliestModule {}

/** Attempts per message; the handler fails the first two attempts of message 1. */
const attempts: number[] = [];

@Controller()
class FailingController {
  @EventPattern(FAILING)
  on(@Payload() data: { n: number }) {
    attempts.push(data.n);
    if (data.n === 1 && attempts.filter((n) => n === 1).length <= 2) throw new Error('consumer not ready');
  }
}

@Module({ controllers: [FailingController] })
class FailingModule {}

/** Each handling of ORDERED: start and end, with how many handlings were running at its start. */
const orderedLog: { key: string; n: number; partition: number; startedAt: number; endedAt: number }[] = [];
let orderedInFlight = 0;
let orderedMaxInFlight = 0;
const orderedInFlightByKey = new Map<string, number>();
let orderedKeyOverlap = false;

@Controller()
class OrderedController {
  @EventPattern(ORDERED)
  async on(@Payload() data: { key: string; n: number }, @Ctx() ctx: KafkaContext) {
    const startedAt = Date.now();
    orderedInFlight++;
    orderedMaxInFlight = Math.max(orderedMaxInFlight, orderedInFlight);
    const mine = (orderedInFlightByKey.get(data.key) ?? 0) + 1;
    orderedInFlightByKey.set(data.key, mine);
    if (mine > 1) orderedKeyOverlap = true;
    try {
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      orderedInFlight--;
      orderedInFlightByKey.set(data.key, (orderedInFlightByKey.get(data.key) ?? 1) - 1);
    }
    orderedLog.push({ key: data.key, n: data.n, partition: ctx.getPartition(), startedAt, endedAt: Date.now() });
  }
}

@Module({ controllers: [OrderedController] })
class OrderedModule {}

/** POISON: a message with `poison: true` fails (with a message that must never be logged) until healed. */
const poisonHandled: { key: string; n: number; at: number; offset: string }[] = [];
const poisonAttempts: { key: string; n: number; at: number; offset: string }[] = [];
let poisonHealed = false;
const POISON_SECRET = 'patient Jane Roe, born 1950-01-01';

@Controller()
class PoisonController {
  @EventPattern(POISON)
  on(@Payload() data: { key: string; n: number; poison?: boolean; note?: string }, @Ctx() ctx: KafkaContext) {
    const offset = ctx.getMessage().offset;
    poisonAttempts.push({ key: data.key, n: data.n, at: Date.now(), offset });
    if (data.poison && !poisonHealed) throw new RpcException({ status: 503, code: 'DEPENDENCY_DOWN', message: `cannot notify ${POISON_SECRET}` });
    poisonHandled.push({ key: data.key, n: data.n, at: Date.now(), offset });
  }
}

@Module({ controllers: [PoisonController] })
class PoisonModule {}

// ───────────────────────────── the calling app (for the peer process) ─────────────────────────────

@Injectable()
class PeerCaller implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(@Inject(BUS_CLIENT) private readonly client: AnyClientProxy) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.client.connect();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.client.close();
  }

  echo(n: number, text: string): Promise<{ n: number; echoed: string; pid: number }> {
    return lastValueFrom(this.client.send(PEER_ECHO, { n, text }).pipe(timeout(30_000)));
  }

  refuse(n: number): Promise<unknown> {
    return lastValueFrom(this.client.send(PEER_REFUSE, { n }).pipe(timeout(30_000)));
  }

  loseReply(n: number, waitMs: number): Promise<unknown> {
    return lastValueFrom(this.client.send(PEER_LOSE_REPLY, { n }).pipe(timeout(waitMs)));
  }
}

@Module({})
class CallerModule {
  static forBrokers(brokers: string[]): DynamicModule {
    return {
      module: CallerModule,
      providers: [
        {
          provide: BUS_CLIENT,
          useFactory: () => busClient(`kafka-spec-caller-${RUN}`, { kind: 'kafka', brokers, replyPatterns: [PEER_ECHO, PEER_REFUSE, PEER_LOSE_REPLY] }),
        },
        PeerCaller,
      ],
    };
  }
}

/** Starts the peer app (libs/messaging/test/kafka-peer/peer.ts) in a process of its own; `stderr` collects what it writes there. */
async function startPeer(brokers: string[], stderr: string[] = []): Promise<ChildProcess> {
  const dir = resolve(__dirname, 'kafka-peer');
  const child = spawn(process.execPath, [join(__dirname, '../../testing/ts-register.js'), join(dir, 'peer.ts')], {
    cwd: resolve(__dirname, '../../..'),
    env: { ...process.env, KAFKA_BROKERS: brokers.join(','), PEER_SERVICE: `kafka-spec-peer-${RUN}`, PEER_ECHO, PEER_REFUSE, PEER_LOSE_REPLY },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    stderr.push(d.toString());
  });
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`peer not ready within 90 s: ${err}`)), 90_000);
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n')) {
        clearTimeout(timer);
        ready();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`peer exited (${code}) before it was ready: ${err}`));
    });
  });
  return child;
}

async function stopPeer(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

// ───────────────────────────── the suite ─────────────────────────────

function metadata(overrides: Partial<NewEvent['metadata']> = {}): NewEvent['metadata'] {
  return {
    eventId: randomUUID(),
    correlationId: randomUUID(),
    causationId: null,
    organizationId: 'org-1',
    environmentId: 'env-1',
    actor: 'system',
    recordedAt: new Date().toISOString(),
    ...overrides,
  };
}

/** The partition Kafka's Java clients pick for a key (murmur2), as kafkajs's default partitioner does. */
function javaPartition(topic: string, key: string): number {
  const partitionMetadata = Array.from({ length: PARTITIONS }, (_, partitionId) => ({
    partitionId,
    partitionErrorCode: 0,
    leader: 1,
    replicas: [1],
    isr: [1],
  }));
  return Partitioners.DefaultPartitioner()({ topic, partitionMetadata, message: { key, value: '' } });
}

/** `count` keys that land on `count` different partitions of a topic of PARTITIONS partitions. */
function keysOnDistinctPartitions(topic: string, count: number): string[] {
  const byPartition = new Map<number, string>();
  for (let i = 0; byPartition.size < count; i++) {
    const key = `key-${RUN}-${i}`;
    const p = javaPartition(topic, key);
    if (!byPartition.has(p)) byPartition.set(p, key);
  }
  return [...byPartition.values()];
}

/** Runs `node scripts/dlq.js <args>` (the documented command) against the brokers; its output and exit code. */
function dlqCommand(brokers: string[], args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [resolve(__dirname, '../../../scripts/dlq.js'), ...args],
      { cwd: resolve(__dirname, '../../..'), env: { ...process.env, KAFKA_BROKERS: brokers.join(',') }, timeout: 120_000 },
      (err, stdout, stderr) => done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
    );
  });
}

if (SOURCE === 'none' && REQUIRED) {
  describe('Kafka transport', () => {
    it('has a broker', () => {
      throw new Error(
        'no Kafka broker: KAFKA_BROKERS is not set and no Docker engine answers; `npm run kafka:up` starts one (scripts/test.js does it before the tests: see its output)',
      );
    });
  });
}

(SOURCE === 'none' ? describe.skip : describe)(`Kafka transport (${SOURCE === 'brokers' ? 'KAFKA_BROKERS' : 'testcontainers'})`, () => {
  jest.setTimeout(180_000);
  let container: StartedTestContainer | undefined;
  let brokers: string[];
  let kafka: Kafka;
  let app: INestMicroservice;
  let client: AnyClientProxy;
  let emitter: AnyClientProxy;

  beforeAll(async () => {
    if (GIVEN_BROKERS) {
      brokers = GIVEN_BROKERS;
      await waitForAdmin(brokers, 30_000);
    } else {
      ({ container, brokers } = await startContainer());
    }
    kafka = new Kafka({ clientId: `kafka-spec-admin-${RUN}`, brokers, logLevel: logLevel.NOTHING });
    const topic = (name: string, partitions: number) => ({ topic: name, partitions, retentionMs: 3_600_000 });
    await ensureTopics({
      brokers,
      topics: [
        ...[ECHO, `${ECHO}.reply`, REFUSE, `${REFUSE}.reply`, CASE_EVENTS, GATEWAY_EVENTS].map((t) => topic(t, PARTITIONS)),
        ...[PEER_ECHO, `${PEER_ECHO}.reply`, PEER_REFUSE, `${PEER_REFUSE}.reply`].map((t) => topic(t, PARTITIONS)),
        ...[RESUME, EARLIEST, FAILING, SLOW].map((t) => topic(t, 1)),
        // No reply topic for EARLY (its client is the first to need it), and no dead-letter topics:
        // the apps' wiring creates those.
        ...[ORDERED, POISON, EARLY].map((t) => topic(t, PARTITIONS)),
      ],
    });

    // Wired as the apps are (busServerStrategy).
    app = await NestFactory.createMicroservice(KafkaSpecModule, {
      ...(busServerStrategy(`kafka-spec-service-${RUN}`, { kind: 'kafka', brokers }) as object),
      logger: false,
    });
    app.useGlobalFilters(new BusExceptionFilter());
    await app.listen();
    client = busClient(`kafka-spec-caller-inproc-${RUN}`, { kind: 'kafka', brokers, replyPatterns: [ECHO, REFUSE] });
    await client.connect();
    emitter = busClient(`kafka-spec-emitter-${RUN}`, { kind: 'kafka', brokers });
    await emitter.connect();
  });

  afterAll(async () => {
    await client?.close();
    await emitter?.close();
    await app?.close();
    if (container) {
      await container.stop();
    } else if (kafka) {
      const admin = kafka.admin();
      await admin.connect();
      const mine = (await admin.listTopics()).filter((t) => t.startsWith(`kafka-spec-${RUN}.`) || t.startsWith(DOCUMENTED));
      await admin.deleteTopics({ topics: mine }).catch(() => undefined);
      await admin.disconnect();
    }
  });

  it('request/reply over Kafka; the payload is JSON (a Date arrives as a string)', async () => {
    await expect(lastValueFrom(client.send(ECHO, { text: 'hello', when: new Date() }).pipe(timeout(30_000)))).resolves.toEqual({
      echoed: 'hello',
      whenType: 'string',
    });
  });

  it('a refusal crosses with status and code intact', async () => {
    await expect(lastValueFrom(client.send(REFUSE, {}).pipe(timeout(30_000)))).rejects.toMatchObject({ status: 409, code: 'OUT_OF_ORDER' });
  });

  it("each relay publishes its own service's events to its topic, keyed by stream id, metadata in headers, in stream order", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kafka-relay-'));
    const store = new SqliteEventStore(join(dir, 'events.db'), { pollIntervalMs: 20 });
    const readStore = new SqliteReadStore(join(dir, 'read.db'));
    const caseRelay = new IntegrationEventRelay({
      name: `case-relay-${RUN}`,
      store,
      readStore,
      client: emitter,
      topic: CASE_EVENTS,
      streamPrefixes: ['case-ledger-'],
    });
    const gatewayRelay = new IntegrationEventRelay({
      name: `gateway-relay-${RUN}`,
      store,
      readStore,
      client: emitter,
      topic: GATEWAY_EVENTS,
      streamPrefixes: ['gateway-'],
    });
    try {
      await caseRelay.start();
      await gatewayRelay.start();
      const a = `case-ledger-case-${randomUUID()}`;
      const b = `case-ledger-case-${randomUUID()}`;
      const org = `gateway-organization-${randomUUID()}`;
      const opened = metadata();
      await store.append(a, [{ type: 'clinical_case.opened', data: { n: 1 }, metadata: opened }], 'no_stream');
      await store.append(
        b,
        [{ type: 'clinical_case.opened', data: { n: 1 }, metadata: metadata({ organizationId: 'org-2', environmentId: 'env-2' }) }],
        'no_stream',
      );
      await store.append(org, [{ type: 'organization.created', data: { n: 1 }, metadata: metadata({ actor: 'staff:ada' }) }], 'no_stream');
      await store.append(
        a,
        [
          {
            type: 'clinical_case.acknowledged',
            data: { n: 2 },
            metadata: metadata({ causationId: opened.eventId, correlationId: opened.correlationId, actor: 'staff:ada' }),
          },
          { type: 'clinical_case.updated', data: { n: 3 }, metadata: metadata({ causationId: opened.eventId }) },
        ],
        0,
      );
      const { position: last } = await store.append(
        b,
        [{ type: 'clinical_case.resolved', data: { n: 2 }, metadata: metadata({ organizationId: null, environmentId: null }) }],
        0,
      );
      const recorded = (await store.readAll(0, 100)).filter((e) => [a, b, org].includes(e.streamId));
      expect(recorded).toHaveLength(6);
      // A relay follows its own streams only: each is waited on at its last event.
      const gatewayLast = recorded.filter((e) => e.streamId === org).at(-1)!.position;
      await caseRelay.waitFor(last, 60_000);
      await gatewayRelay.waitFor(gatewayLast, 60_000);
      const mine = () => seen.filter((s) => [a, b, org].includes(s.payload.streamId));
      await eventually(() => expect(mine()).toHaveLength(6));

      for (const e of recorded) {
        const got = mine().filter((s) => s.payload.metadata.eventId === e.metadata.eventId);
        expect(got).toHaveLength(1);
        const [s] = got;
        expect(s.topic).toBe(e.streamId === org ? GATEWAY_EVENTS : CASE_EVENTS);
        expect(s.payload).toEqual({ type: e.type, data: e.data, metadata: e.metadata, streamId: e.streamId, position: e.position });
        expect(s.key).toBe(e.streamId);
        // Every stream stays on the partition a Java client would choose for its id.
        expect(s.partition).toBe(javaPartition(s.topic, e.streamId));
        const m = e.metadata;
        const expected: Record<string, string> = {
          [MetadataHeaders.eventId]: m.eventId,
          [MetadataHeaders.eventType]: e.type,
          [MetadataHeaders.correlationId]: m.correlationId,
          [MetadataHeaders.actor]: m.actor,
          [MetadataHeaders.recordedAt]: m.recordedAt,
          [MetadataHeaders.streamId]: e.streamId,
          [MetadataHeaders.position]: String(e.position),
        };
        if (m.causationId !== null) expected[MetadataHeaders.causationId] = m.causationId;
        if (m.organizationId !== null) expected[MetadataHeaders.organizationId] = m.organizationId;
        if (m.environmentId !== null) expected[MetadataHeaders.environmentId] = m.environmentId;
        // Exactly these headers (a null field is left out); Nest's own headers aside.
        const own = Object.fromEntries(Object.entries(s.headers).filter(([k]) => !k.startsWith('kafka_')));
        expect(own).toEqual(expected);
      }
      // Per stream, consumers get the events in the order of the log.
      for (const stream of [a, b]) {
        const order = mine()
          .filter((s) => s.payload.streamId === stream)
          .map((s) => s.payload.position);
        expect(order).toEqual(recorded.filter((e) => e.streamId === stream).map((e) => e.position));
      }
      await caseRelay.stop();
      await gatewayRelay.stop();
      expect(await readStore.getCheckpoint(`case-relay-${RUN}`)).toBe(last);
      expect(await readStore.getCheckpoint(`gateway-relay-${RUN}`)).toBe(gatewayLast);
    } finally {
      await caseRelay.stop();
      await gatewayRelay.stop();
      await store.close();
      await readStore.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('request/reply between two Nest apps in two processes', () => {
    let peer: ChildProcess | undefined;
    let caller: INestApplicationContext | undefined;
    const peerStderr: string[] = [];

    beforeAll(async () => {
      peer = await startPeer(brokers, peerStderr);
      caller = await NestFactory.createApplicationContext(CallerModule.forBrokers(brokers), { logger: false });
      caller.enableShutdownHooks();
      await caller.init();
    });

    afterAll(async () => {
      await caller?.close();
      await stopPeer(peer);
    });

    it('each of 20 concurrent requests gets its own answer, from the other process', async () => {
      const calls = caller!.get(PeerCaller);
      const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => calls.echo(n, `message ${n}`)));
      expect(answers).toEqual(Array.from({ length: 20 }, (_, n) => ({ n, echoed: `MESSAGE ${n}`, pid: peer!.pid })));
      expect(peer!.pid).not.toBe(process.pid);
    });

    it('a domain refusal crosses processes with status, code and details intact', async () => {
      await expect(caller!.get(PeerCaller).refuse(7)).rejects.toEqual({
        status: 409,
        code: 'ALREADY_RESOLVED',
        message: 'request 7 refused',
        details: { n: 7 },
      });
    });

    // Last of the group: the peer's producer stays disconnected after it.
    it('a reply that cannot be sent (its producer lost) is logged, and the answering process carries on', async () => {
      const exited = new Promise<number | null>((r) => peer!.once('exit', (code) => r(code)));
      // The caller's wait ends without the reply (an app answers that 503; the request is safe to repeat).
      await expect(caller!.get(PeerCaller).loseReply(9, 3000)).rejects.toMatchObject({ name: 'TimeoutError' });
      const outcome = await Promise.race([exited, new Promise<'alive'>((r) => setTimeout(() => r('alive'), 2000))]);
      expect(outcome).toBe('alive');
      const lines = peerStderr
        .join('')
        .split('\n')
        .filter((l) => l.startsWith('{'));
      const notSent = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'bus reply not sent');
      expect(notSent).toMatchObject({ level: 'warn', replyTopic: `${PEER_LOSE_REPLY}.reply`, errorCode: expect.any(String) });
      // Metadata only: nothing of the request or of the reply.
      expect(JSON.stringify(notSent)).not.toContain('"n"');
    });
  });

  describe('consumer groups', () => {
    const emit = async (topic: string, values: number[]) => {
      for (const n of values) await lastValueFrom(emitter.emit(topic, new BusRecord('one-key', { n })), { defaultValue: undefined });
    };

    /**
     * A consumer wired as the apps are (busServerStrategy), with a shorter fetch wait, so that
     * close() (which waits for the fetch in flight) takes half a second rather than five, and
     * whatever retry settings a test gives.
     */
    async function startConsumer(module: unknown, service: string, consumer: KafkaConsumerSettings = {}): Promise<INestMicroservice> {
      const strategy = busServerStrategy(service, { kind: 'kafka', brokers, consumer: { maxWaitTimeInMs: 500, retryDelayMs: 50, ...consumer } });
      const ms = await NestFactory.createMicroservice(module as never, { ...(strategy as object), logger: false });
      ms.useGlobalFilters(new BusExceptionFilter());
      await ms.listen();
      return ms;
    }

    async function committed(groupId: string, topic: string): Promise<string[]> {
      const admin = kafka.admin();
      await admin.connect();
      try {
        const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
        return offsets.partitions.map((p) => p.offset);
      } finally {
        await admin.disconnect();
      }
    }

    it('a consumer group that restarts resumes from its committed offset', async () => {
      const service = `kafka-spec-resume-${RUN}`;
      let ms = await startConsumer(ResumeModule, service);
      try {
        await emit(RESUME, [1, 2, 3]);
        await eventually(() => expect(resumed).toEqual([1, 2, 3]));
        await ms.close();
        // Nest appends -server to the group id.
        expect(await committed(`${service}-server`, RESUME)).toEqual(['3']);

        await emit(RESUME, [4, 5]); // while no member of the group runs
        resumed.length = 0;
        ms = await startConsumer(ResumeModule, service);
        // One partition: had the group gone back to 1, 1..3 would come before 4.
        await eventually(() => expect(resumed).toEqual([4, 5]));
        await emit(RESUME, [6]);
        await eventually(() => expect(resumed).toEqual([4, 5, 6]));
      } finally {
        await ms.close();
      }
      expect(await committed(`${service}-server`, RESUME)).toEqual(['6']);
    });

    it('a handler slower than the group session keeps its partition: it runs once, and the next message follows it', async () => {
      const service = `kafka-spec-slow-${RUN}`;
      const ms = await startConsumer(SlowModule, service);
      try {
        const handlerMs = KAFKA_GROUP_MEMBERSHIP.sessionTimeout + 3000;
        await lastValueFrom(emitter.emit(SLOW, new BusRecord('one-key', { n: 1, ms: handlerMs })), { defaultValue: undefined });
        await lastValueFrom(emitter.emit(SLOW, new BusRecord('one-key', { n: 2, ms: 0 })), { defaultValue: undefined });
        await eventually(
          () =>
            expect(slowRuns.map((r) => [r.n, r.endedAt !== undefined])).toEqual([
              [1, true],
              [2, true],
            ]),
          handlerMs + 15_000,
        );
        // Had the member lost its session, its partition would have gone back to the last commit:
        // message 1 would have run a second time.
        await new Promise((r) => setTimeout(r, 3000));
        expect(slowRuns.map((r) => r.n)).toEqual([1, 2]);
      } finally {
        await ms.close();
      }
      expect(await committed(`${service}-server`, SLOW)).toEqual(['2']);
    }, 60_000);

    it('a message whose handler fails is tried again, and the ones after it on its partition wait for it', async () => {
      const service = `kafka-spec-failing-${RUN}`;
      const ms = await startConsumer(FailingModule, service);
      try {
        await emit(FAILING, [1, 2]);
        await eventually(() => expect(attempts).toEqual([1, 1, 1, 2]));
      } finally {
        await ms.close();
      }
      expect(await committed(`${service}-server`, FAILING)).toEqual(['2']);
    });

    it('a new consumer group starts from the earliest offset, each group on its own (no option needed)', async () => {
      await emit(EARLIEST, [1, 2, 3]); // before any group reads the topic
      for (const reader of ['first', 'second']) {
        earliestReader = reader;
        const ms = await startConsumer(EarliestModule, `kafka-spec-earliest-${reader}-${RUN}`);
        try {
          await eventually(() => expect(fromEarliest.get(reader)).toEqual([1, 2, 3]));
        } finally {
          await ms.close();
        }
      }
    });

    /** Every record of a topic, read by a group of its own from the beginning, once `count` are there. */
    async function readTopic(topic: string, count: number): Promise<KafkaMessage[]> {
      const consumer = kafka.consumer({ groupId: `kafka-spec-reader-${randomUUID()}`, maxWaitTimeInMs: 200 });
      const got: KafkaMessage[] = [];
      await consumer.connect();
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await consumer.run({ eachMessage: async ({ message }) => void got.push(message) });
        await eventually(() => expect(got.length).toBeGreaterThanOrEqual(count));
        return got;
      } finally {
        await consumer.disconnect();
      }
    }

    async function highWatermarks(topic: string): Promise<string[]> {
      const admin = kafka.admin();
      await admin.connect();
      try {
        return (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition).map((p) => p.high);
      } finally {
        await admin.disconnect();
      }
    }

    it('partitions are consumed at the same time, and the messages of one key in their order', async () => {
      const keys = keysOnDistinctPartitions(ORDERED, PARTITIONS);
      // Published before the group starts, so that every partition has work waiting at once.
      for (let n = 1; n <= 5; n++)
        for (const key of keys) await lastValueFrom(emitter.emit(ORDERED, new BusRecord(key, { key, n })), { defaultValue: undefined });
      const ms = await startConsumer(OrderedModule, `kafka-spec-ordered-${RUN}`);
      try {
        await eventually(() => expect(orderedLog).toHaveLength(5 * PARTITIONS));
      } finally {
        await ms.close();
      }
      for (const key of keys) expect(orderedLog.filter((e) => e.key === key).map((e) => e.n)).toEqual([1, 2, 3, 4, 5]);
      // One key never has two messages in hand at once; different partitions do.
      expect(orderedKeyOverlap).toBe(false);
      expect(orderedMaxInFlight).toBeGreaterThan(1);
    });

    it('a message that keeps failing goes to <topic>.dlq after its attempts, the others go on, and the replay command puts it back', async () => {
      const service = `kafka-spec-poison-${RUN}`;
      const logged: { level: string; msg: string; meta: Record<string, unknown> }[] = [];
      const logger = {
        info: (meta: Record<string, unknown>, msg: string) => void logged.push({ level: 'info', msg, meta }),
        warn: (meta: Record<string, unknown>, msg: string) => void logged.push({ level: 'warn', msg, meta }),
        error: (meta: Record<string, unknown>, msg: string) => void logged.push({ level: 'error', msg, meta }),
      };
      const [a, b] = keysOnDistinctPartitions(POISON, 2);
      const eventId = randomUUID();
      const ms = await startConsumer(PoisonModule, service, { maxAttempts: 3, retryDelayMs: 500, maxRetryDelayMs: 500, logger });
      try {
        const send = (key: string, value: object, headers: Record<string, string> = {}) =>
          lastValueFrom(emitter.emit(POISON, new BusRecord(key, value, headers)), { defaultValue: undefined });
        await send(
          a,
          { key: a, n: 1, poison: true, note: POISON_SECRET },
          { [MetadataHeaders.eventId]: eventId, [MetadataHeaders.eventType]: 'example.failed' },
        );
        await send(a, { key: a, n: 2 });
        await send(a, { key: a, n: 3 });
        await send(b, { key: b, n: 1 });
        await send(b, { key: b, n: 2 });

        await eventually(() => expect(poisonHandled.map((h) => `${h.key === a ? 'a' : 'b'}${h.n}`).sort()).toEqual(['a2', 'a3', 'b1', 'b2']));
        const tries = poisonAttempts.filter((t) => t.key === a && t.n === 1);
        expect(tries).toHaveLength(3);
        const lastTry = tries[2].at;
        const handled = (key: string) => poisonHandled.filter((h) => h.key === key);
        // The other partition went on while the poison message was being tried again ...
        for (const h of handled(b)) expect(h.at).toBeLessThan(lastTry);
        expect(handled(b).map((h) => h.n)).toEqual([1, 2]);
        // ... and the messages behind it on its own partition, once it was set aside, in order.
        for (const h of handled(a)) expect(h.at).toBeGreaterThanOrEqual(lastTry);
        expect(handled(a).map((h) => h.n)).toEqual([2, 3]);

        const [dead, ...more] = await readTopic(deadLetterTopic(POISON), 1);
        expect(more).toHaveLength(0);
        const headers = Object.fromEntries(Object.entries(dead.headers ?? {}).map(([k, v]) => [k, String(v)]));
        expect(String(dead.key)).toBe(a);
        expect(JSON.parse(String(dead.value))).toEqual({ key: a, n: 1, poison: true, note: POISON_SECRET });
        expect(headers).toMatchObject({
          [MetadataHeaders.eventId]: eventId,
          [MetadataHeaders.eventType]: 'example.failed',
          [DeadLetterHeaders.originalTopic]: POISON,
          [DeadLetterHeaders.originalPartition]: String(javaPartition(POISON, a)),
          [DeadLetterHeaders.originalOffset]: tries[0].offset,
          [DeadLetterHeaders.consumerGroup]: `${service}-server`,
          [DeadLetterHeaders.errorCode]: 'DEPENDENCY_DOWN',
          [DeadLetterHeaders.attempts]: '3',
        });
        // Counted in the logs, by topic and error code only: never the record's value or the error's message.
        const deadLog = logged.filter((l) => l.meta.deadLetterTopic === deadLetterTopic(POISON));
        expect(deadLog).toHaveLength(1);
        expect(deadLog[0]).toMatchObject({
          level: 'error',
          meta: { topic: POISON, offset: tries[0].offset, errorCode: 'DEPENDENCY_DOWN', attempts: 3, deadLettered: 1 },
        });
        expect(logged.filter((l) => l.level === 'warn' && l.meta.topic === POISON)).toHaveLength(2); // the two failed attempts before the last
        expect(JSON.stringify(logged)).not.toContain('Jane Roe');
        expect(JSON.stringify(logged)).not.toContain('cannot notify');

        // Dry run: says what it would put back, puts nothing back.
        const before = await highWatermarks(POISON);
        const dry = await dlqCommand(brokers, ['replay', '--topic', POISON, '--dry-run']);
        expect(dry).toMatchObject({ code: 0 });
        expect(dry.stdout).toContain(`${POISON} partition ${javaPartition(POISON, a)} offset ${tries[0].offset}`);
        expect(dry.stdout).toContain('1 dead letter would be replayed (dry run)');
        expect(await highWatermarks(POISON)).toEqual(before);

        // The cause is fixed: the replay puts it back on its topic, where the consumer takes it.
        poisonHealed = true;
        const replay = await dlqCommand(brokers, ['replay', '--topic', POISON]);
        expect(replay).toMatchObject({ code: 0 });
        expect(replay.stdout).toContain('1 dead letter replayed');
        await eventually(() => expect(handled(a).map((h) => h.n)).toEqual([2, 3, 1]));
        expect(Number(handled(a)[2].offset)).toBeGreaterThan(Number(tries[0].offset));
        for (const out of [dry.stdout, dry.stderr, replay.stdout, replay.stderr]) expect(out).not.toContain('Jane Roe');

        // Replayed once: a second run finds nothing left.
        const again = await dlqCommand(brokers, ['replay', '--topic', deadLetterTopic(POISON)]);
        expect(again).toMatchObject({ code: 0 });
        expect(again.stdout).toContain('0 dead letters replayed');
      } finally {
        await ms.close();
      }
    });
  });

  describe('request/reply at start', () => {
    it('a send issued right at start (before connect, before its reply topic exists) waits for the reply consumer and gets its answer', async () => {
      const early = busClient(`kafka-spec-early-${RUN}`, { kind: 'kafka', brokers, replyPatterns: [EARLY] });
      try {
        await expect(lastValueFrom(early.send(EARLY, { n: 1 }).pipe(timeout(60_000)))).resolves.toEqual({ n: 1, early: true });
        await expect(lastValueFrom(early.send(EARLY, { n: 2 }).pipe(timeout(30_000)))).resolves.toEqual({ n: 2, early: true });
      } finally {
        await early.close();
      }
    });
  });

  describe('topics', () => {
    it('ensureTopics creates every documented topic with its partitions and retention, and a second run creates nothing', async () => {
      // The documented settings under names of this run (the real names may exist on a shared broker).
      const specs = topicSpecs().map((s) => ({ ...s, topic: DOCUMENTED + s.topic }));
      const names = specs.map((s) => s.topic).sort();
      const first = await ensureTopics({ brokers, topics: specs });
      expect([...first.created].sort()).toEqual(names);
      const admin = kafka.admin();
      await admin.connect();
      try {
        const { topics } = await admin.fetchTopicMetadata({ topics: names });
        const configs = await admin.describeConfigs({
          includeSynonyms: false,
          resources: names.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['retention.ms', 'cleanup.policy'] })),
        });
        for (const s of specs) {
          expect({ topic: s.topic, partitions: topics.find((t) => t.name === s.topic)?.partitions.length }).toEqual({
            topic: s.topic,
            partitions: s.partitions,
          });
          const entries = configs.resources.find((r) => r.resourceName === s.topic)?.configEntries ?? [];
          expect({ topic: s.topic, retention: entries.find((e) => e.configName === 'retention.ms')?.configValue }).toEqual({
            topic: s.topic,
            retention: String(s.retentionMs),
          });
          expect(entries.find((e) => e.configName === 'cleanup.policy')?.configValue).toBe('delete');
        }
      } finally {
        await admin.disconnect();
      }
      const second = await ensureTopics({ brokers, topics: specs });
      expect(second.created).toEqual([]);
      expect([...second.existing].sort()).toEqual(names);
    });
  });
});
