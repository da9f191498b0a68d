import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandHandler, Decider, DomainError, EventStore, SqliteEventStore, WrongExpectedRevisionError } from '@svc/eventstore';
import { deciderSpec } from '../src/testing';

// A tiny counter aggregate: increments up to a limit, idempotent by request id.
type CounterCommand = { type: 'Increment'; by: number; requestId: string } | { type: 'Spend'; by: number; requestId: string } | { type: 'Touch' };
type CounterEvent = { type: 'Incremented'; by: number; requestId: string; at: string };
type CounterState = { value: number; requests: string[] };

const LIMIT = 1000;

const counter: Decider<CounterCommand, CounterEvent, CounterState> = {
  initialState: () => ({ value: 0, requests: [] }),
  evolve: (state, event) => {
    switch (event.type) {
      case 'Incremented':
        return { value: state.value + event.by, requests: [...state.requests, event.requestId] };
      default: {
        const never: never = event.type;
        return never;
      }
    }
  },
  decide: (command, state, now) => {
    switch (command.type) {
      case 'Increment':
        if (state.requests.includes(command.requestId)) return [];
        if (state.value + command.by > LIMIT) throw new DomainError(409, 'LIMIT_REACHED', 'counter limit reached');
        return [{ type: 'Incremented', by: command.by, requestId: command.requestId, at: now.toISOString() }];
      case 'Spend':
        if (state.value < command.by) throw new DomainError(409, 'INSUFFICIENT', 'not enough');
        return [{ type: 'Incremented', by: -command.by, requestId: command.requestId, at: now.toISOString() }];
      case 'Touch':
        return [];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

describe('deciderSpec (counter)', () => {
  const at = '2026-01-01T00:00:00.000Z';
  it('given no events, Increment emits Incremented with the clock time', () => {
    deciderSpec(counter)
      .given([])
      .when({ type: 'Increment', by: 2, requestId: 'r1' }, new Date(at))
      .then([{ type: 'Incremented', by: 2, requestId: 'r1', at }]);
  });
  it('a repeated request id decides nothing', () => {
    deciderSpec(counter)
      .given([{ type: 'Incremented', by: 2, requestId: 'r1', at }])
      .when({ type: 'Increment', by: 2, requestId: 'r1' })
      .then([]);
  });
  it('going over the limit is a domain error', () => {
    deciderSpec(counter)
      .given([{ type: 'Incremented', by: LIMIT, requestId: 'r1', at }])
      .when({ type: 'Increment', by: 1, requestId: 'r2' })
      .thenThrows('LIMIT_REACHED');
  });
});

describe('CommandHandler over SQLite', () => {
  let dir: string;
  let store: EventStore;
  const clock = () => new Date('2026-02-03T04:05:06.000Z');
  const ctx = { actor: 'staff:u1', organizationId: 'org_1', environmentId: 'env_1', correlationId: 'corr-1' };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'eventstore-handler-'));
    store = new SqliteEventStore(join(dir, 'events.db'));
  });

  it('handleAll decides several commands on one stream in one append, each on the state left by the earlier ones', async () => {
    const handler = new CommandHandler(store, counter, clock);
    await handler.handle('counter-all', { type: 'Increment', by: 1, requestId: 'r0' }, ctx);
    const results = await handler.handleAll('counter-all', [
      { command: { type: 'Increment', by: 10, requestId: 'r1' }, ctx },
      { command: { type: 'Increment', by: 10, requestId: 'r1' }, ctx }, // same request: nothing
      { command: { type: 'Increment', by: LIMIT, requestId: 'r2' }, ctx }, // over the limit: its error alone
      { command: { type: 'Increment', by: 5, requestId: 'r3' }, ctx: { ...ctx, correlationId: 'corr-3' } },
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, true, false, true]);
    expect(results[2]).toMatchObject({ ok: false, error: { code: 'LIMIT_REACHED' } });
    const events = await store.readStream('counter-all');
    expect(events.map((e) => (e.data as { by: number }).by)).toEqual([1, 10, 5]);
    expect(events[2].metadata).toMatchObject({ correlationId: 'corr-3', actor: 'staff:u1', recordedAt: '2026-02-03T04:05:06.000Z' });
    const last = results[3];
    expect(last.ok && last.result.position).toBe(events[2].position);
    expect(results[1].ok && results[1].result.position).toBe(0);
    expect(last.ok && last.result.state.value).toBe(16);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('appends with no_stream first, then with the revision it read, with full metadata', async () => {
    const handler = new CommandHandler(store, counter, clock);
    const append = jest.spyOn(store, 'append');
    const r1 = await handler.handle('counter-1', { type: 'Increment', by: 1, requestId: 'a' }, ctx);
    const r2 = await handler.handle('counter-1', { type: 'Increment', by: 5, requestId: 'b' }, ctx);
    expect(append.mock.calls.map((c) => c[2])).toEqual(['no_stream', 0]);
    expect(r1).toMatchObject({ revision: 0, state: { value: 1 } });
    expect(r2).toMatchObject({ revision: 1, state: { value: 6 }, newEvents: [{ type: 'Incremented', by: 5 }] });
    expect(r2.position).toBeGreaterThan(r1.position);

    const events = await store.readStream('counter-1');
    expect(events.map((e) => e.data)).toEqual([
      { by: 1, requestId: 'a', at: '2026-02-03T04:05:06.000Z' },
      { by: 5, requestId: 'b', at: '2026-02-03T04:05:06.000Z' },
    ]);
    expect(events[1].metadata).toMatchObject({
      correlationId: 'corr-1',
      causationId: null,
      organizationId: 'org_1',
      environmentId: 'env_1',
      actor: 'staff:u1',
      recordedAt: '2026-02-03T04:05:06.000Z',
    });
    expect(events[0].metadata.eventId).not.toBe(events[1].metadata.eventId);
    expect((await handler.load('counter-1')).state.value).toBe(6);
  });

  it('runs the commands of one stream one after another: 200 at once all land in order, none retried, even with maxRetries 0', async () => {
    const handler = new CommandHandler(store, counter, clock, { maxRetries: 0 });
    const append = jest.spyOn(store, 'append');
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => handler.handle('counter-2', { type: 'Increment', by: 1, requestId: `r${i}` }, ctx)),
    );
    expect(results.map((r) => r.revision)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(append).toHaveBeenCalledTimes(200);
    const { state, revision } = await handler.load('counter-2');
    expect(revision).toBe(199);
    expect(state.value).toBe(200);
  });

  it('a refused command does not stop the ones queued behind it; handleAll takes its turn like handle', async () => {
    const handler = new CommandHandler(store, counter, clock, { maxRetries: 0 });
    const settled = await Promise.allSettled([
      handler.handle('counter-7', { type: 'Increment', by: LIMIT - 1, requestId: 'a' }, ctx),
      handler.handle('counter-7', { type: 'Increment', by: 5, requestId: 'over' }, ctx),
      handler.handleAll('counter-7', [{ command: { type: 'Increment', by: 1, requestId: 'b' }, ctx }]),
      handler.handle('counter-7', { type: 'Increment', by: 1, requestId: 'c' }, ctx),
    ]);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'LIMIT_REACHED' });
    expect((settled[3] as PromiseRejectedResult).reason).toMatchObject({ code: 'LIMIT_REACHED' });
    expect((await handler.load('counter-7')).state.value).toBe(LIMIT);
  });

  it('exclusive: commands given while the work runs wait for it; its own commands run in its turn; a failure releases the turn', async () => {
    const handler = new CommandHandler(store, counter, clock, { rememberStates: 10 });
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const work = handler.exclusive('counter-x', async (turn) => {
      order.push(`loaded ${(await turn.load()).state.value}`);
      await gate; // e.g. a call to another context before recording
      const r = await turn.handle({ type: 'Increment', by: 10, requestId: 'in-turn' }, ctx);
      order.push(`work ${r.state.value}`);
      return r.state.value;
    });
    const later = handler.handle('counter-x', { type: 'Increment', by: 1, requestId: 'later' }, ctx).then((r) => order.push(`later ${r.state.value}`));
    const other = handler.handle('counter-y', { type: 'Increment', by: 1, requestId: 'y' }, ctx).then(() => order.push('other stream'));
    await other;
    release();
    expect(await work).toBe(10);
    await later;
    expect(order).toEqual(['loaded 0', 'other stream', 'work 10', 'later 11']);
    await expect(handler.exclusive('counter-x', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect((await handler.handle('counter-x', { type: 'Increment', by: 1, requestId: 'after' }, ctx)).state.value).toBe(12);
  });

  it('other streams do not wait for a stream whose append is slow', async () => {
    const handler = new CommandHandler(store, counter, clock);
    const realAppend = store.append.bind(store);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    jest.spyOn(store, 'append').mockImplementation(async (streamId, events, expected) => {
      if (streamId === 'slow') await gate;
      return realAppend(streamId, events, expected);
    });
    const slow = handler.handle('slow', { type: 'Increment', by: 1, requestId: 's' }, ctx);
    const slowNext = handler.handle('slow', { type: 'Increment', by: 1, requestId: 's2' }, ctx);
    const fast = await handler.handle('fast', { type: 'Increment', by: 1, requestId: 'f' }, ctx);
    expect(fast.revision).toBe(0);
    expect(await store.readStream('slow')).toEqual([]);
    release();
    expect((await slow).revision).toBe(0);
    expect((await slowNext).revision).toBe(1);
  });

  describe('rememberStates', () => {
    it('starts each command from the state the last one left: the stream is read once for 20 commands', async () => {
      const handler = new CommandHandler(store, counter, clock, { maxRetries: 0, rememberStates: 10 });
      const read = jest.spyOn(store, 'readStream');
      for (let i = 0; i < 20; i++) await handler.handle('m-1', { type: 'Increment', by: 1, requestId: `r${i}` }, ctx);
      expect(read).toHaveBeenCalledTimes(1);
      expect((await handler.load('m-1')).state.value).toBe(20);
    });

    it('a stream another writer moved is read again when the append is refused, and the command lands', async () => {
      const handler = new CommandHandler(store, counter, clock, { maxRetries: 1, rememberStates: 10 });
      const other = new CommandHandler(store, counter, clock);
      await handler.handle('m-2', { type: 'Increment', by: 1, requestId: 'a' }, ctx);
      await other.handle('m-2', { type: 'Increment', by: 1, requestId: 'b' }, ctx);
      const r = await handler.handle('m-2', { type: 'Increment', by: 1, requestId: 'c' }, ctx);
      expect(r).toMatchObject({ revision: 2, state: { value: 3 } });
    });

    it('a refusal or an empty decision on a remembered state is decided again on the stream as read', async () => {
      const handler = new CommandHandler(store, counter, clock, { maxRetries: 0, rememberStates: 10 });
      const other = new CommandHandler(store, counter, clock);
      await handler.handle('m-3', { type: 'Increment', by: 1, requestId: 'a' }, ctx);
      await other.handle('m-3', { type: 'Increment', by: 5, requestId: 'b' }, ctx); // unseen: remembered value is 1, the stream's 6
      const spent = await handler.handle('m-3', { type: 'Spend', by: 4, requestId: 's' }, ctx);
      expect(spent).toMatchObject({ revision: 2, state: { value: 2 } });
      await other.handle('m-3', { type: 'Increment', by: 7, requestId: 'c' }, ctx);
      const touched = await handler.handle('m-3', { type: 'Touch' }, ctx);
      expect(touched).toMatchObject({ newEvents: [], revision: 3, state: { value: 9 } });
      // A refusal that holds on the stream as read is still a refusal, and nothing is written.
      await expect(handler.handle('m-3', { type: 'Spend', by: 100, requestId: 'big' }, ctx)).rejects.toMatchObject({ code: 'INSUFFICIENT' });
      expect(await store.readStream('m-3')).toHaveLength(4);
    });

    it('keeps at most the given number of streams, the least recently used going first', async () => {
      const handler = new CommandHandler(store, counter, clock, { rememberStates: 2 });
      for (const s of ['x', 'y', 'z']) await handler.handle(`m-${s}`, { type: 'Increment', by: 1, requestId: 'a' }, ctx);
      const read = jest.spyOn(store, 'readStream');
      await handler.handle('m-z', { type: 'Increment', by: 1, requestId: 'b' }, ctx);
      await handler.handle('m-y', { type: 'Increment', by: 1, requestId: 'b' }, ctx);
      expect(read).not.toHaveBeenCalled();
      await handler.handle('m-x', { type: 'Increment', by: 1, requestId: 'b' }, ctx);
      expect(read).toHaveBeenCalledTimes(1);
    });
  });

  it('retries conflicts with writers it does not see: two handlers, 15 increments each at once, all land', async () => {
    const one = new CommandHandler(store, counter, clock, { maxRetries: 50 });
    const two = new CommandHandler(store, counter, clock, { maxRetries: 50 });
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 ? one : two).handle('counter-9', { type: 'Increment', by: 1, requestId: `r${i}` }, ctx)),
    );
    expect(new Set(results.map((r) => r.revision)).size).toBe(30);
    const { state, revision } = await one.load('counter-9');
    expect(revision).toBe(29);
    expect(state.value).toBe(30);
  });

  it('gives up with WrongExpectedRevisionError after maxRetries (a writer it does not see moved the stream)', async () => {
    const other = new CommandHandler(store, counter, clock);
    await other.handle('counter-3', { type: 'Increment', by: 1, requestId: 'first' }, ctx);
    const handler = new CommandHandler(store, counter, clock, { maxRetries: 0 });
    const stale = { state: counter.initialState(), revision: -1 };
    const err = await handler.handle('counter-3', { type: 'Increment', by: 1, requestId: 'r' }, ctx, stale).catch((e) => e);
    expect(err).toBeInstanceOf(WrongExpectedRevisionError);
    expect(await store.readStream('counter-3')).toHaveLength(1);
    // With one retry it re-reads and lands.
    const retrying = new CommandHandler(store, counter, clock, { maxRetries: 1 });
    expect((await retrying.handle('counter-3', { type: 'Increment', by: 1, requestId: 'r' }, ctx, stale)).revision).toBe(1);
  });

  it('propagates domain errors and writes nothing', async () => {
    const handler = new CommandHandler(store, counter, clock);
    await handler.handle('counter-4', { type: 'Increment', by: LIMIT, requestId: 'a' }, ctx);
    const err = await handler.handle('counter-4', { type: 'Increment', by: 1, requestId: 'b' }, ctx).catch((e) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ status: 409, code: 'LIMIT_REACHED' });
    expect(await store.readStream('counter-4')).toHaveLength(1);
  });

  it('does not append when decide returns []', async () => {
    const handler = new CommandHandler(store, counter, clock);
    await handler.handle('counter-5', { type: 'Increment', by: 1, requestId: 'a' }, ctx);
    const append = jest.spyOn(store, 'append');
    const again = await handler.handle('counter-5', { type: 'Increment', by: 1, requestId: 'a' }, ctx);
    const touch = await handler.handle('counter-6', { type: 'Touch' }, ctx);
    expect(append).not.toHaveBeenCalled();
    expect(again).toMatchObject({ newEvents: [], position: 0, revision: 0, state: { value: 1 } });
    expect(touch).toMatchObject({ newEvents: [], position: 0, revision: -1 });
    expect(await store.readStream('counter-6')).toEqual([]);
  });
});
