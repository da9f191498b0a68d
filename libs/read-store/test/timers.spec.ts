import { DevClock } from '@svc/clock';
import { NewEvent, SqliteEventStore } from '@svc/eventstore';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProjectionRunner } from '../src/projection-runner';
import { SqliteReadStore } from '../src/sqlite-read-store';
import { TimerDoc, TimerScheduler, cancelTimer, scheduleTimer } from '../src/timers';
import { ReadStoreLogger } from '../src/types';

const silent: ReadStoreLogger = { warn: () => undefined };

describe('TimerScheduler', () => {
  let dir: string;
  let store: SqliteReadStore;
  let clock: DevClock;
  const schedulers: TimerScheduler[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'timers-'));
    store = new SqliteReadStore(join(dir, 'read.db'));
    clock = new DevClock();
  });
  afterEach(async () => {
    for (const s of schedulers.splice(0)) await s.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function make(handler: (t: TimerDoc) => Promise<void>, extra: Partial<ConstructorParameters<typeof TimerScheduler>[0]> = {}) {
    const s = new TimerScheduler({ readStore: store, clock, collection: 'timers', partition: 'org1:env1', handler, logger: silent, ...extra });
    schedulers.push(s);
    return s;
  }

  async function putTimer(id: string, dueAt: number, payload: Record<string, unknown> = {}, partition = 'org1:env1') {
    await store.write([{ op: 'put', collection: 'timers', key: id, doc: { id, dueAt, ...payload }, partition, score: dueAt }]);
  }

  it('fires a timer only once the clock has passed its due time', async () => {
    const fired: TimerDoc[] = [];
    const s = make(async (t) => void fired.push(t));
    const dueAt = clock.now().getTime() + 60_000;
    await putTimer('t1', dueAt, { kind: 'check-in' });
    await putTimer('other-env', dueAt - 120_000, {}, 'org1:env2');
    await s.tick();
    expect(fired).toEqual([]);
    clock.advance(50);
    await s.tick();
    expect(fired).toEqual([]);
    clock.advance(11);
    await s.tick();
    expect(fired).toEqual([{ id: 't1', dueAt, kind: 'check-in' }]);
  });

  it('fires no handler after stop(): neither a tick nor a store read that was under way when it stopped', async () => {
    const fired: string[] = [];
    const s = make(async (t) => void fired.push(t.id), { pollMs: 3_600_000 });
    await putTimer('t1', clock.now().getTime() - 1);
    await s.stop();
    await s.tick();
    expect(fired).toEqual([]);
    // A scan whose read was under way when stop() came starts nothing either.
    const slow = make(async (t) => void fired.push(t.id), { pollMs: 3_600_000 });
    const range = store.range.bind(store);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    jest.spyOn(store, 'range').mockImplementation(async (...a: Parameters<typeof store.range>) => {
      await gate;
      return range(...a);
    });
    const ticking = slow.tick();
    const stopping = slow.stop();
    release();
    await Promise.all([ticking, stopping]);
    expect(fired).toEqual([]);
    jest.restoreAllMocks();
    // start() again: it fires.
    slow.start();
    await new Promise((r) => setTimeout(r, 50));
    expect(fired).toEqual(['t1']);
  });

  it('fires at once on a clock advance (start/stop), without waiting for the poll', async () => {
    let resolveFired: (t: TimerDoc) => void = () => undefined;
    const firedP = new Promise<TimerDoc>((r) => (resolveFired = r));
    const s = make(async (t) => resolveFired(t), { pollMs: 3_600_000 });
    await putTimer('t1', clock.now().getTime() + 3_600_000);
    s.start();
    await new Promise((r) => setTimeout(r, 30));
    const t0 = Date.now();
    clock.advance(3601);
    const t = await firedP;
    expect(t.id).toBe('t1');
    expect(Date.now() - t0).toBeLessThan(1000);
    await s.stop();
  });

  it('polls every pollMs', async () => {
    const fired: string[] = [];
    const s = make(async (t) => void fired.push(t.id), { pollMs: 20, refireAfterMs: 0 });
    s.start();
    await putTimer('t1', clock.now().getTime() - 1);
    await new Promise((r) => setTimeout(r, 200));
    await s.stop();
    expect(fired.length).toBeGreaterThan(2); // the document stays, so with refireAfterMs 0 it refires
    expect(new Set(fired)).toEqual(new Set(['t1']));
  });

  it('fires again on the next tick when the handler failed, and stops once the doc is gone', async () => {
    let calls = 0;
    const s = make(async () => {
      calls++;
      if (calls === 1) throw new Error('bus down');
    });
    await putTimer('t1', clock.now().getTime() - 1000);
    await s.tick();
    expect(calls).toBe(1);
    await s.tick();
    expect(calls).toBe(2);
    // Succeeded: within refireAfterMs it is not fired again even though the doc is still there.
    await s.tick();
    expect(calls).toBe(2);
    // The resulting event gets projected: the document disappears.
    await store.write([{ op: 'delete', collection: 'timers', key: 't1' }]);
    clock.advance(3600);
    await s.tick();
    expect(calls).toBe(2);
  });

  it('refires a succeeded timer whose document is still there after refireAfterMs', async () => {
    let calls = 0;
    const s = make(async () => void calls++, { refireAfterMs: 5000 });
    await putTimer('t1', clock.now().getTime() - 1);
    await s.tick();
    await s.tick();
    expect(calls).toBe(1);
    clock.advance(6);
    await s.tick();
    expect(calls).toBe(2);
  });

  it('does not fire a timer twice while its handler is in flight', async () => {
    let calls = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let started: () => void = () => undefined;
    const startedP = new Promise<void>((r) => (started = r));
    const s = make(async () => {
      calls++;
      started();
      await gate;
    });
    await putTimer('t1', clock.now().getTime() - 1);
    await putTimer('t2', clock.now().getTime() + 10_000);
    const first = s.tick();
    await startedP;
    expect(s.inFlightCount).toBe(1);
    await s.tick();
    await s.tick();
    clock.advance(1); // onAdvance is not wired without start(); tick by hand
    await s.tick();
    expect(calls).toBe(1);
    release();
    await first;
    expect(s.inFlightCount).toBe(0);
  });

  it('fires due timers in due order, at most batchSize per tick', async () => {
    const fired: string[] = [];
    const s = make(async (t) => void fired.push(t.id), { batchSize: 2 });
    const now = clock.now().getTime();
    await putTimer('late', now - 10);
    await putTimer('early', now - 30);
    await putTimer('mid', now - 20);
    await s.tick();
    expect(fired).toEqual(['early', 'mid']);
  });

  it('started: keeps at most batchSize handlers running and refills as they finish, without waiting for the poll', async () => {
    const fired: string[] = [];
    let running = 0;
    let most = 0;
    const now = clock.now().getTime();
    for (let i = 0; i < 7; i++) await putTimer(`t${i}`, now - 100 + i);
    const s = make(
      async (t) => {
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 10));
        fired.push(t.id);
        running--;
        await store.write([{ op: 'delete', collection: 'timers', key: t.id }]);
      },
      { batchSize: 2, pollMs: 60_000 },
    );
    s.start();
    const deadline = Date.now() + 3000;
    while (fired.length < 7 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(fired).toEqual(['t0', 't1', 't2', 't3', 't4', 't5', 't6']);
    expect(most).toBe(2);
  });

  it('end to end: a projection schedules and completes the timer; the command is idempotent', async () => {
    const events = new SqliteEventStore(join(dir, 'events.db'), { pollIntervalMs: 20 });
    const runner = new ProjectionRunner({ eventStore: events, readStore: store, logger: silent });
    runner.register({
      name: 'reminders',
      streamPrefixes: ['reminder-'],
      apply(event, tx) {
        const id = event.streamId;
        if (event.type === 'ReminderScheduled') {
          scheduleTimer(tx, 'timers', 'org1:env1', { id, dueAt: (event.data as { dueAt: string }).dueAt });
        } else if (event.type === 'ReminderSent') {
          cancelTimer(tx, 'timers', id);
        }
      },
    });
    await runner.start();
    const meta = () => ({
      eventId: randomUUID(),
      correlationId: randomUUID(),
      causationId: null,
      organizationId: 'org1',
      environmentId: 'env1',
      actor: 'system',
      recordedAt: clock.now().toISOString(),
    });
    const e = (type: string, data: unknown): NewEvent => ({ type, data, metadata: meta() });
    const dueAt = new Date(clock.now().getTime() + 3_600_000).toISOString();
    const scheduled = await events.append('reminder-1', [e('ReminderScheduled', { dueAt })], 'no_stream');
    await runner.waitFor(['reminders'], scheduled.position);
    expect(await store.get('timers', 'reminder-1')).toEqual({ id: 'reminder-1', dueAt });

    let sends = 0;
    // The "command": appends ReminderSent unless the stream already has it (idempotent), then waits for the read model.
    const s = make(
      async (timer) => {
        const stream = await events.readStream(timer.id);
        if (stream.some((x) => x.type === 'ReminderSent')) return;
        const r = await events.append(timer.id, [e('ReminderSent', {})], stream.length - 1);
        sends++;
        await runner.waitFor(['reminders'], r.position);
      },
      { refireAfterMs: 0 },
    );
    await s.tick();
    expect(sends).toBe(0);
    clock.advance(3601);
    await s.tick();
    await s.tick();
    expect(sends).toBe(1);
    expect(await store.get('timers', 'reminder-1')).toBeNull();
    await runner.stop();
    await events.close();
  });
});
