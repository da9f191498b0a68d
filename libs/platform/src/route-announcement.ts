import { hostname } from 'node:os';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { CLOCK, DevClock } from '@svc/clock';
import { getLogger } from '@svc/http';
import { READ_STORE, ReadStore } from '@svc/read-store';
import { BODY_LIMIT } from './body-parsing';
import type { ServiceConfig } from './config';
import { DEV_CLOCK_PUSH_PATH } from './dev-clock-sync';
import { GATEWAY_CATCH_ALL, GatewayProxy } from './gateway-proxy';
import { routesOf } from './served-routes';
import { announceUpstream } from './upstreams';

/**
 * How often each replica of distributed mode announces itself again: the gateway's heartbeat (a
 * replica silent for 10 s is tried last, ./replica-pool.ts), and a read store that lost the
 * announcements gets them back.
 */
export const ANNOUNCE_EVERY_MS = 2_000;

/**
 * Distributed mode's wiring of one app (docs/decisions.md, "Distributed topology"): the gateway
 * forwards what it does not serve itself (./gateway-proxy.ts); every replica of every app announces
 * its routes, instance id and internal address once it listens, and again every 2 s
 * (./upstreams.ts); with the dev tools on, every app but the
 * gateway takes the shared dev clock's offset on an internal route (./dev-clock-sync.ts).
 */
export async function distributedRoutes(
  app: NestFastifyApplication,
  serviceName: string,
  config: ServiceConfig,
  options: RunServiceOptions,
): Promise<() => Promise<void>> {
  const fastify = app.getHttpAdapter().getInstance();
  const readStore = app.get<ReadStore>(READ_STORE);
  let proxy: GatewayProxy | undefined;
  if (options.gatewayProxy) {
    const gateway = new GatewayProxy({ readStore, self: serviceName, timeoutMs: config.upstreamTimeoutMs, bodyLimit: BODY_LIMIT });
    await gateway.start();
    gateway.register(fastify as never);
    fastify.addHook('onClose', async () => gateway.close());
    proxy = gateway;
  }
  const clock = app.get(CLOCK);
  if (config.devTools && clock instanceof DevClock && !options.gatewayProxy) {
    fastify.put(DEV_CLOCK_PUSH_PATH, async (req, reply) => {
      const offsetMs = (req.body as { offsetMs?: unknown } | undefined)?.offsetMs;
      if (typeof offsetMs !== 'number' || !Number.isSafeInteger(offsetMs) || offsetMs < 0) {
        return reply.code(400).send({
          code: 'VALIDATION_FAILED',
          message: 'The request is not valid',
          details: [{ path: 'offsetMs', message: 'a whole number of milliseconds >= 0' }],
        });
      }
      clock.follow(offsetMs);
      return { now: clock.now().toISOString() };
    });
  }
  let timer: NodeJS.Timeout | undefined;
  fastify.addHook('onClose', async () => clearInterval(timer));
  return async () => {
    const port = (app.getHttpServer().address() as { port: number }).port;
    const host = config.host === '0.0.0.0' || config.host === '::' ? hostname() : config.host.includes(':') ? `[${config.host}]` : config.host;
    proxy?.setOwnRoutes(routesOf(app));
    // The gateway's catch-all is not a route of the contract.
    const routes = routesOf(app).filter((r) => !(proxy && r.url === GATEWAY_CATCH_ALL));
    // SVC_INSTANCE_ID (the start script's `case-ledger-2`, a pod's name); else host and port, unique per listener.
    const instance = process.env.SVC_INSTANCE_ID || `${hostname()}:${port}`;
    const announce = () =>
      announceUpstream(readStore, {
        app: serviceName,
        instance,
        origin: config.internalUrl ?? `http://${host}:${port}`,
        routes,
        announcedAt: new Date().toISOString(),
      });
    await announce();
    timer = setInterval(() => {
      announce().catch((err) => getLogger().warn({ error: (err as Error)?.name }, 'routes not announced; retrying'));
    }, ANNOUNCE_EVERY_MS);
    timer.unref();
  };
}

export interface RunServiceOptions {
  /** The gateway: forwards every route it does not serve to the app that announced it. */
  gatewayProxy?: boolean;
}
