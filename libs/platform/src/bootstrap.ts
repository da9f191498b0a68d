import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Server } from 'node:net';
import { ArgumentsHost, Catch, DynamicModule, ExceptionFilter, INestApplication } from '@nestjs/common';
import { ModuleRef, NestFactory, Reflector } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { BodyProblemGuard, ErrorFilter, RateLimiter, addressRateLimitHook, createValidationPipe, getLogger, lowercaseUuidParams } from '@svc/http';
import { BusExceptionFilter, busServerStrategy } from '@svc/messaging';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { BackgroundWork } from './background';
import { BODY_LIMIT, registerContentTypeGate, registerJsonParser } from './body-parsing';
import { ServiceConfig, loadConfig } from './config';
import { corsHook } from './cors';
import { exitOnCrash } from './crash';
import { answerClientError, answerFrameworkError, registerConnectionAnswers, registerRequestGate } from './edge-answers';
import { proxiedRoute, requestIdFrom, trustedPeer } from './gateway-proxy';
import { IN_PROCESS_BROKER, PROJECTIONS, PlatformModule } from './platform.module';
import { PRIVATE_UMASK } from './private-files';
import { ReadModelState, registerReadModelGate } from './read-model-gate';
import { RunServiceOptions, distributedRoutes } from './route-announcement';
import { recordRoutes } from './served-routes';

/**
 * The HTTP app of every process (standalone and each app of distributed mode): Fastify under Nest
 * with the service's edge (./edge-answers.ts), body parsing (./body-parsing.ts), CORS and rate
 * limits, request logging with metadata only; then the bus and the background work
 * (connectBus), and the listener (listen). runService is a distributed-mode app's main.
 */

export const API_PREFIX = '/api';

/** The app's RateLimiter (PlatformModule); none in an app built without it. */
function rateLimiterOf(app: INestApplication): RateLimiter | undefined {
  try {
    return app.get(RateLimiter, { strict: false });
  } catch {
    return undefined;
  }
}

/** The app's projections (PlatformModule), whose read models the read-model gate watches; none in an app built without them. */
function projectionsOf(app: INestApplication): ReadModelState | undefined {
  try {
    const readStore = app.get<ReadStore>(READ_STORE, { strict: false });
    return readStore.canLoseData ? app.get<ReadModelState>(PROJECTIONS, { strict: false }) : undefined;
  } catch {
    return undefined;
  }
}

/** HTTP errors as `{ code, message }`; bus (RPC) errors as the bus's error payload. */
@Catch()
export class AnyContextFilter implements ExceptionFilter {
  private readonly http = new ErrorFilter();
  private readonly bus = new BusExceptionFilter();

  catch(exception: unknown, host: ArgumentsHost): unknown {
    if (host.getType() === 'rpc') return this.bus.catch(exception, host);
    return this.http.catch(exception, host);
  }
}

/**
 * Builds the HTTP app for a root module: Fastify, the `/api` prefix, the error filter and
 * validation pipe, JSON only, and request logging with metadata only (no URL query, no bodies,
 * no headers).
 */
export async function createHttpApp(rootModule: unknown, config: ServiceConfig): Promise<NestFastifyApplication> {
  const trusted = trustedPeer(config.trustProxy);
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT,
    // A request the gateway forwarded (distributed mode) keeps the gateway's id in the log, when
    // it comes from a proxy this app trusts (SVC_TRUST_PROXY); else a new one.
    genReqId: (req: IncomingMessage) => requestIdFrom(req, trusted) ?? randomUUID(),
    // No Nest middleware is used (guards, pipes and filters do that work), so @fastify/middie,
    // which would otherwise run on every request, is not registered.
    skipMiddie: true,
    logger: false,
    return503OnClosing: false,
    routerOptions: { maxParamLength: 2048 },
    // The client address (`req.ip`, counted by the per-address rate limit) from X-Forwarded-For
    // only when it comes through these proxies (SVC_TRUST_PROXY); else the connection's peer.
    // (A hop count is a Fastify option too; the adapter's copy of Fastify's types leaves numbers out.)
    trustProxy: config.trustProxy as boolean | string[],
    // Fastify's default (0) lifts Node's limit: a client that declared a body and sent part of it
    // held its connection for ever. Checked every second; the late request gets 408 REQUEST_TIMEOUT.
    // Given to Node when the server is created too: set afterwards (as Fastify does with its own
    // option), Node 20 applies it to slow headers but not to a body that stops arriving.
    requestTimeout: config.requestTimeoutMs,
    // requireHostHeader off: Node's own answer to an HTTP/1.1 request without Host is a bare 400
    // (no error body, no security headers); the hook below refuses it in the service's form.
    http: { requestTimeout: config.requestTimeoutMs, connectionsCheckingInterval: 1000, requireHostHeader: false } as never,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError as never, // typed by its ErrorReply (Fastify's generic reply types do not narrow)
  });
  // bodyParser off: the JSON parser below (Fastify's, plus a nesting limit) is the only one.
  const app = await NestFactory.create<NestFastifyApplication>(rootModule as never, adapter, { logger: false, abortOnError: false, bodyParser: false });
  app.setGlobalPrefix(API_PREFIX.slice(1));
  app.useGlobalFilters(new AnyContextFilter());
  app.useGlobalPipes(createValidationPipe());
  // Body problems the parsers recorded are answered here, after the route's own guards and before the pipes.
  app.useGlobalGuards(new BodyProblemGuard(app.get(Reflector), app.get(ModuleRef)));
  app.enableShutdownHooks();

  const fastify = app.getHttpAdapter().getInstance();
  registerConnectionAnswers(fastify);
  registerContentTypeGate(fastify);
  registerRequestGate(fastify);
  // CORS by path (./cors.ts): the widget from its pages' origins, the staff API from the staff
  // app's, API-key routes never. A preflight anywhere else is 404 like any unknown route.
  fastify.addHook('onRequest', corsHook(config.cors));
  // No answer from read models the store lost: 503 while they are checked or rebuilt (./read-model-gate.ts).
  // Only over a store that can lose its content (Redis): SQLite's read models are never lost.
  const projections = projectionsOf(app);
  if (projections) registerReadModelGate(fastify, projections, API_PREFIX, [`${API_PREFIX}/healthz`, `${API_PREFIX}/readyz`]);
  // Rate limit per client address on the widget and check-in routes, before the body is read
  // (libs/http rate-limit.ts); API keys and staff subjects are counted by their guards.
  const limiter = rateLimiterOf(app);
  if (limiter) fastify.addHook('onRequest', addressRateLimitHook(limiter));
  // Uuids are case-insensitive: every uuid path id reaches the guards and handlers in lower case.
  fastify.addHook('preHandler', (req, _reply, done) => {
    lowercaseUuidParams(req.params);
    done();
  });
  registerJsonParser(fastify);
  // Every route the app serves, for the contract test that holds openapi.yaml to them.
  recordRoutes(app, fastify);
  const log = getLogger();
  // The request line is logged at info: below that level (SVC_LOG_LEVEL=warn, say) the hook
  // would only build a record to throw away on every request.
  if (log.isLevelEnabled('info')) {
    fastify.addHook('onResponse', (req, reply, done) => {
      // A request the gateway forwarded (distributed mode) names the owning app's route and the app.
      const proxied = proxiedRoute(req);
      log.info(
        {
          reqId: req.id,
          method: req.method,
          route: proxied?.route ?? req.routeOptions?.url ?? 'unmatched',
          ...(proxied ? { upstream: proxied.app } : {}),
          statusCode: reply.statusCode,
          durationMs: Math.round(reply.elapsedTime * 10) / 10,
        },
        'request',
      );
      done();
    });
  }
  return app;
}

/** Shortest time between two log lines about connections dropped over SVC_MAX_CONNECTIONS. */
const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * Caps the listener's open connections (`SVC_MAX_CONNECTIONS`): past it Node closes a new
 * connection at once, so that a flood of idle or slow connections cannot exhaust the process's
 * file descriptors and memory. Drops are logged, at most once a minute, with their count.
 */
function capConnections(server: Server, maxConnections: number): void {
  server.maxConnections = maxConnections;
  let dropped = 0;
  let lastLog = -Infinity;
  server.on('drop', () => {
    dropped++;
    const now = performance.now();
    if (now - lastLog < DROP_LOG_INTERVAL_MS) return;
    lastLog = now;
    getLogger().warn({ dropped, maxConnections }, 'connections dropped: SVC_MAX_CONNECTIONS reached');
    dropped = 0;
  });
}

/** Listens on `HOST:PORT` (HOST defaults by the dev tools, docs/decisions.md, "Deployment safety"), open connections capped. */
export async function listen(app: INestApplication, config: ServiceConfig): Promise<string> {
  capConnections(app.getHttpServer() as Server, config.maxConnections);
  await app.listen(config.port, config.host);
  const address = app.getHttpServer().address() as { port: number };
  return `http://localhost:${address.port}/api`;
}

/**
 * Connects the app's message handlers to the bus (in-process broker or Kafka) and starts the app
 * in this order (docs/decisions.md, "Kafka consumers: offsets, concurrency, dead letters"):
 * 1. the app is initialised: every module registers its projections, the projections start and
 *    catch up with the log, and the bus client is connected with its reply consumer joined
 *    (PlatformModule's BUS_CLIENT and PlatformLifecycle);
 * 2. the bus handlers start consuming;
 * 3. the relays and timers start (BackgroundWork): on the in-process bus an event published
 *    before its subscribers are there would reach nobody.
 * So no message is handled before the read models it feeds and the replies it may wait for exist.
 */
export async function connectBus(app: INestApplication, serviceName: string, config: ServiceConfig): Promise<void> {
  const broker = app.get(IN_PROCESS_BROKER);
  const log = getLogger();
  // Failed attempts and dead letters of the Kafka consumer: topic, partition, offset, error code, counts; never a record's value.
  const logger = {
    info: (meta: object, msg: string) => log.info(meta, msg),
    warn: (meta: object, msg: string) => log.warn(meta, msg),
    error: (meta: object, msg: string) => log.error(meta, msg),
  };
  // The bus handlers inherit the app's global filter, which answers RPC contexts the bus way
  // (status/code of a domain refusal kept; anything unexpected hidden).
  app.connectMicroservice(busServerStrategy(serviceName, { kind: config.bus, broker, brokers: config.kafkaBrokers, consumer: { logger } }) as never, {
    inheritAppConfig: true,
  });
  await app.init();
  await app.startAllMicroservices();
  // An app without the platform (a test's bare module) has no background work.
  let background: BackgroundWork | null = null;
  try {
    background = app.get(BackgroundWork, { strict: false });
  } catch {
    background = null;
  }
  await background?.start();
}

/** Distributed mode: one app in its own process (`node dist/apps/<app>/main.js`). */
export async function runService(
  serviceName: string,
  modules: (DynamicModule | (new (...args: never[]) => unknown))[],
  options: RunServiceOptions = {},
): Promise<void> {
  // Before anything is written: whatever is created without a mode of its own is owner-only (docs/decisions.md, "Deployment safety").
  process.umask(PRIVATE_UMASK);
  process.env.SVC_SERVICE_NAME ??= serviceName;
  exitOnCrash();
  const config = loadConfig(process.env, 'distributed');
  try {
    class ServiceRoot {}
    const root: DynamicModule = { module: ServiceRoot, imports: [PlatformModule.forRoot(config, serviceName), ...(modules as DynamicModule[])] };
    const app = await createHttpApp(root, config);
    const announce = await distributedRoutes(app, serviceName, config, options);
    await connectBus(app, serviceName, config);
    const baseUrl = await listen(app, config);
    await announce();
    process.stdout.write(`${serviceName} listening at ${baseUrl}\n`);
  } catch (err) {
    process.stderr.write(`${serviceName} failed to start: ${(err as Error).name}: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
