/**
 * The bus on real Kafka (apache/kafka, KRaft, through testcontainers' GenericContainer).
 * Without a reachable Docker engine the suite says so in one line and skips.
 */
import 'reflect-metadata';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Controller, INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, KafkaContext, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { Kafka, logLevel } from 'kafkajs';
import { lastValueFrom } from 'rxjs';
import type { StartedTestContainer } from 'testcontainers';
import { SqliteEventStore } from '../../eventstore/src/sqlite-event-store';
import { SqliteReadStore } from '../../read-store/src/sqlite-read-store';
import { AnyClientProxy, busClient, BusExceptionFilter, IntegrationEventRelay, IntegrationMessage, kafkaServerOptions } from '../src';

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

const DOCKER = dockerEngineReachable();
// Straight to stdout: Jest does not show the console output of a suite whose tests all skip.
if (!DOCKER) process.stdout.write('Kafka transport suite skipped: no Docker engine reachable\n');
const describeKafka = DOCKER ? describe : describe.skip;

const KAFKA_IMAGE = 'apache/kafka:3.9.0';
const START_SCRIPT = '/tmp/testcontainers_start.sh';

async function startKafka(): Promise<{ container: StartedTestContainer; brokers: string[] }> {
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
  // Ready when an admin client can list topics.
  const admin = new Kafka({ clientId: 'kafka-spec-probe', brokers: [broker], logLevel: logLevel.NOTHING }).admin();
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      await admin.connect();
      await admin.listTopics();
      await admin.disconnect();
      break;
    } catch (e) {
      await admin.disconnect().catch(() => undefined);
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
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

const ECHO = 'kafka-spec.command.echo';
const REFUSE = 'kafka-spec.command.refuse';
const EVENTS = 'kafka-spec.events';

interface SeenEvent {
  payload: IntegrationMessage;
  key: string | null;
  headers: Record<string, unknown>;
}

const seen: SeenEvent[] = [];

@Controller()
class KafkaSpecController {
  @MessagePattern(ECHO)
  echo(@Payload() data: { text: string; when: string }) {
    return { echoed: data.text, whenType: typeof data.when };
  }

  @MessagePattern(REFUSE)
  refuse() {
    throw new RpcException({ status: 409, code: 'OUT_OF_ORDER', message: 'sequence 3 expected' });
  }

  @EventPattern(EVENTS)
  onEvent(@Payload() payload: IntegrationMessage, @Ctx() ctx: KafkaContext) {
    const m = ctx.getMessage();
    seen.push({ payload, key: m.key === null || m.key === undefined ? null : String(m.key), headers: m.headers ?? {} });
  }
}

@Module({ controllers: [KafkaSpecController] })
class KafkaSpecModule {}

describeKafka('Kafka transport (testcontainers)', () => {
  jest.setTimeout(180_000);
  let container: StartedTestContainer;
  let brokers: string[];
  let app: INestMicroservice;
  let client: AnyClientProxy;

  beforeAll(async () => {
    ({ container, brokers } = await startKafka());
    const admin = new Kafka({ clientId: 'kafka-spec-admin', brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.createTopics({
      waitForLeaders: true,
      topics: [ECHO, `${ECHO}.reply`, REFUSE, `${REFUSE}.reply`, EVENTS].map((topic) => ({ topic, numPartitions: 3 })),
    });
    await admin.disconnect();

    app = await NestFactory.createMicroservice(KafkaSpecModule, { ...kafkaServerOptions('kafka-spec-service', brokers, { fromBeginning: true }), logger: false });
    app.useGlobalFilters(new BusExceptionFilter());
    await app.listen();
    client = busClient('kafka-spec-caller', { kind: 'kafka', brokers, replyPatterns: [ECHO, REFUSE] });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await container?.stop();
  });

  it('request/reply over Kafka; the payload is JSON (a Date arrives as a string)', async () => {
    await expect(lastValueFrom(client.send(ECHO, { text: 'hello', when: new Date() }))).resolves.toEqual({ echoed: 'hello', whenType: 'string' });
  });

  it('a refusal crosses with status and code intact', async () => {
    await expect(lastValueFrom(client.send(REFUSE, {}))).rejects.toMatchObject({ status: 409, code: 'OUT_OF_ORDER' });
  });

  it('the relay publishes integration events keyed by stream id with metadata in headers', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kafka-relay-'));
    const store = new SqliteEventStore(join(dir, 'events.db'));
    const readStore = new SqliteReadStore(join(dir, 'read.db'));
    const emitter = busClient('kafka-spec-relay', { kind: 'kafka', brokers });
    await emitter.connect();
    const relay = new IntegrationEventRelay({ name: 'kafka-spec-relay', store, readStore, client: emitter, topic: EVENTS, streamPrefixes: ['case-'] });
    try {
      await relay.start();
      const eventId = randomUUID();
      const metadata = {
        eventId,
        correlationId: randomUUID(),
        causationId: null,
        organizationId: 'org-1',
        environmentId: 'env-1',
        actor: 'system',
        recordedAt: new Date().toISOString(),
      };
      const { position } = await store.append('case-k1', [{ type: 'clinical_case.opened', data: { caseId: 'k1' }, metadata }], 'no_stream');
      await relay.waitFor(position, 60_000);
      await eventually(() => expect(seen.find((s) => s.payload.metadata.eventId === eventId)).toBeDefined());
      const got = seen.find((s) => s.payload.metadata.eventId === eventId)!;
      expect(got.payload).toEqual({ type: 'clinical_case.opened', data: { caseId: 'k1' }, metadata, streamId: 'case-k1', position });
      expect(got.key).toBe('case-k1');
      expect(String(got.headers['event-id'])).toBe(eventId);
      expect(String(got.headers['organization-id'])).toBe('org-1');
      expect(await readStore.getCheckpoint('kafka-spec-relay')).toBe(position);
    } finally {
      await relay.stop();
      await emitter.close();
      await store.close();
      await readStore.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
