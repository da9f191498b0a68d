import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReadPacket } from '@nestjs/microservices';
import { NewEvent } from '../../eventstore/src/types';
import { SqliteEventStore } from '../../eventstore/src/sqlite-event-store';
import { SqlitePositions } from '../../eventstore/src/sqlite-positions';
import { SqliteReadStore } from '../../read-store/src/sqlite-read-store';
import { BrokerMessage, InProcessBroker, InProcessClient, IntegrationEventRelay, IntegrationMessage, ProcessedEvents, Topics } from '../src';

const TOPIC = Topics.caseEvents;

function event(type: string, data: unknown, organizationId: string | null = 'org-1'): NewEvent {
  return {
    type,
    data,
    metadata: {
      eventId: randomUUID(),
      correlationId: randomUUID(),
      causationId: null,
      organizationId,
      environmentId: organizationId ? 'env-1' : null,
      actor: 'system',
      recordedAt: '2026-01-01T00:00:00.000Z',
    },
  };
}

describe('IntegrationEventRelay on the SQLite event store and read store', () => {
  let dir: string;
  let store: SqliteEventStore;
  let readStore: SqliteReadStore;
  let broker: InProcessBroker;
  let client: InProcessClient;
  let received: BrokerMessage<IntegrationMessage>[];
  const relays: IntegrationEventRelay[] = [];
  const warnings: string[] = [];
  let consoleError: jest.SpiedFunction<typeof console.error>;
  /** What the broker reported of failed subscribers (pattern, error message). */
  let subscriberFailures: { pattern: string; message: string }[];

  function relay(options: Partial<ConstructorParameters<typeof IntegrationEventRelay>[0]> = {}): IntegrationEventRelay {
    const r = new IntegrationEventRelay({
      name: 'case-ledger-relay',
      store,
      readStore,
      client,
      topic: TOPIC,
      streamPrefixes: ['case-'],
      logger: { warn: (m: string) => void warnings.push(m) },
      ...options,
    });
    relays.push(r);
    return r;
  }

  beforeEach(() => {
    consoleError = jest.spyOn(console, 'error');
    dir = mkdtempSync(join(tmpdir(), 'relay-spec-'));
    store = new SqliteEventStore(join(dir, 'events.db'), { pollIntervalMs: 20 });
    readStore = new SqliteReadStore(join(dir, 'read.db'));
    subscriberFailures = [];
    broker = new InProcessBroker({ onError: (error, pattern) => void subscriberFailures.push({ pattern, message: (error as Error).message }) });
    client = new InProcessClient(broker);
    received = [];
    broker.subscribe(TOPIC, (m) => void received.push(m as BrokerMessage<IntegrationMessage>));
  });

  afterEach(async () => {
    for (const r of relays.splice(0)) await r.stop();
    await store.close();
    await readStore.close();
    rmSync(dir, { recursive: true, force: true });
    // The failing subscribers below fail on purpose: their failures are the broker's report to the
    // test, never an error on the console of the run.
    const printed = consoleError.mock.calls.length;
    consoleError.mockRestore();
    expect(printed).toBe(0);
  });

  it('publishes appended events in order as IntegrationMessages keyed by stream id with metadata headers', async () => {
    const r = relay();
    await r.start();
    const e1 = event('clinical_case.opened', { caseId: 'c1', when: '2026-01-01' });
    await store.append('case-c1', [e1], 'no_stream');
    await store.append('case-c2', [event('clinical_case.opened', { caseId: 'c2' })], 'no_stream');
    const { position } = await store.append('case-c1', [event('clinical_case.updated', { n: 1 }), event('clinical_case.updated', { n: 2 })], 0);
    await r.waitFor(position);

    expect(received.map((m) => [m.data.streamId, m.data.type])).toEqual([
      ['case-c1', 'clinical_case.opened'],
      ['case-c2', 'clinical_case.opened'],
      ['case-c1', 'clinical_case.updated'],
      ['case-c1', 'clinical_case.updated'],
    ]);
    const positions = received.map((m) => m.data.position);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    const first = received[0];
    expect(first.data).toEqual({
      type: 'clinical_case.opened',
      data: { caseId: 'c1', when: '2026-01-01' },
      metadata: e1.metadata,
      streamId: 'case-c1',
      position: positions[0],
    });
    expect(first.key).toBe('case-c1');
    expect(first.headers).toMatchObject({
      'event-id': e1.metadata.eventId,
      'event-type': 'clinical_case.opened',
      'correlation-id': e1.metadata.correlationId,
      'organization-id': 'org-1',
      'environment-id': 'env-1',
      actor: 'system',
      'recorded-at': e1.metadata.recordedAt,
      'stream-id': 'case-c1',
      position: String(positions[0]),
    });
    expect(first.headers).not.toHaveProperty('causation-id'); // null metadata is left out
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBe(position);
  });

  it('after a restart continues from the checkpoint without republishing', async () => {
    const r1 = relay();
    await r1.start();
    await store.append('case-a', [event('clinical_case.opened', { i: 1 })], 'no_stream');
    const { position: p1 } = await store.append('case-a', [event('clinical_case.updated', { i: 2 })], 0);
    await r1.waitFor(p1);
    await r1.stop();
    expect(received).toHaveLength(2);

    // Appended while no relay runs.
    await store.append('case-a', [event('clinical_case.updated', { i: 3 })], 1);
    const { position: p2 } = await store.append('case-b', [event('clinical_case.opened', { i: 4 })], 'no_stream');

    const r2 = relay();
    await r2.start();
    await r2.waitFor(p2);
    // Give a wrongly restarted relay the chance to republish before looking.
    await new Promise((r) => setTimeout(r, 100));
    expect(received.map((m) => (m.data.data as { i: number }).i)).toEqual([1, 2, 3, 4]);
    expect(new Set(received.map((m) => m.data.metadata.eventId)).size).toBe(4);
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBe(p2);
  });

  it('with positions next to the event store: starts once from the read-store checkpoint it had, then keeps its position there', async () => {
    // A relay that kept its checkpoint in the read store (before positions moved next to the event store).
    const r1 = relay();
    await r1.start();
    const { position: p1 } = await store.append('case-a', [event('clinical_case.opened', { i: 1 })], 'no_stream');
    await r1.waitFor(p1);
    await r1.stop();
    const positions = new SqlitePositions(join(dir, 'events.db'));
    try {
      const r2 = relay({ positions });
      await r2.start(7);
      const { position: p2 } = await store.append('case-b', [event('clinical_case.opened', { i: 2 })], 'no_stream');
      await r2.waitFor(p2);
      await r2.stop();
      expect(await positions.get('case-ledger-relay')).toBe(p2);
      // The read store loses everything: the relay still starts from its position.
      await readStore.close();
      rmSync(join(dir, 'read.db'));
      readStore = new SqliteReadStore(join(dir, 'read.db'));
      const r3 = relay({ positions });
      await r3.start(8);
      const { position: p3 } = await store.append('case-c', [event('clinical_case.opened', { i: 3 })], 'no_stream');
      await r3.waitFor(p3);
      await new Promise((r) => setTimeout(r, 100));
      expect(received.map((m) => (m.data.data as { i: number }).i)).toEqual([1, 2, 3]);
      // A write with an older token than the stored fence is refused.
      expect(await positions.save('case-ledger-relay', 1, 7)).toBe(false);
      await r3.stop();
    } finally {
      await positions.close();
    }
  });

  it('publishes only the streams of its prefixes and the event types asked for', async () => {
    const r = relay({ streamPrefixes: ['case-', 'referral-'], eventTypes: ['clinical_case.opened', 'referral.sent'] });
    await r.start();
    await store.append('case-1', [event('clinical_case.opened', {}), event('clinical_case.note-added', {})], 'no_stream');
    await store.append('conversation-1', [event('clinical_case.opened', {})], 'no_stream');
    await store.append('referral-1', [event('referral.sent', {}), event('referral.viewed', {})], 'no_stream');
    const { position } = await store.append('other-1', [event('referral.sent', {})], 'no_stream');
    // The last event is not in its streams; wait on the last one that is.
    const last = (await store.readStream('referral-1')).at(-1)!.position;
    await r.waitFor(last);
    await new Promise((res) => setTimeout(res, 100));
    expect(received.map((m) => `${m.data.streamId}/${m.data.type}`)).toEqual(['case-1/clinical_case.opened', 'referral-1/referral.sent']);
    await r.stop();
    // Passed-over events advance the checkpoint too (at the latest on stop).
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBeGreaterThanOrEqual(last);
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBeLessThanOrEqual(position);
  });

  it('overlaps events of different streams, keeps each stream in order, and checkpoints only below an unconfirmed event', async () => {
    const gates = new Map<string, () => void>();
    const started: string[] = [];
    broker.subscribe(TOPIC, (m) => {
      const d = (m.data as IntegrationMessage).data as { tag: string };
      started.push(d.tag);
      if (d.tag === 'a1') return new Promise<void>((res) => gates.set('a1', res));
      return undefined;
    });
    const r = relay();
    await r.start();
    const a1 = await store.append('case-a', [event('clinical_case.opened', { tag: 'a1' })], 'no_stream');
    await store.append('case-a', [event('clinical_case.updated', { tag: 'a2' })], 0);
    const b1 = await store.append('case-b', [event('clinical_case.opened', { tag: 'b1' })], 'no_stream');
    const deadline = Date.now() + 5000;
    while (!started.includes('b1') && Date.now() < deadline) await new Promise((res) => setTimeout(res, 10));
    // b1 went out while a1 is still unconfirmed; a2 waits for a1 (same stream, same bus key).
    expect(started).toEqual(['a1', 'b1']);
    await new Promise((res) => setTimeout(res, 50));
    expect(started).toEqual(['a1', 'b1']);
    expect(r.position).toBeLessThan(a1.position);
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBeLessThan(a1.position);
    gates.get('a1')!();
    await r.waitFor(b1.position);
    expect(started).toEqual(['a1', 'b1', 'a2']);
    await r.stop();
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBe(b1.position);
  });

  it('with maxInFlight 1 publishes strictly one event at a time', async () => {
    let active = 0;
    let most = 0;
    broker.subscribe(TOPIC, async () => {
      most = Math.max(most, ++active);
      await new Promise((res) => setTimeout(res, 5));
      active--;
    });
    const r = relay({ maxInFlight: 1 });
    await r.start();
    let position = 0;
    for (let i = 0; i < 5; i++) ({ position } = await store.append(`case-${i}`, [event('clinical_case.opened', { i })], 'no_stream'));
    await r.waitFor(position);
    expect(most).toBe(1);
    expect(received).toHaveLength(5);
  });

  it('retries a failed emit and never skips the event (at least once)', async () => {
    class FlakyClient extends InProcessClient {
      failures = 2;
      protected override async dispatchEvent<T = any>(packet: ReadPacket): Promise<T> {
        if (this.failures-- > 0) throw new Error('broker unavailable');
        return super.dispatchEvent(packet);
      }
    }
    client = new FlakyClient(broker);
    const r = relay({ retryDelayMs: 10 });
    await r.start();
    await store.append('case-x', [event('clinical_case.opened', { i: 1 })], 'no_stream');
    const { position } = await store.append('case-x', [event('clinical_case.updated', { i: 2 })], 0);
    await r.waitFor(position);
    expect(received.map((m) => (m.data.data as { i: number }).i)).toEqual([1, 2]);
    expect((client as FlakyClient).failures).toBeLessThan(0);
    expect(warnings.some((w) => /failed \(attempt 2\)/.test(w))).toBe(true);
  });

  it('never re-emits an event while its timed-out emit is still running: waits for it to settle, re-emits only if it failed', async () => {
    let running = 0;
    let maxRunning = 0;
    const calls: number[] = [];
    const failFirstOf = new Set([1]);
    broker.subscribe(TOPIC, async (m) => {
      const i = ((m.data as IntegrationMessage).data as { i: number }).i;
      running++;
      maxRunning = Math.max(maxRunning, running);
      calls.push(i);
      await new Promise((res) => setTimeout(res, 200)); // a slow consumer: far past the emit timeout
      running--;
      if (failFirstOf.delete(i)) throw new Error('slow and then failing');
    });
    const r = relay({ emitTimeoutMs: 20, retryDelayMs: 5, maxRetryDelayMs: 10 });
    await r.start();
    // Slow, then fails: emitted again once, after the first emit settled.
    const first = await store.append('case-slow-1', [event('clinical_case.opened', { i: 1 })], 'no_stream');
    await r.waitFor(first.position);
    expect(calls).toEqual([1, 1]);
    // Slow, then succeeds: emitted once.
    const second = await store.append('case-slow-2', [event('clinical_case.opened', { i: 2 })], 'no_stream');
    await r.waitFor(second.position);
    expect(calls).toEqual([1, 1, 2]);
    expect(maxRunning).toBe(1);
    expect(warnings.some((w) => /not confirmed within 20 ms/.test(w))).toBe(true);
    expect(subscriberFailures).toEqual([{ pattern: TOPIC, message: 'slow and then failing' }]);
  });

  it('a consumer that fails gets the event again (never skipped past a failing subscriber)', async () => {
    let failures = 1;
    const seen: number[] = [];
    broker.subscribe(TOPIC, (m) => {
      const i = ((m.data as IntegrationMessage).data as { i: number }).i;
      if (failures-- > 0) throw new Error('consumer down');
      seen.push(i);
    });
    const r = relay({ retryDelayMs: 10 });
    await r.start();
    const { position } = await store.append('case-y', [event('clinical_case.opened', { i: 7 })], 'no_stream');
    await r.waitFor(position);
    expect(seen).toEqual([7]);
    expect(subscriberFailures).toEqual([{ pattern: TOPIC, message: 'consumer down' }]);
    expect(warnings.some((w) => /failed \(attempt 1\): SubscriberFailedError/.test(w))).toBe(true);
  });

  it('stopped while the bus is down: the checkpoint stays, the next run publishes the event', async () => {
    class DownClient extends InProcessClient {
      protected override async dispatchEvent<T = any>(): Promise<T> {
        throw new Error('broker unavailable');
      }
    }
    const working = client;
    client = new DownClient(broker);
    const r1 = relay({ retryDelayMs: 5, maxRetryDelayMs: 10 });
    await r1.start();
    const { position } = await store.append('case-y', [event('clinical_case.opened', { i: 1 })], 'no_stream');
    await new Promise((res) => setTimeout(res, 60));
    await r1.stop();
    expect(received).toHaveLength(0);
    expect(await readStore.getCheckpoint('case-ledger-relay')).toBe(0);

    client = working;
    const r2 = relay();
    await r2.start();
    await r2.waitFor(position);
    expect(received.map((m) => m.data.streamId)).toEqual(['case-y']);
  });
});

describe('ProcessedEvents (consumer-side dedupe) on the SQLite read store', () => {
  let dir: string;
  let readStore: SqliteReadStore;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'dedupe-spec-'));
    readStore = new SqliteReadStore(join(dir, 'read.db'));
  });

  afterEach(async () => {
    await readStore.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('remembers processed event ids per consumer', async () => {
    const processed = new ProcessedEvents(readStore);
    expect(await processed.seen('webhook-dispatcher', 'e-1')).toBe(false);
    await processed.mark('webhook-dispatcher', 'e-1');
    expect(await processed.seen('webhook-dispatcher', 'e-1')).toBe(true);
    expect(await processed.seen('workflow-engine', 'e-1')).toBe(false);
    expect(await readStore.get('processed-events', 'webhook-dispatcher:e-1')).toMatchObject({ consumer: 'webhook-dispatcher', eventId: 'e-1' });
  });

  it('once() runs the effect a single time for redelivered events', async () => {
    const processed = new ProcessedEvents(readStore);
    let effects = 0;
    const run = () => processed.once('c', 'e-9', async () => void effects++);
    expect(await run()).toBe(true);
    expect(await run()).toBe(false);
    expect(effects).toBe(1);
  });

  it('markOp goes into a projection commit atomically with its writes', async () => {
    const processed = new ProcessedEvents(readStore);
    await readStore.commit('consumer-projection', 7, [
      { op: 'put', collection: 'things', key: 'k', doc: { v: 1 } },
      processed.markOp('consumer-projection', 'e-7'),
    ]);
    expect(await processed.seen('consumer-projection', 'e-7')).toBe(true);
  });
});
