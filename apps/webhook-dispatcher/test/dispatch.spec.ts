import { randomUUID } from 'node:crypto';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { DevClock, SystemWallClock } from '../../../libs/clock/src';
import { InMemoryEventStore } from '../../../libs/eventstore/src/memory-event-store';
import { IntegrationMessage } from '../../../libs/messaging/src';
import { CommandHandler } from '../../../libs/eventstore/src/decider';
import { EndpointDoc } from '../src/read-model/dispatcher.projection';
import { deliveryDecider, deliveryStream } from '../src/domain/delivery';
import { AttemptRunner } from '../src/application/attempt-runner';
import { AttemptSlots, MAX_DIRECT_ATTEMPTS } from '../src/application/attempt-slots';
import { DeliveryCommands } from '../src/application/delivery-commands';
import { DispatchService, RELEASE_SLOT_WAIT_MS } from '../src/application/dispatch.service';
import { DispatcherLifecycle } from '../src/application/dispatcher-lifecycle';
import { RetryWorker } from '../src/application/retry-worker';
import { WebhookSender } from '../src/adapters/outbound/webhook-sender';

process.env.SVC_LOG_LEVEL ??= 'warn'; // the logger is made on first use, in the tests

/** The dispatcher's application parts, wired as the module wires them, on a real in-memory event store and a real receiver; the read side is a stub. */
function service(
  url: string,
  store = new InMemoryEventStore(),
  over: {
    list?: (collection: string) => Promise<unknown[]>;
    get?: (collection: string, key: string) => Promise<unknown>;
    waitFor?: (names: string[], position: number) => Promise<void>;
  } = {},
) {
  const endpoint: EndpointDoc = {
    id: 'ep-1',
    organizationId: 'org-1',
    environmentId: 'env-1',
    url,
    events: ['clinical_case.opened'],
    description: null,
    secret: 'enc',
    createdAt: new Date().toISOString(),
    deletedAt: null,
  };
  const reads = { range: 0 };
  const readStore = {
    list: async (collection: string) => (over.list ? over.list(collection) : collection === 'webhooks.endpoints' ? [endpoint] : []),
    get: async (collection: string, key: string) => (over.get ? over.get(collection, key) : null),
    write: async () => undefined,
    range: async () => {
      reads.range++;
      return [];
    },
  };
  const clock = new DevClock();
  const deliveries = new DeliveryCommands(store as never, clock);
  const slots = new AttemptSlots();
  const attempts = new AttemptRunner(
    deliveries,
    clock,
    readStore as never,
    { decrypt: () => 'whsec_test' } as never,
    { production: false } as never,
    new SystemWallClock(),
    new WebhookSender(),
  );
  const worker = new RetryWorker(deliveries, clock, readStore as never, slots, attempts);
  const dispatch = new DispatchService(
    deliveries,
    { waitFor: over.waitFor ?? (async () => undefined) } as never,
    readStore as never,
    { organization: async () => ({ id: 'org-1', baaSignedAt: '2026-01-01T00:00:00.000Z', environments: [{ id: 'env-1' }] }) } as never,
    slots,
    attempts,
    worker,
  );
  const lifecycle = new DispatcherLifecycle(slots, worker, attempts);
  const svc = {
    dispatch: (m: IntegrationMessage) => dispatch.dispatch(m),
    onBaaSigned: (organizationId: string, baaSignedAt: string | null) => dispatch.onBaaSigned(organizationId, baaSignedAt),
    kick: () => worker.kick(),
    onModuleDestroy: () => lifecycle.onModuleDestroy(),
    get directSlotsInUse() {
      return slots.inUse;
    },
    slots,
  };
  return { svc, store, reads, endpoint };
}

const opened = (): IntegrationMessage => ({
  type: 'clinical_case.opened',
  data: { caseId: randomUUID() },
  metadata: {
    eventId: randomUUID(),
    correlationId: randomUUID(),
    causationId: null,
    organizationId: 'org-1',
    environmentId: 'env-1',
    actor: 'test',
    recordedAt: new Date().toISOString(),
  },
  streamId: 'case-ledger-case-x',
  position: 1,
});

describe('webhook dispatch: direct first attempts and shutdown', () => {
  let server: Server;
  let url: string;
  let received = 0;
  const held: (() => void)[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      received++;
      req.resume();
      held.push(() => res.writeHead(200).end());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const answerAll = () => {
    for (const a of held.splice(0)) a();
  };

  it(`reserves direct slots before the lease append: at most ${MAX_DIRECT_ATTEMPTS} leased first attempts from concurrent dispatches`, async () => {
    const { svc, store } = service(url);
    const n = MAX_DIRECT_ATTEMPTS + 44;
    await Promise.all(Array.from({ length: n }, () => svc.dispatch(opened())));
    expect(svc.directSlotsInUse).toBe(MAX_DIRECT_ATTEMPTS);
    const started = (await store.readAll(0, 100_000)).filter((e) => e.type === 'WebhookAttemptStarted');
    expect(started).toHaveLength(MAX_DIRECT_ATTEMPTS);
    const stopping = svc.onModuleDestroy();
    const t = setInterval(answerAll, 20);
    await stopping;
    clearInterval(t);
    expect(svc.directSlotsInUse).toBe(0);
  }, 30_000);

  it('after shutdown began: kick fires nothing and dispatch refuses (the relay redelivers after a restart)', async () => {
    const { svc, reads } = service(url);
    await svc.onModuleDestroy();
    const before = received;
    svc.kick();
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 20));
    expect(reads.range).toBe(0);
    await expect(svc.dispatch(opened())).rejects.toThrow(/stopping/);
    expect(received).toBe(before);
  });

  /** Held deliveries of org-1 to ep-1, written straight into the store. */
  const heldDeliveries = async (store: InMemoryEventStore, n: number) => {
    const handler = new CommandHandler(store, deliveryDecider, () => new Date());
    const ctx = { actor: 'test', organizationId: 'org-1', environmentId: 'env-1' };
    const ids = Array.from({ length: n }, () => randomUUID());
    for (const id of ids) {
      await handler.handle(
        deliveryStream(id),
        {
          type: 'CreateDelivery',
          deliveryId: id,
          endpointId: 'ep-1',
          organizationId: 'org-1',
          environmentId: 'env-1',
          eventId: randomUUID(),
          eventType: 'clinical_case.opened',
          caseId: null,
          payload: '{}',
          held: true,
        },
        ctx,
      );
    }
    return ids;
  };
  it(`releasing more held deliveries than ${MAX_DIRECT_ATTEMPTS} direct slots: each release waits for a slot and every first attempt is sent directly (none left to the timer worker)`, async () => {
    const store = new InMemoryEventStore();
    const n = MAX_DIRECT_ATTEMPTS + 88;
    const ids = await heldDeliveries(store, n);
    let page = 0;
    const made = service(url, store, {
      list: async (collection) => (collection !== 'webhooks.held' ? [] : ids.slice(500 * page, 500 * ++page).map((id) => ({ id }))),
      get: async (collection) => (collection === 'webhooks.endpoints' ? made.endpoint : null),
    });
    const { svc } = made;
    const before = received;
    const releasing = svc.onBaaSigned('org-1', '2026-01-01T00:00:00.000Z');
    // Every slot taken by attempts the receiver has not answered: the rest of the releases wait.
    for (let i = 0; i < 200 && svc.directSlotsInUse < MAX_DIRECT_ATTEMPTS; i++) await new Promise((r) => setTimeout(r, 10));
    expect(svc.directSlotsInUse).toBe(MAX_DIRECT_ATTEMPTS);
    const t = setInterval(answerAll, 20);
    await releasing;
    for (let i = 0; i < 500 && received - before < n; i++) await new Promise((r) => setTimeout(r, 10));
    clearInterval(t);
    answerAll();
    expect(received - before).toBe(n);
    const events = await store.readAll(0, 100_000);
    // Each release carries its first attempt's lease in the same append (no lease-less release).
    const released = events.filter((e) => e.type === 'WebhookDeliveryReleased');
    const leased = new Set(events.filter((e) => e.type === 'WebhookAttemptStarted').map((e) => e.streamId));
    expect(released).toHaveLength(n);
    expect(leased.size).toBe(n);
    await svc.onModuleDestroy();
    expect(svc.directSlotsInUse).toBe(0);
  }, 30_000);

  /** Slots taken by other traffic (a burst to another endpoint, say), given back with the function returned. */
  const occupy = (svc: { slots: AttemptSlots }, n: number) => {
    for (let i = 0; i < n; i++) svc.slots.take();
    return () => {
      for (let i = 0; i < n; i++) svc.slots.giveBack();
    };
  };

  it('an endpoint deleted while releases wait for a direct slot gets nothing more (the release re-reads it after the wait)', async () => {
    const store = new InMemoryEventStore();
    const ids = await heldDeliveries(store, 500);
    let listed = false;
    let deletedAt: string | null = null;
    const made = service(url, store, {
      list: async (collection) => (collection === 'webhooks.held' && !listed ? ((listed = true), ids.map((id) => ({ id }))) : []),
      get: async (collection) => (collection === 'webhooks.endpoints' ? { ...made.endpoint, deletedAt } : null),
    });
    const { svc } = made;
    const before = received;
    const giveBack = occupy(svc, MAX_DIRECT_ATTEMPTS - 100);
    const releasing = svc.onBaaSigned('org-1', '2026-01-01T00:00:00.000Z');
    for (let i = 0; i < 300 && svc.directSlotsInUse < MAX_DIRECT_ATTEMPTS; i++) await new Promise((r) => setTimeout(r, 10));
    expect(svc.directSlotsInUse).toBe(MAX_DIRECT_ATTEMPTS);
    // The customer deletes the endpoint while 400 releases wait; then the other traffic ends.
    deletedAt = new Date().toISOString();
    giveBack();
    const t = setInterval(answerAll, 10);
    await releasing;
    // The 100 that had their lease before the deletion read the endpoint again just before
    // sending: each is either sent (read before the deletion) and recorded, or
    // not sent and abandoned. None of the 400 that waited is sent.
    const ended = async () => (await store.readAll(0, 100_000)).filter((e) => e.type === 'WebhookAttemptRecorded' || e.type === 'WebhookDeliveryAbandoned');
    for (let i = 0; i < 300 && (await ended()).length < 100; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 200));
    clearInterval(t);
    answerAll();
    const events = await store.readAll(0, 100_000);
    const recorded = events.filter((e) => e.type === 'WebhookAttemptRecorded').length;
    expect(received - before).toBe(recorded);
    expect(recorded + events.filter((e) => e.type === 'WebhookDeliveryAbandoned').length).toBe(100);
    expect(events.filter((e) => e.type === 'WebhookDeliveryReleased')).toHaveLength(500);
    expect(events.filter((e) => e.type === 'WebhookAttemptStarted')).toHaveLength(100);
    await svc.onModuleDestroy();
  }, 30_000);

  it('a release whose endpoint cannot be read again after its wait gives its slot back (the release fails; shutdown is not held up)', async () => {
    const store = new InMemoryEventStore();
    const ids = await heldDeliveries(store, 3);
    let listed = false;
    let reads = 0;
    const made = service(url, store, {
      list: async (collection) => (collection === 'webhooks.held' && !listed ? ((listed = true), ids.map((id) => ({ id }))) : []),
      get: async (collection) => {
        if (collection !== 'webhooks.endpoints') return null;
        if (++reads > 1) throw new Error('read store unavailable');
        return made.endpoint;
      },
    });
    const { svc } = made;
    const giveBack = occupy(svc, MAX_DIRECT_ATTEMPTS);
    const releasing = svc.onBaaSigned('org-1', '2026-01-01T00:00:00.000Z');
    const outcome = expect(releasing).rejects.toThrow(/unavailable/);
    await new Promise((r) => setTimeout(r, 50));
    giveBack(); // the waiting releases get slots, then fail to read the endpoint again
    await outcome;
    await new Promise((r) => setTimeout(r, 50));
    expect(svc.directSlotsInUse).toBe(0);
    const t = setInterval(answerAll, 10);
    await svc.onModuleDestroy();
    clearInterval(t);
    expect(svc.directSlotsInUse).toBe(0);
  }, 30_000);

  it(`a release waits for direct slots ${RELEASE_SLOT_WAIT_MS} ms in all, then releases the rest without a lease (the timer worker sends them)`, async () => {
    const store = new InMemoryEventStore();
    const ids = await heldDeliveries(store, 10);
    let listed = false;
    const made = service(url, store, {
      list: async (collection) => (collection === 'webhooks.held' && !listed ? ((listed = true), ids.map((id) => ({ id }))) : []),
      get: async (collection) => (collection === 'webhooks.endpoints' ? made.endpoint : null),
    });
    const { svc } = made;
    const giveBack = occupy(svc, MAX_DIRECT_ATTEMPTS);
    const t0 = performance.now();
    await svc.onBaaSigned('org-1', '2026-01-01T00:00:00.000Z');
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(RELEASE_SLOT_WAIT_MS - 50);
    expect(took).toBeLessThan(RELEASE_SLOT_WAIT_MS + 3000);
    const events = await store.readAll(0, 100_000);
    expect(events.filter((e) => e.type === 'WebhookDeliveryReleased')).toHaveLength(10);
    expect(events.filter((e) => e.type === 'WebhookAttemptStarted')).toHaveLength(0);
    giveBack();
    expect(svc.directSlotsInUse).toBe(0);
    await svc.onModuleDestroy();
  }, 30_000);

  it('releasing held deliveries: a full page that was all no-ops (released already, the projection behind) waits for the projection instead of re-listing it', async () => {
    const store = new InMemoryEventStore();
    const handler = new CommandHandler(store, deliveryDecider, () => new Date());
    const ctx = { actor: 'test', organizationId: 'org-1', environmentId: 'env-1' };
    const ids = Array.from({ length: 500 }, () => randomUUID());
    let last = 0;
    for (const id of ids) {
      const stream = deliveryStream(id);
      await handler.handle(
        stream,
        {
          type: 'CreateDelivery',
          deliveryId: id,
          endpointId: 'ep-1',
          organizationId: 'org-1',
          environmentId: 'env-1',
          eventId: randomUUID(),
          eventType: 'clinical_case.opened',
          caseId: null,
          payload: '{}',
          held: true,
        },
        ctx,
      );
      last = (await handler.handle(stream, { type: 'ReleaseDelivery' }, ctx)).position;
    }
    // The projection has not applied the releases: the held list still has the whole page until it has.
    let applied = 0;
    let listed = 0;
    const { svc } = service(url, store, {
      list: async (collection) => {
        if (collection !== 'webhooks.held') return [];
        if (++listed > 5) throw new Error('re-listing the same page');
        return applied >= last ? [] : ids.map((id) => ({ id }));
      },
      waitFor: async (_names, position) => void (applied = Math.max(applied, position)),
    });
    await svc.onBaaSigned('org-1', '2026-01-01T00:00:00.000Z');
    expect(listed).toBe(2);
    expect(applied).toBe(last);
    await svc.onModuleDestroy();
  });
});
