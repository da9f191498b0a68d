import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DynamicModule, Global, Inject, Injectable, Module, OnApplicationBootstrap, OnApplicationShutdown, OnModuleDestroy } from '@nestjs/common';
import { CLOCK, Clock, DevClock, SystemClock, SystemWallClock, WALL_CLOCK } from '@svc/clock';
import { ChainCheckpointer, EVENT_STORE, EventStore, Leases } from '@svc/eventstore';
import { MFA_MAX_AGE_S, StaffGuard, ApiKeyGuard, TenantDirectory, WidgetSessionGuard, WidgetSessions, getLogger } from '@svc/http';
import { MemoryTokenBuckets, RATE_LIMIT_SETTINGS, RateLimiter, ReadStoreTokenBuckets, TOKEN_BUCKETS, TokenBuckets } from '@svc/http';
import { READ_STORE, ProjectionRunner, ReadStore, RedisReadStore, SqliteReadStore } from '@svc/read-store';
import {
  DEV_ISSUER,
  DevIdentityProvider,
  KEYRING,
  Keyring,
  STAFF_AUDIENCE,
  STAFF_TOKEN_VERIFIER,
  StaffIssuer,
  StaffTokenVerifier,
  remoteIssuer,
} from '@svc/security';
import { BUS_CLIENT, BUS_PING, BusPing, InProcessBroker, Patterns, busClient, busClientReady, busPing, ensureTopics } from '@svc/messaging';
import { BackgroundWork } from './background';
import { LEASES, RELAY_POSITIONS, openCoordination } from './leases';
import { DEV_CLOCK_SYNC, DevClockSync } from './dev-clock-sync';
import { CONFIG, ServiceConfig } from './config';
import { chainCheckpointer, openRawEventStore, serviceEventStore } from './event-store';
import { MAILER, Mailer, OutboxMailer, SmtpMailer, smtpCertificateUnchecked } from './mailer';
import { OperationsController } from './operations.controller';
import { Readiness } from './readiness';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, ensurePrivateFile, tightenDataDir } from './private-files';

export const PROJECTIONS = Symbol('PROJECTIONS');
export const DEV_IDP = Symbol('DEV_IDP');
/** The event store adapter without decorators (events as stored), beneath EVENT_STORE. */
export const RAW_EVENT_STORE = Symbol('RAW_EVENT_STORE');
/** This process's writer of the global log's checkpoints (docs/audit.md). */
export const CHAIN_CHECKPOINTER = Symbol('CHAIN_CHECKPOINTER');
/** The in-process broker of this app instance (standalone: shared by its six modules). */
export const IN_PROCESS_BROKER = Symbol('IN_PROCESS_BROKER');
const COORDINATION = Symbol('COORDINATION');

/**
 * The data dir owner-only (decisions 16): created 0700, an existing one's looser modes tightened,
 * and the SQLite files created 0600 before SQLite opens them (it would create them 0644; their
 * -wal and -shm files follow the database file's mode).
 */
function prepareDataDir(config: ServiceConfig): void {
  mkdirSync(config.dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // A folder another user owns (a mounted volume's root) or a shared one cannot be changed: reported, not fatal.
  const failed = tightenDataDir(config.dataDir);
  if (failed.length)
    getLogger().warn(
      { dataDir: config.dataDir, paths: failed.slice(0, 20), count: failed.length },
      'data dir: could not remove group and other permissions (another owner, or a shared folder)',
    );
  if (config.eventStore === 'sqlite') ensurePrivateFile(join(config.dataDir, 'events.sqlite'));
  if (config.readStore === 'sqlite') ensurePrivateFile(join(config.dataDir, 'read-models.sqlite'));
}

function masterKey(config: ServiceConfig): Buffer {
  if (config.masterKey) return Buffer.from(config.masterKey, 'base64');
  if (config.production) throw new Error('SVC_MASTER_KEY is required in production mode');
  // Standalone: a generated key beside the data. It keeps data unreadable to anyone who gets the
  // database files alone; production takes the key from a secret store (SVC_MASTER_KEY).
  // Distributed mode on one machine shares the data dir between the apps (scripts/start-distributed.js):
  // created whole or not at all, and the first app's key is every app's.
  const file = join(config.dataDir, 'master.key');
  if (!existsSync(file)) createOnce(file, randomBytes(32).toString('base64'));
  return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
}

/**
 * Writes `content` to `file` unless the file exists, atomically: written whole to a file of this
 * process, then linked under its name (which fails when another process linked its own first).
 */
function createOnce(file: string, content: string): void {
  const tmp = `${file}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, content, { mode: PRIVATE_FILE_MODE });
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
}

/** Longest wait at start for the Kafka client's reply consumer to join its group. */
const KAFKA_CLIENT_START_WAIT_MS = 60_000;

/**
 * Creates the Kafka topics that are missing, with their documented settings (deploy/topics.md),
 * before the app's clients connect and its consumers subscribe. A topic whose partition count
 * differs from the documented one is left as it is and logged.
 */
async function ensureKafkaTopics(config: ServiceConfig, serviceName: string): Promise<void> {
  const result = await ensureTopics({ brokers: config.kafkaBrokers, clientId: `${serviceName}-topics` });
  if (result.created.length) getLogger().info({ created: result.created }, 'Kafka topics created');
  for (const m of result.mismatched)
    getLogger().warn(
      { topic: m.topic, partitions: m.partitions, documented: m.expected },
      'Kafka topic has another partition count than documented; left as it is',
    );
}

/**
 * Starts the projections once every module has registered its own, and waits until they caught up
 * (the bus handlers, relays and timers start after that, in connectBus); stops stores last.
 */
@Injectable()
export class PlatformLifecycle implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown {
  constructor(
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    private readonly background: BackgroundWork,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly bus: { close(): unknown },
    @Inject(BUS_PING) private readonly busPing: BusPing,
    @Inject(DEV_CLOCK_SYNC) private readonly devClockSync: DevClockSync | null,
    @Inject(CHAIN_CHECKPOINTER) private readonly checkpointer: ChainCheckpointer,
    @Inject(LEASES) private readonly leases: Leases,
    @Inject(RELAY_POSITIONS) private readonly positions: { close(): Promise<void> } | null,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.projections.start();
    // Serve nothing before the read models have caught up with the log (a first start on an
    // existing log, or read models lost: a new read-store file, a Redis that kept nothing).
    await this.projections.caughtUp(await this.store.headPosition());
    // The relays and timers start later, once the bus handlers consume (connectBus).
    this.checkpointer.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.checkpointer.stop();
    await this.background.stop();
  }

  async onApplicationShutdown(): Promise<void> {
    this.devClockSync?.close();
    await this.projections.stop();
    // Every job has stopped: the leases are released, so another replica takes them at once.
    await this.leases.close();
    await this.positions?.close();
    await this.bus.close();
    await this.busPing.close?.();
    await this.store.close();
    await this.readStore.close();
  }
}

/**
 * The embedded or distributed adapters behind every port, chosen per variable (decisions 1).
 * Global: each app module injects the ports by their tokens.
 */
@Global()
@Module({})
export class PlatformModule {
  static forRoot(config: ServiceConfig, serviceName = 'standalone'): DynamicModule {
    prepareDataDir(config);
    const keyring = new Keyring(masterKey(config));
    // Distributed mode: the dev clock every app shares lives in the read store (./dev-clock-sync.ts);
    // standalone keeps its offset in the data dir.
    const sharedDevClock = config.devTools && serviceName !== 'standalone';
    const clock: Clock = config.devTools ? new DevClock(sharedDevClock ? undefined : join(config.dataDir, 'clock.json')) : new SystemClock();
    return {
      module: PlatformModule,
      // GET /healthz and /readyz in every app (decisions 13).
      controllers: [OperationsController],
      providers: [
        { provide: CONFIG, useValue: config },
        { provide: CLOCK, useValue: clock },
        // Real time for signature timestamps only (receivers compare them with their own clocks).
        { provide: WALL_CLOCK, useValue: new SystemWallClock() },
        { provide: KEYRING, useValue: keyring },
        {
          provide: RAW_EVENT_STORE,
          useFactory: async (): Promise<EventStore> => {
            const logger = { warn: (message: string, meta: Record<string, unknown>) => getLogger().warn(meta, message) };
            // PostgreSQL connects, creates or migrates its schema, and listens before the app starts;
            // closed with the app (PlatformLifecycle, through EVENT_STORE).
            return openRawEventStore(config, { logger });
          },
        },
        {
          provide: EVENT_STORE,
          inject: [RAW_EVENT_STORE],
          // Encryption at rest over the hash chain over the adapter (docs/audit.md).
          useFactory: (raw: EventStore): EventStore => serviceEventStore(raw, keyring),
        },
        {
          provide: CHAIN_CHECKPOINTER,
          inject: [RAW_EVENT_STORE],
          // Started once the read models caught up, stopped before the stores close (PlatformLifecycle).
          useFactory: (raw: EventStore) =>
            chainCheckpointer(raw, config.chainCheckpoints, () => clock.now(), {
              warn: (message: string, meta: Record<string, unknown>) => getLogger().warn(meta, message),
            }),
        },
        {
          provide: READ_STORE,
          useFactory: (): ReadStore =>
            config.readStore === 'redis'
              ? new RedisReadStore(config.redisUrl, config.redisKeyPrefix)
              : new SqliteReadStore(join(config.dataDir, 'read-models.sqlite')),
        },
        {
          provide: DEV_CLOCK_SYNC,
          inject: [READ_STORE],
          // Resolved before anything starts: an app's timers and handlers read the shared time from the first tick.
          useFactory: (readStore: ReadStore) => (sharedDevClock ? DevClockSync.open(clock as DevClock, readStore, serviceName) : null),
        },
        {
          provide: COORDINATION,
          // After the event store: its schema (PostgreSQL) or file (SQLite) holds the tables.
          inject: [RAW_EVENT_STORE],
          useFactory: () => openCoordination(config),
        },
        { provide: LEASES, inject: [COORDINATION], useFactory: (c: ReturnType<typeof openCoordination>) => c.leases },
        { provide: RELAY_POSITIONS, inject: [COORDINATION], useFactory: (c: ReturnType<typeof openCoordination>) => c.positions },
        {
          provide: PROJECTIONS,
          inject: [EVENT_STORE, READ_STORE, LEASES],
          // Standalone runs every projection itself; each distributed app's replicas share them by lease (docs/scaling.md).
          useFactory: (store: EventStore, readStore: ReadStore, leases: Leases) =>
            new ProjectionRunner({ eventStore: store, readStore, logger: getLogger(), ...(serviceName === 'standalone' ? {} : { leases }) }),
        },
        {
          provide: MAILER,
          useFactory: (): Mailer => {
            if (config.mail !== 'smtp') return new OutboxMailer(join(config.dataDir, 'outbox'), config.mailFrom);
            // Encrypted still, but a server in the middle would not be noticed: said once at start.
            if (config.production && smtpCertificateUnchecked(config.smtpUrl))
              getLogger().warn({}, "SMTP_URL turns the check of the mail server's certificate off (tls.rejectUnauthorized=false)");
            return new SmtpMailer(config.smtpUrl, config.mailFrom, { requireTls: config.production });
          },
        },
        {
          provide: DEV_IDP,
          useFactory: async () => (config.devTools ? DevIdentityProvider.load(join(config.dataDir, 'dev-idp.json')) : null),
        },
        {
          provide: STAFF_TOKEN_VERIFIER,
          inject: [DEV_IDP],
          useFactory: (dev: DevIdentityProvider | null) => {
            const issuers: StaffIssuer[] = [];
            if (config.staffOidc) issuers.push(remoteIssuer(config.staffOidc.issuer, config.staffOidc.jwksUrl, config.staffOidc.audience));
            // The dev issuer only stands in for a real one (decisions 3: the configured issuers "or,
            // in standalone, the dev issuer"): beside a real issuer, anyone could mint a dev token
            // for a real staff member's `sub` (membership is keyed by `sub`).
            if (dev && !config.staffOidc) issuers.push({ issuer: DEV_ISSUER, audience: STAFF_AUDIENCE, key: dev.publicKey });
            // Allowed (an API-only deployment needs no staff sign-in), but said once: every staff endpoint is then 401.
            if (issuers.length === 0)
              getLogger().warn({}, 'no staff ID-token issuer: set STAFF_OIDC_ISSUER; every staff endpoint answers 401 STAFF_AUTH_REQUIRED');
            return new StaffTokenVerifier(issuers, () => clock.now());
          },
        },
        { provide: MFA_MAX_AGE_S, useValue: config.mfaMaxAgeS },
        { provide: RATE_LIMIT_SETTINGS, useValue: config.rateLimits },
        {
          provide: TOKEN_BUCKETS,
          inject: [READ_STORE],
          // Rate-limit buckets: in the read store where other processes may share it (Redis; a SQLite
          // file in distributed mode), one round trip per counted request; in memory in standalone,
          // the only process on its SQLite read store (no I/O per request).
          useFactory: (readStore: ReadStore): TokenBuckets =>
            readStore.takeToken && (config.readStore === 'redis' || serviceName !== 'standalone')
              ? new ReadStoreTokenBuckets(readStore as ReadStore & Required<Pick<ReadStore, 'takeToken'>>)
              : new MemoryTokenBuckets(),
        },
        RateLimiter,
        {
          provide: IN_PROCESS_BROKER,
          // Subscriber failures: pattern and error name only (the payload may hold PHI).
          useFactory: () =>
            new InProcessBroker({
              onError: (error, pattern) =>
                getLogger().warn({ pattern, error: (error as Error)?.name ?? 'error' }, 'bus subscriber failed; the publisher retries'),
            }),
        },
        {
          provide: BUS_CLIENT,
          inject: [IN_PROCESS_BROKER],
          useFactory: async (broker: InProcessBroker) => {
            if (config.bus === 'kafka') await ensureKafkaTopics(config, serviceName);
            const client = busClient(serviceName, { kind: config.bus, broker, brokers: config.kafkaBrokers, replyPatterns: Object.values(Patterns) });
            // Kafka: a request needs the reply consumer joined (its reply partition goes in the
            // request); the app serves and consumes nothing before. busClientReady connects, and
            // tries again until the bound (start fails past it).
            if (config.bus === 'kafka') await busClientReady(client, Object.values(Patterns), KAFKA_CLIENT_START_WAIT_MS);
            else await client.connect();
            return client;
          },
        },
        {
          provide: BUS_PING,
          inject: [IN_PROCESS_BROKER],
          // Kafka: an admin connection of its own (closed with the app); in-process: the broker.
          useFactory: (broker: InProcessBroker): BusPing => busPing(serviceName, { kind: config.bus, broker, brokers: config.kafkaBrokers }),
        },
        Readiness,
        TenantDirectory,
        StaffGuard,
        ApiKeyGuard,
        WidgetSessions,
        WidgetSessionGuard,
        BackgroundWork,
        PlatformLifecycle,
      ],
      exports: [
        IN_PROCESS_BROKER,
        BUS_CLIENT,
        CONFIG,
        CLOCK,
        DEV_CLOCK_SYNC,
        WALL_CLOCK,
        KEYRING,
        EVENT_STORE,
        READ_STORE,
        PROJECTIONS,
        MAILER,
        DEV_IDP,
        STAFF_TOKEN_VERIFIER,
        MFA_MAX_AGE_S,
        LEASES,
        RELAY_POSITIONS,
        TenantDirectory,
        StaffGuard,
        ApiKeyGuard,
        RateLimiter,
        WidgetSessions,
        WidgetSessionGuard,
        BackgroundWork,
      ],
    };
  }
}
