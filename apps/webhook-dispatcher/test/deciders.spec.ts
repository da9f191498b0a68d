// Over 400 lines: given/when/then cases of every webhook-dispatcher decider.
import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { accountDecider, AccountEvent } from '../src/domain/account';
import { ATTEMPT_LEASE_MS, deliveryDecider, DeliveryEvent, MAX_ATTEMPTS, RETRY_DELAYS_MS } from '../src/domain/delivery';
import { endpointDecider } from '../src/domain/endpoint';
import { periodStartOf, usageDecider, UsageEvent } from '../src/domain/usage';
import { isBlockedAddress, urlSyntaxProblem, addressProblem } from '@svc/security';
import { stableUuid } from '../src/application/ids';
import { drawJitter } from '../src/application/attempt-runner';

const now = new Date('2026-03-10T12:00:00.000Z');
const created: DeliveryEvent = {
  type: 'WebhookDeliveryCreated',
  deliveryId: 'd1',
  endpointId: 'e1',
  organizationId: 'o1',
  environmentId: 'env1',
  eventId: 'ev1',
  eventType: 'clinical_case.opened',
  caseId: 'c1',
  payload: '{}',
  status: 'pending',
  nextAttemptAt: now.toISOString(),
  createdAt: now.toISOString(),
};
const attempt = (statusCode: number | null, at = now.toISOString()) => ({ at, statusCode, durationMs: 3, error: statusCode === 200 ? null : 'x' });

/** StartAttempt (the lease) then RecordAttempt: the events of one attempt, the lease's first. */
function attemptAt(given: DeliveryEvent[], dueAt: string, statusCode: number | null, jitter = 0, leaseId = `l-${given.length}`): DeliveryEvent[] {
  const started = deciderSpec(deliveryDecider).given(given).when({ type: 'StartAttempt', dueAt, leaseId }, now).result();
  expect(started.map((e) => e.type)).toEqual(['WebhookAttemptStarted']);
  return [
    ...started,
    ...deciderSpec(deliveryDecider)
      .given([...given, ...started])
      .when({ type: 'RecordAttempt', leaseId, attempt: attempt(statusCode, dueAt), jitter }, now)
      .result(),
  ];
}
const recorded = (events: DeliveryEvent[]) =>
  events.find((e) => e.type === 'WebhookAttemptRecorded') as Extract<DeliveryEvent, { type: 'WebhookAttemptRecorded' }>;

describe('delivery decider', () => {
  it('creates once (first writer wins), held without a due time', () => {
    deciderSpec(deliveryDecider)
      .given([created])
      .when(
        {
          type: 'CreateDelivery',
          deliveryId: 'd1',
          endpointId: 'e1',
          organizationId: 'o1',
          environmentId: 'env1',
          eventId: 'ev1',
          eventType: 'clinical_case.opened',
          caseId: 'c1',
          payload: '{}',
          held: false,
        },
        now,
      )
      .then([]);
    const [e] = deciderSpec(deliveryDecider)
      .given([])
      .when(
        {
          type: 'CreateDelivery',
          deliveryId: 'd1',
          endpointId: 'e1',
          organizationId: 'o1',
          environmentId: 'env1',
          eventId: 'ev1',
          eventType: 'clinical_case.opened',
          caseId: 'c1',
          payload: '{}',
          held: true,
        },
        now,
      )
      .result();
    expect(e).toMatchObject({ status: 'held', nextAttemptAt: null });
  });

  it("a creation or release with a leaseId takes the first attempt's lease in the same append (its creator or releaser sends it); never for a held one or a second creator", () => {
    const cmd = {
      type: 'CreateDelivery' as const,
      deliveryId: 'd1',
      endpointId: 'e1',
      organizationId: 'o1',
      environmentId: 'env1',
      eventId: 'ev1',
      eventType: 'clinical_case.opened',
      caseId: 'c1',
      payload: '{}',
      held: false,
      leaseId: 'L1',
    };
    const out = deciderSpec(deliveryDecider).given([]).when(cmd, now).result();
    expect(out.map((e) => e.type)).toEqual(['WebhookDeliveryCreated', 'WebhookAttemptStarted']);
    expect(out[1]).toMatchObject({ leaseId: 'L1', dueAt: now.toISOString(), leaseUntil: new Date(now.getTime() + ATTEMPT_LEASE_MS).toISOString() });
    // A second creator (redelivered event) appends nothing, so it sends nothing; the timer's sender finds the lease taken.
    deciderSpec(deliveryDecider)
      .given(out)
      .when({ ...cmd, leaseId: 'L2' }, now)
      .then([]);
    deciderSpec(deliveryDecider).given(out).when({ type: 'StartAttempt', dueAt: now.toISOString(), leaseId: 'L3' }, now).then([]);
    // The attempt is recorded under that lease.
    const rec = deciderSpec(deliveryDecider)
      .given(out)
      .when({ type: 'RecordAttempt', leaseId: 'L1', attempt: attempt(200), jitter: 0 }, now)
      .result();
    expect(rec[0]).toMatchObject({ type: 'WebhookAttemptRecorded', leaseId: 'L1', status: 'delivered' });
    // Held: no lease; released with one.
    const held = deciderSpec(deliveryDecider)
      .given([])
      .when({ ...cmd, held: true }, now)
      .result();
    expect(held.map((e) => e.type)).toEqual(['WebhookDeliveryCreated']);
    const released = deciderSpec(deliveryDecider).given(held).when({ type: 'ReleaseDelivery', leaseId: 'R1' }, now).result();
    expect(released.map((e) => e.type)).toEqual(['WebhookDeliveryReleased', 'WebhookAttemptStarted']);
    expect(released[1]).toMatchObject({ leaseId: 'R1', dueAt: now.toISOString() });
    deciderSpec(deliveryDecider)
      .given([...held, ...released])
      .when({ type: 'ReleaseDelivery', leaseId: 'R2' }, now)
      .then([]);
  });

  it('schedules retries 5 s, 5 min, ... with up to 20% jitter, then fails after 8 attempts', () => {
    for (const jitter of [0, 0.5, 0.999999]) {
      let events: DeliveryEvent[] = [created];
      let due = now.toISOString();
      for (let n = 1; n <= MAX_ATTEMPTS; n++) {
        const out = attemptAt(events, due, 500, jitter);
        const rec = recorded(out);
        if (n < MAX_ATTEMPTS) {
          expect(rec.status).toBe('pending');
          const pause = Date.parse(rec.nextAttemptAt!) - Date.parse(due);
          expect(pause).toBe(Math.round(RETRY_DELAYS_MS[n - 1] * (1 + 0.2 * jitter)));
          expect(pause).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[n - 1]);
          expect(pause).toBeLessThanOrEqual(RETRY_DELAYS_MS[n - 1] * 1.2);
          due = rec.nextAttemptAt!;
        } else {
          expect(rec).toMatchObject({ status: 'failed', nextAttemptAt: null });
        }
        events = [...events, ...out];
      }
    }
  });

  it('the service draws its jitter within [0, 1), so every pause is within [base, 1.2 x base]', () => {
    const draws = Array.from({ length: 20_000 }, () => drawJitter());
    expect(draws.every((j) => j >= 0 && j < 1)).toBe(true);
    expect(new Set(draws).size).toBeGreaterThan(19_000); // random, not a constant
    expect(Math.min(...draws)).toBeLessThan(0.01);
    expect(Math.max(...draws)).toBeGreaterThan(0.99);
    for (const jitter of draws.slice(0, 200)) {
      const pause = Date.parse(recorded(attemptAt([created], created.nextAttemptAt!, 503, jitter)).nextAttemptAt!) - now.getTime();
      expect(pause).toBeGreaterThanOrEqual(RETRY_DELAYS_MS[0]);
      expect(pause).toBeLessThanOrEqual(RETRY_DELAYS_MS[0] * 1.2);
    }
  });

  it('retries other 4xx on the schedule (only 410 stops)', () => {
    for (const code of [400, 401, 403, 404, 409, 422, 429]) {
      const rec = recorded(attemptAt([created], created.nextAttemptAt!, code));
      expect([code, rec.status, Date.parse(rec.nextAttemptAt!) - now.getTime()]).toEqual([code, 'pending', RETRY_DELAYS_MS[0]]);
    }
  });

  it('stops on 410, emits webhook.delivered on the first 2xx of an opened case only', () => {
    expect(recorded(attemptAt([created], created.nextAttemptAt!, 410))).toMatchObject({ status: 'failed' });
    const ok = attemptAt([created], created.nextAttemptAt!, 200);
    expect(ok.map((e) => e.type)).toEqual(['WebhookAttemptStarted', 'WebhookAttemptRecorded', 'webhook.delivered']);
    const retried: DeliveryEvent = {
      type: 'WebhookRetryRequested',
      deliveryId: 'd1',
      nextAttemptAt: '2026-03-10T13:00:00.000Z',
      requestedBy: 's',
      requestedAt: '',
    };
    const again = attemptAt([created, ...ok, retried], retried.nextAttemptAt, 200);
    expect(again.map((e) => e.type)).toEqual(['WebhookAttemptStarted', 'WebhookAttemptRecorded']);
  });

  it('the lease: one sender per due attempt; not due, nothing; an expired lease (a sender that died) can be taken over; each attempt recorded once', () => {
    const due = created.nextAttemptAt!;
    const started = deciderSpec(deliveryDecider).given([created]).when({ type: 'StartAttempt', dueAt: due, leaseId: 'a' }, now).result();
    expect(started).toEqual([
      {
        type: 'WebhookAttemptStarted',
        deliveryId: 'd1',
        leaseId: 'a',
        dueAt: due,
        startedAt: now.toISOString(),
        leaseUntil: new Date(now.getTime() + ATTEMPT_LEASE_MS).toISOString(),
      },
    ]);
    deciderSpec(deliveryDecider)
      .given([created, ...started])
      .when({ type: 'StartAttempt', dueAt: due, leaseId: 'b' }, now)
      .then([]);
    deciderSpec(deliveryDecider).given([created]).when({ type: 'StartAttempt', dueAt: '2020-01-01T00:00:00.000Z', leaseId: 'b' }, now).then([]);
    const later = new Date(now.getTime() + ATTEMPT_LEASE_MS + 1);
    expect(
      deciderSpec(deliveryDecider)
        .given([created, ...started])
        .when({ type: 'StartAttempt', dueAt: due, leaseId: 'b' }, later)
        .result(),
    ).toHaveLength(1);
    const rec = deciderSpec(deliveryDecider)
      .given([created, ...started])
      .when({ type: 'RecordAttempt', leaseId: 'a', attempt: attempt(500), jitter: 0 }, now)
      .result();
    expect(rec).toHaveLength(1);
    deciderSpec(deliveryDecider)
      .given([created, ...started, ...rec])
      .when({ type: 'RecordAttempt', leaseId: 'a', attempt: attempt(500), jitter: 0 }, now)
      .then([]);
    deciderSpec(deliveryDecider)
      .given([created])
      .when({ type: 'RecordAttempt', leaseId: 'nope', attempt: attempt(200), jitter: 0 }, now)
      .then([]);
  });

  it('records an attempt made while a manual retry moved the due time: status and schedule kept, unless 2xx (delivered)', () => {
    const due = created.nextAttemptAt!;
    const started = deciderSpec(deliveryDecider).given([created]).when({ type: 'StartAttempt', dueAt: due, leaseId: 'a' }, now).result();
    const retried: DeliveryEvent = {
      type: 'WebhookRetryRequested',
      deliveryId: 'd1',
      nextAttemptAt: '2026-03-10T12:00:01.000Z',
      requestedBy: 's',
      requestedAt: '',
    };
    const given = [created, ...started, retried];
    const failed = deciderSpec(deliveryDecider)
      .given(given)
      .when({ type: 'RecordAttempt', leaseId: 'a', attempt: attempt(500), jitter: 0 }, now)
      .result();
    expect(failed).toEqual([
      {
        type: 'WebhookAttemptRecorded',
        deliveryId: 'd1',
        leaseId: 'a',
        attempt: attempt(500),
        status: 'pending',
        nextAttemptAt: retried.nextAttemptAt,
        stale: true,
      },
    ]);
    const gone = deciderSpec(deliveryDecider)
      .given(given)
      .when({ type: 'RecordAttempt', leaseId: 'a', attempt: attempt(410), jitter: 0 }, now)
      .result();
    expect(gone[0]).toMatchObject({ status: 'pending', nextAttemptAt: retried.nextAttemptAt });
    const ok = deciderSpec(deliveryDecider)
      .given(given)
      .when({ type: 'RecordAttempt', leaseId: 'a', attempt: attempt(200), jitter: 0 }, now)
      .result();
    expect(ok.map((e) => e.type)).toEqual(['WebhookAttemptRecorded', 'webhook.delivered']);
    expect(ok[0]).toMatchObject({ status: 'delivered', nextAttemptAt: null, stale: true });
    // The retry's own attempt, made while the first was out, came back first with a 2xx: the late 500 is logged, the delivery stays delivered.
    const retryOk = attemptAt(given, retried.nextAttemptAt, 200, 0, 'b');
    const late = deciderSpec(deliveryDecider)
      .given([...given, ...retryOk])
      .when({ type: 'RecordAttempt', leaseId: 'a', attempt: attempt(500), jitter: 0 }, now)
      .result();
    expect(late).toEqual([
      { type: 'WebhookAttemptRecorded', deliveryId: 'd1', leaseId: 'a', attempt: attempt(500), status: 'delivered', nextAttemptAt: null, stale: true },
    ]);
  });

  it('a stale attempt (recorded after a manual retry moved the due time) does not count toward the retry limit', () => {
    let events: DeliveryEvent[] = [created];
    let due = now.toISOString();
    // MAX_ATTEMPTS - 1 attempts on the schedule, each followed by a stale one (a manual retry while it was out).
    for (let n = 1; n < MAX_ATTEMPTS; n++) {
      const started = deciderSpec(deliveryDecider)
        .given(events)
        .when({ type: 'StartAttempt', dueAt: due, leaseId: `stale-${n}` }, now)
        .result();
      const retried: DeliveryEvent = {
        type: 'WebhookRetryRequested',
        deliveryId: 'd1',
        nextAttemptAt: new Date(Date.parse(due) + 1).toISOString(),
        requestedBy: 's',
        requestedAt: '',
      };
      events = [...events, ...started, retried];
      const stale = deciderSpec(deliveryDecider)
        .given(events)
        .when({ type: 'RecordAttempt', leaseId: `stale-${n}`, attempt: attempt(500), jitter: 0 }, now)
        .result();
      expect(recorded(stale)).toMatchObject({ stale: true, status: 'pending' });
      events = [...events, ...stale];
      due = retried.nextAttemptAt;
      const out = attemptAt(events, due, 500);
      expect(recorded(out)).toMatchObject({ status: 'pending' });
      const pause = Date.parse(recorded(out).nextAttemptAt!) - Date.parse(due);
      expect(pause).toBe(RETRY_DELAYS_MS[n - 1]); // the pause after the n-th scheduled attempt
      events = [...events, ...out];
      due = recorded(out).nextAttemptAt!;
    }
    // The MAX_ATTEMPTS-th scheduled attempt is the last one.
    expect(recorded(attemptAt(events, due, 500))).toMatchObject({ status: 'failed', nextAttemptAt: null });
  });

  it('retries a 429 on the schedule of decisions 9 (no Retry-After: the sender does not read it); a held delivery cannot be retried by hand', () => {
    const out = attemptAt([created], created.nextAttemptAt!, 429, 0);
    expect(recorded(out)).toMatchObject({ status: 'pending' });
    expect(Date.parse(recorded(out).nextAttemptAt!) - Date.parse(created.nextAttemptAt!)).toBe(RETRY_DELAYS_MS[0]);
    deciderSpec(deliveryDecider)
      .given([{ ...created, status: 'held', nextAttemptAt: null }])
      .when({ type: 'RequestRetry', by: 's' }, now)
      .thenThrows('INVALID_TRANSITION');
  });
});

describe('endpoint decider', () => {
  it('refuses rotation and deletion from another environment (404)', () => {
    const c = {
      type: 'WebhookEndpointCreated' as const,
      endpointId: 'e',
      organizationId: 'o',
      environmentId: 'env1',
      url: 'https://x',
      events: [],
      description: null,
      secret: 's',
      createdBy: 'u',
      createdAt: '',
    };
    deciderSpec(endpointDecider).given([c]).when({ type: 'RotateSecret', environmentId: 'env2', secret: 's2', by: 'u' }).thenThrows('NOT_FOUND');
    deciderSpec(endpointDecider)
      .given([c, { type: 'WebhookEndpointDeleted', endpointId: 'e', deletedBy: 'u', deletedAt: '' }])
      .when({ type: 'DeleteEndpoint', environmentId: 'env1', by: 'u' })
      .thenThrows('NOT_FOUND');
  });
});

describe('account decider (subscription)', () => {
  const rec = (
    eventId: string,
    billingType: 'payment_failed' | 'payment_succeeded' | 'grace_period_expired' | 'subscription_canceled',
    bodyHash = eventId,
  ) => ({ type: 'RecordBillingEvent' as const, organizationId: 'o', eventId, billingType, invoiceId: null, occurredAt: null as string | null, bodyHash });
  const run = (given: AccountEvent[], cmd: ReturnType<typeof rec>) => deciderSpec(accountDecider).given(given).when(cmd, now).result();
  it('walks active → grace_period → restricted → active (recovered) and refuses a reused eventId', () => {
    const e1 = run([], rec('a', 'payment_failed'));
    expect(e1.at(-1)).toEqual({ type: 'subscription.updated', status: 'grace_period', previousStatus: 'active' });
    const e2 = run(e1, rec('b', 'grace_period_expired'));
    expect(e2.at(-1)).toEqual({ type: 'subscription.updated', status: 'restricted', previousStatus: 'grace_period', reason: 'PAYMENT_GRACE_PERIOD_EXPIRED' });
    const e3 = run([...e1, ...e2], rec('c', 'payment_succeeded'));
    expect(e3.at(-1)).toEqual({ type: 'subscription.updated', status: 'active', previousStatus: 'restricted', recovered: true });
    expect(run([...e1, ...e2, ...e3], rec('d', 'payment_succeeded')).at(-1)).toEqual({
      type: 'subscription.updated',
      status: 'active',
      previousStatus: 'active',
    });
    expect(run(e1, rec('a', 'payment_failed'))).toEqual([]);
    deciderSpec(accountDecider)
      .given(e1)
      .when(rec('a', 'payment_succeeded', 'other'), now)
      .thenThrows('IDEMPOTENCY_KEY_REUSED');
  });

  it('a notice that happened before the one that set the status changes nothing (providers deliver out of order); a cancellation always applies', () => {
    const at = (eventId: string, billingType: Parameters<typeof rec>[1], occurredAt: string | null) => ({ ...rec(eventId, billingType), occurredAt });
    const paid = run([], at('paid', 'payment_succeeded', '2026-03-10T09:00:00Z'));
    expect(paid.at(-1)).toEqual({ type: 'subscription.updated', status: 'active', previousStatus: 'active' });
    // Yesterday's failure arrives after today's payment: recorded, no grace period.
    const late = run(paid, at('failed-yesterday', 'payment_failed', '2026-03-09T09:00:00Z'));
    expect(late.map((e) => e.type)).toEqual(['BillingEventReceived']);
    // A failure after the payment applies; so does one without occurredAt (it happened when received, `now`).
    expect(run(paid, at('failed-later', 'payment_failed', '2026-03-10T09:30:00Z')).at(-1)).toMatchObject({ status: 'grace_period' });
    expect(run(paid, at('failed-undated', 'payment_failed', null)).at(-1)).toMatchObject({ status: 'grace_period' });
    // In grace since 10:00: an older expiry notice does not restrict, an older payment does not recover.
    const grace = [...paid, ...run(paid, at('f', 'payment_failed', '2026-03-10T10:00:00Z'))];
    expect(run(grace, at('old-expiry', 'grace_period_expired', '2026-03-10T08:00:00Z')).map((e) => e.type)).toEqual(['BillingEventReceived']);
    expect(run(grace, at('old-payment', 'payment_succeeded', '2026-03-10T09:59:59Z')).map((e) => e.type)).toEqual(['BillingEventReceived']);
    expect(run(grace, at('new-payment', 'payment_succeeded', '2026-03-10T10:00:01Z')).at(-1)).toMatchObject({ status: 'active', recovered: true });
    expect(run(grace, at('old-cancel', 'subscription_canceled', '2026-03-05T00:00:00Z')).at(-1)).toMatchObject({
      status: 'canceled',
      previousStatus: 'grace_period',
    });
    // A notice dated in the future counts as happening when received: it cannot make every later one stale.
    const future = [...paid, ...run(paid, at('future', 'payment_failed', '2099-01-01T00:00:00Z'))];
    expect(future.at(-1)).toMatchObject({ status: 'grace_period' });
    expect(run(future, at('paid-now', 'payment_succeeded', null)).at(-1)).toMatchObject({ status: 'active', recovered: true });
  });

  it('accepts eventIds that are Object.prototype member names on first use (no 409), and dedupes them after', () => {
    for (const id of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      const first = run([], rec(id, 'payment_failed'));
      expect(first.map((e) => e.type)).toEqual(['AccountOpened', 'BillingEventReceived', 'subscription.updated']);
      expect(run(first, rec(id, 'payment_failed'))).toEqual([]);
      deciderSpec(accountDecider)
        .given(first)
        .when(rec(id, 'payment_failed', 'other'), now)
        .thenThrows('IDEMPOTENCY_KEY_REUSED');
      // Another id is unaffected by it (no prototype pollution of the state).
      expect(run(first, rec('x', 'payment_succeeded')).length).toBeGreaterThan(0);
    }
  });
});

describe('usage decider', () => {
  const use = (sourceId: string, monthlyCredits = 10) => ({
    type: 'UseCredit' as const,
    organizationId: 'o',
    environmentId: 'env',
    source: 'check_in' as const,
    sourceId,
    periodStart: periodStartOf(now),
    monthlyCredits,
  });
  it('reports 80/95/100 once each, one credit per source', () => {
    let events: UsageEvent[] = [];
    const thresholds: number[] = [];
    for (let i = 1; i <= 12; i++) {
      const out = deciderSpec(usageDecider)
        .given(events)
        .when(use(`s${i}`), now)
        .result();
      for (const e of out) if (e.type === 'billing.usage_threshold_reached') thresholds.push(e.threshold);
      events = [...events, ...out];
    }
    expect(thresholds).toEqual([80, 95, 100]);
    deciderSpec(usageDecider).given(events).when(use('s1'), now).then([]);
    const bigger = deciderSpec(usageDecider).given(events).when(use('s13', 15), now).result();
    expect(bigger.map((e) => e.type)).toEqual(['CreditUsed']);
    expect(periodStartOf(new Date('2026-03-31T23:59:59Z'))).toBe('2026-03-01T00:00:00.000Z');
  });

  it('a reservation (withinPlan) is refused once the credits are used up, unless its source already has its credit; a recorded fact never is', () => {
    let events: UsageEvent[] = [];
    for (let i = 1; i <= 3; i++)
      events = [
        ...events,
        ...deciderSpec(usageDecider)
          .given(events)
          .when({ ...use(`r${i}`, 3), withinPlan: true }, now)
          .result(),
      ];
    expect(events.filter((e) => e.type === 'CreditUsed')).toHaveLength(3);
    expect(() =>
      deciderSpec(usageDecider)
        .given(events)
        .when({ ...use('r4', 3), withinPlan: true }, now)
        .result(),
    ).toThrow(expect.objectContaining({ code: 'USAGE_PAUSED', status: 409 }));
    deciderSpec(usageDecider)
      .given(events)
      .when({ ...use('r2', 3), withinPlan: true }, now)
      .then([]); // already reserved: idempotent
    expect(
      deciderSpec(usageDecider)
        .given(events)
        .when(use('late-fact', 3), now)
        .result()
        .map((e) => e.type),
    ).toEqual(['CreditUsed']);
    expect(
      deciderSpec(usageDecider)
        .given(events)
        .when({ ...use('r4', 4), withinPlan: true }, now)
        .result()
        .map((e) => e.type),
    ).toEqual(['CreditUsed']); // a larger plan has room
  });
});

describe('usage thresholds: once each per period (spec: "sent once each ... as use reaches")', () => {
  const period = periodStartOf(now);
  const use = (sourceId: string, monthlyCredits: number) => ({
    type: 'UseCredit' as const,
    organizationId: 'o',
    environmentId: 'env',
    source: 'check_in' as const,
    sourceId,
    periodStart: period,
    monthlyCredits,
  });
  const plan = (monthlyCredits: number) => ({ type: 'ApplyPlan' as const, organizationId: 'o', periodStart: period, monthlyCredits });
  const step = (events: UsageEvent[], command: ReturnType<typeof use> | ReturnType<typeof plan>) => {
    const out = deciderSpec(usageDecider).given(events).when(command, now).result();
    return {
      events: [...events, ...out],
      sent: out.filter((e) => e.type === 'billing.usage_threshold_reached') as Extract<UsageEvent, { threshold: number }>[],
    };
  };
  const usedUp = (n: number, monthly: number) => {
    let events: UsageEvent[] = [];
    for (let i = 1; i <= n; i++) events = step(events, use(`a${i}`, monthly)).events;
    return events;
  };

  it('a larger plan later in the period re-arms nothing: 80 is not sent twice', () => {
    let events = usedUp(8, 10); // 80 sent at 8/10
    let r = step(events, plan(20));
    expect(r.sent).toEqual([]);
    events = r.events;
    const later: number[] = [];
    for (let i = 9; i <= 20; i++) {
      r = step(events, use(`a${i}`, 20));
      later.push(...r.sent.map((e) => e.threshold));
      events = r.events;
    }
    expect(later).toEqual([95, 100]); // 19/20 and 20/20; 80 (16/20) was already reported this period
  });

  it('a plan change that puts usage past thresholds reports each not yet reported, at once, with the usage of that moment', () => {
    const events = usedUp(5, 100); // 5%: nothing reported
    const r = step(events, plan(4)); // 5 of 4: 125%
    expect(
      r.sent.map((e) => ({
        threshold: e.threshold,
        creditsUsed: e.creditsUsed,
        monthlyCredits: e.monthlyCredits,
        remaining: e.remaining,
        paused: e.paused,
        periodStart: e.periodStart,
      })),
    ).toEqual([
      { threshold: 80, creditsUsed: 5, monthlyCredits: 4, remaining: 0, paused: true, periodStart: period },
      { threshold: 95, creditsUsed: 5, monthlyCredits: 4, remaining: 0, paused: true, periodStart: period },
      { threshold: 100, creditsUsed: 5, monthlyCredits: 4, remaining: 0, paused: true, periodStart: period },
    ]);
    // Repeating the plan change, or more credits, sends nothing again.
    expect(step(r.events, plan(4)).sent).toEqual([]);
    expect(step(r.events, use('a6', 4)).sent).toEqual([]);
  });

  it('a smaller plan reports only what it crosses and what was not reported; nothing with no usage', () => {
    const events = usedUp(8, 10); // 80 sent
    expect(step(events, plan(9)).sent).toEqual([]); // 8/9 = 88.9%: past 80 (already reported), below 95
    expect(step(events, plan(8)).sent.map((e) => [e.threshold, e.paused])).toEqual([
      [95, true],
      [100, true],
    ]); // 8/8: 95 and 100 at once, 80 not again
  });

  it('an unused period reports nothing on a plan change', () => {
    expect(step([], plan(1)).sent).toEqual([]);
  });
});

describe('usage decider purity', () => {
  const credit = (sourceId: string, creditsUsed: number): UsageEvent => ({
    type: 'CreditUsed',
    organizationId: 'o',
    environmentId: 'env',
    source: 'check_in',
    sourceId,
    periodStart: periodStartOf(now),
    creditsUsed,
    usedAt: now.toISOString(),
  });
  const use = (sourceId: string) => ({
    type: 'UseCredit' as const,
    organizationId: 'o',
    environmentId: 'env',
    source: 'check_in' as const,
    sourceId,
    periodStart: periodStartOf(now),
    monthlyCredits: 1000,
  });
  it('evolve leaves its input state as it was (no source leaks into an earlier state or a sibling)', () => {
    const s0 = usageDecider.initialState();
    const s1 = usageDecider.evolve(s0, credit('a', 1));
    expect(usageDecider.decide(use('a'), s0, now).map((e) => e.type)).toEqual(['CreditUsed']); // s0 has not seen a
    expect(usageDecider.decide(use('a'), s1, now)).toEqual([]);
    // Two states evolved from the same one do not see each other's sources.
    const s2a = usageDecider.evolve(s1, credit('b', 2));
    const s2b = usageDecider.evolve(s1, credit('c', 2));
    expect(usageDecider.decide(use('c'), s2a, now).length).toBe(1);
    expect(usageDecider.decide(use('b'), s2b, now).length).toBe(1);
    expect(usageDecider.decide(use('b'), s2a, now)).toEqual([]);
    expect(usageDecider.decide(use('c'), s2b, now)).toEqual([]);
    expect(usageDecider.decide(use('b'), s1, now).length).toBe(1);
    expect(usageDecider.decide(use('a'), s2b, now)).toEqual([]);
    // And a state evolved further after the branch still sees its own line only.
    const s3a = usageDecider.evolve(s2a, credit('d', 3));
    expect(usageDecider.decide(use('c'), s3a, now).length).toBe(1);
    expect(usageDecider.decide(use('d'), s2a, now).length).toBe(1);
  });

  it('folds a large month in linear time', () => {
    let s = usageDecider.initialState();
    const started = performance.now();
    for (let i = 1; i <= 100_000; i++) s = usageDecider.evolve(s, credit(`s${i}`, i));
    expect(performance.now() - started).toBeLessThan(2000);
    expect(usageDecider.decide(use('s5000'), s, now)).toEqual([]);
    expect(s.creditsUsed).toBe(100_000);
  });
});

describe('url policy and ids', () => {
  it('refuses loopback/private/link-local in production only, and http in production', async () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '0.0.0.0'])
      expect(isBlockedAddress(a)).toBe(true);
    for (const a of ['93.184.216.34', '2606:4700::1111']) expect(isBlockedAddress(a)).toBe(false);
    expect(urlSyntaxProblem('http://example.com/hook', true)).toBe('https_required');
    expect(urlSyntaxProblem('http://127.0.0.1:9/hook', false)).toBeNull();
    expect(urlSyntaxProblem('https://u:p@example.com/', true)).toBe('credentials_in_url');
    expect(await addressProblem('https://127.0.0.1/hook', true)).toBe('address_refused');
    expect(await addressProblem('https://localhost/hook', true)).toBe('address_refused');
    expect(await addressProblem('https://[::1]/hook', true)).toBe('address_refused');
    expect(await addressProblem('http://127.0.0.1/hook', false)).toBeNull();
    expect(stableUuid('a', 'b')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(stableUuid('a', 'b')).toBe(stableUuid('a', 'b'));
  });
});
