import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Controller, Inject, INestApplication, Module, OnModuleInit } from '@nestjs/common';
import { EventPattern } from '@nestjs/microservices';
import { Kafka, logLevel } from 'kafkajs';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { BUS_CLIENT, KafkaBusClient } from '@svc/messaging';
import { connectBus, createHttpApp, loadConfig, PlatformModule, PROJECTIONS } from '@svc/platform';
import { ProjectionRunner } from '@svc/read-store';

/**
 * Start-up order of an app on Kafka (runService, connectBus): its projections are registered and
 * have caught up with the log, and its request/reply client's reply consumer has joined its group,
 * before the app consumes its first message. A message waiting on the topic before the app starts
 * is the first thing it consumes, and it sees all of that done. Against the broker at KAFKA_BROKERS (`npm test` starts one; `npm run kafka:up` by
 * hand): otherwise one line says it skipped, unless KAFKA_REQUIRED=1.
 */
const brokers = (process.env.KAFKA_BROKERS ?? '').trim();
const required = process.env.KAFKA_REQUIRED === '1';

const RUN = randomUUID().slice(0, 8);
const TOPIC = `bus-startup-spec-${RUN}.events`;
const PROBE = `bus-startup-probe-${RUN}`;
const EVENTS = 40;

interface Observation {
  registered: boolean;
  position: number;
  head: number;
  clientReady: boolean;
}
const observations: Observation[] = [];

@Controller()
class ProbeController {
  constructor(
    @Inject(PROJECTIONS) private readonly runner: ProjectionRunner,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(BUS_CLIENT) private readonly client: unknown,
  ) {}

  @EventPattern(TOPIC)
  async on(): Promise<void> {
    const registered = this.runner.projectionNames.includes(PROBE);
    observations.push({
      registered,
      position: registered ? this.runner.position(PROBE) : -1,
      head: await this.store.headPosition(),
      clientReady: this.client instanceof KafkaBusClient && this.client.replyReady,
    });
  }
}

@Module({ controllers: [ProbeController] })
class ProbeModule implements OnModuleInit {
  constructor(
    @Inject(PROJECTIONS) private readonly runner: ProjectionRunner,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  async onModuleInit(): Promise<void> {
    // A log the projection has not seen yet, applied slowly: read models still catching up at start.
    for (let i = 0; i < EVENTS; i++) {
      const metadata = {
        eventId: randomUUID(),
        correlationId: randomUUID(),
        causationId: null,
        organizationId: null,
        environmentId: null,
        actor: 'system',
        recordedAt: new Date().toISOString(),
      };
      await this.store.append(`probe-${RUN}-${i}`, [{ type: 'probe.happened', data: { i }, metadata }], 'no_stream');
    }
    this.runner.register({ name: PROBE, streamPrefixes: [`probe-${RUN}-`], apply: () => new Promise((r) => setTimeout(r, 15)) });
  }
}

(brokers || required ? describe : describe.skip)('start-up order on Kafka', () => {
  jest.setTimeout(120_000);
  let app: INestApplication | undefined;
  let dataDir: string;
  const kafka = () => new Kafka({ clientId: `bus-startup-spec-${RUN}`, brokers: brokers.split(','), logLevel: logLevel.NOTHING });

  beforeAll(() => {
    if (!brokers) throw new Error('KAFKA_REQUIRED=1 but KAFKA_BROKERS is not set (npm run kafka:up prints it)');
    dataDir = mkdtempSync(join(tmpdir(), 'bus-startup-'));
  });

  afterAll(async () => {
    await app?.close();
    if (brokers) {
      const admin = kafka().admin();
      await admin.connect();
      const mine = (await admin.listTopics()).filter((t) => t.startsWith(`bus-startup-spec-${RUN}.`));
      await admin.deleteTopics({ topics: mine }).catch(() => undefined);
      await admin.disconnect();
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('consumes its first message only once its projections caught up and its reply consumer joined', async () => {
    const admin = kafka().admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 1 }], waitForLeaders: true });
    await admin.disconnect();
    const producer = kafka().producer();
    await producer.connect();
    await producer.send({ topic: TOPIC, messages: [{ key: 'k', value: JSON.stringify({ n: 1 }) }] });
    await producer.disconnect();

    const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, BUS: 'kafka', KAFKA_BROKERS: brokers }, 'distributed');
    const service = `bus-startup-spec-${RUN}`;
    // As runService builds an app: the platform's adapters, then the app's module.
    class ProbeRoot {}
    app = await createHttpApp({ module: ProbeRoot, imports: [PlatformModule.forRoot(config, service), ProbeModule] }, config);
    await connectBus(app, service, config);

    const deadline = Date.now() + 60_000;
    while (observations.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(observations).toHaveLength(1);
    const [first] = observations;
    expect(first).toEqual({ registered: true, position: first.head, head: first.head, clientReady: true });
    expect(first.head).toBeGreaterThanOrEqual(EVENTS);
  });
});
