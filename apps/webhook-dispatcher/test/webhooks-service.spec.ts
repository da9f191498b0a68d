import { randomUUID } from 'node:crypto';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { DevClock } from '../../../libs/clock/src';
import { InMemoryEventStore } from '../../../libs/eventstore/src/memory-event-store';
import { IntegrationMessage } from '../../../libs/messaging/src';
import { CommandHandler } from '../../../libs/eventstore/src/decider';
import { EndpointDoc } from '../src/adapters/projections/dispatcher.projection';
import { deliveryDecider, deliveryStream } from '../src/domain/delivery';
import { MAX_DIRECT_ATTEMPTS, WebhooksService } from '../src/application/webhooks.service';

process.env.SVC_LOG_LEVEL ??= 'warn'; // the logger is made on first use, in the tests

/** The service on a real in-memory event store and a real receiver; the read side is a stub. */
function service(url: string, store = new InMemoryEventStore(), over: { list?: (collection: string) => Promise<unknown[]>; get?: (collection: string, key: string) => Promise<unknown>; waitFor?: (names: string[], position: number) => Promise<void> } = {}) {
  const endpoint: EndpointDoc = { id: 'ep-1', organizationId: 'org-1', environmentId: 'env-1', url, events: ['clinical_case.opened'], description: null, secret: 'enc', createdAt: new Date().toISOString(), deletedAt: null };
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
  const svc = new WebhooksService(
    store as never,
    new DevClock(),
    { waitFor: over.waitFor ?? (async () => undefined) } as never,
    readStore as never,
    { decrypt: () => 'whsec_test' } as never,
    { production: false } as never,
    { organization: async () => ({ id: 'org-1', baaSignedAt: '2026-01-01T00:00:00.000Z', environments: [{ id: 'env-1' }] }) } as never,
  );
  return { svc, store, reads, endpoint };
}

const opened = (): IntegrationMessage => ({
  type: 'clinical_case.opened',
  data: { caseId: randomUUID() },
  metadata: { eventId: randomUUID(), correlationId: randomUUID(), causationId: null, organizationId: 'org-1', environmentId: 'env-1', actor: 'test', recordedAt: new Date().toISOString() },
  streamId: 'case-ledger-case-x',
  position: 1,
});

describe('WebhooksService direct first attempts and shutdown', () => {
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

  it(`releasing more held deliveries than ${MAX_DIRECT_ATTEMPTS} direct slots: each release waits for a slot and every first attempt is sent directly (none left to the timer worker)`, async () => {
    const store = new InMemoryEventStore();
    const handler = new CommandHandler(store, deliveryDecider, () => new Date());
    const ctx = { actor: 'test', organizationId: 'org-1', environmentId: 'env-1' };
    const n = MAX_DIRECT_ATTEMPTS + 88;
    const ids = Array.from({ length: n }, () => randomUUID());
    for (const id of ids) {
      await handler.handle(deliveryStream(id), { type: 'CreateDelivery', deliveryId: id, endpointId: 'ep-1', organizationId: 'org-1', environmentId: 'env-1', eventId: randomUUID(), eventType: 'clinical_case.opened', caseId: null, payload: '{}', held: true }, ctx);
    }
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

  it('releasing held deliveries: a full page that was all no-ops (released already, the projection behind) waits for the projection instead of re-listing it', async () => {
    const store = new InMemoryEventStore();
    const handler = new CommandHandler(store, deliveryDecider, () => new Date());
    const ctx = { actor: 'test', organizationId: 'org-1', environmentId: 'env-1' };
    const ids = Array.from({ length: 500 }, () => randomUUID());
    let last = 0;
    for (const id of ids) {
      const stream = deliveryStream(id);
      await handler.handle(stream, { type: 'CreateDelivery', deliveryId: id, endpointId: 'ep-1', organizationId: 'org-1', environmentId: 'env-1', eventId: randomUUID(), eventType: 'clinical_case.opened', caseId: null, payload: '{}', held: true }, ctx);
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
