import { WrongExpectedRevisionError } from '@svc/eventstore';
import { toErrorResponse } from '@svc/http';
import { BusReplyTimeoutError, BusUnavailableError } from '@svc/messaging';
import Redis from 'ioredis';

describe('toErrorResponse', () => {
  it("a stream that kept moving past the command handler's retries is 503 UNAVAILABLE with retry-after, never 500", () => {
    const r = toErrorResponse(new WrongExpectedRevisionError('conversation-conversation-x', 4, 9));
    expect(r).toEqual({
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'The resource is busy; retry with the same request' },
      headers: { 'retry-after': '1' },
    });
    // The message names no stream (it may carry an id).
    expect(JSON.stringify(r.body)).not.toContain('conversation-');
  });

  it('a bus request whose reply consumer is not ready within its bound is 503 UNAVAILABLE with retry-after', () => {
    const r = toErrorResponse(new BusUnavailableError('case-ledger.query.case-status'));
    expect(r).toEqual({
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'A service this request needs is not reachable; retry shortly' },
      headers: { 'retry-after': '1' },
    });
    expect(JSON.stringify(r.body)).not.toContain('case-ledger');
  });

  it('a bus request with no reply within its wait is 503 UNAVAILABLE with retry-after, never 500', () => {
    const r = toErrorResponse(new BusReplyTimeoutError('patient-pathway.query.patient-contact', 5000));
    expect(r).toEqual({
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'A service this request needs did not answer in time; retry with the same request' },
      headers: { 'retry-after': '1' },
    });
    expect(JSON.stringify(r.body)).not.toContain('patient-pathway');
  });

  it('a Redis request the client gave up on (its server down) is 503 UNAVAILABLE with retry-after, never 500', async () => {
    // A real client against a port nothing listens on: the error the read paths see while Redis is down.
    const redis = new Redis('redis://127.0.0.1:1', { maxRetriesPerRequest: 1, retryStrategy: () => 20 });
    redis.on('error', () => undefined);
    const err = await redis.get('k').then(
      () => null,
      (e: unknown) => e,
    );
    redis.disconnect();
    expect(toErrorResponse(err)).toEqual({
      status: 503,
      body: { code: 'UNAVAILABLE', message: 'A store this request needs is not reachable; retry shortly' },
      headers: { 'retry-after': '1' },
    });
  });

  it('an error it does not know is still 500 INTERNAL_ERROR without its message', () => {
    expect(toErrorResponse(new Error('secret detail'))).toEqual({ status: 500, body: { code: 'INTERNAL_ERROR', message: 'Internal error' } });
  });
});
