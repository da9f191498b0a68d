import { NEVER, Observable, of, throwError } from 'rxjs';
import { AnyClientProxy, BusReplyTimeoutError, ask } from '../src/index';

/** A bus whose `send` answers with the observable the test gives for the pattern, and records what was sent. */
function bus(answer: (pattern: string, payload: unknown) => Observable<unknown>): AnyClientProxy & { sent: [string, unknown][] } {
  const sent: [string, unknown][] = [];
  return {
    sent,
    send: (pattern: string, payload: unknown) => {
      sent.push([pattern, payload]);
      return answer(pattern, payload);
    },
  } as unknown as AnyClientProxy & { sent: [string, unknown][] };
}

describe('ask (bus request/reply)', () => {
  it('sends the payload on the pattern and resolves with the reply', async () => {
    const b = bus((_p, payload) => of({ echoed: payload }));
    await expect(ask<{ echoed: unknown }>(b, 'p.q', { a: 1 }, { timeoutMs: 1000 })).resolves.toEqual({ echoed: { a: 1 } });
    expect(b.sent).toEqual([['p.q', { a: 1 }]]);
  });

  it('fails with BusReplyTimeoutError (503 UNAVAILABLE) when no reply comes within timeoutMs', async () => {
    const started = Date.now();
    await expect(
      ask(
        bus(() => NEVER),
        'p.q',
        {},
        { timeoutMs: 50 },
      ),
    ).rejects.toMatchObject({ name: 'BusReplyTimeoutError', pattern: 'p.q', status: 503, code: 'UNAVAILABLE' });
    expect(Date.now() - started).toBeLessThan(1000);
  }, 5000);

  it('without onError, rejects with the error as the bus gave it', async () => {
    const refusal = { status: 404, code: 'NOT_FOUND', message: 'no such case' };
    await expect(
      ask(
        bus(() => throwError(() => refusal)),
        'p.q',
        {},
        { timeoutMs: 1000 },
      ),
    ).rejects.toBe(refusal);
  });

  it('with onError, a failure becomes what onError returns', async () => {
    const seen: unknown[] = [];
    const r = await ask<{ ok: true }, null>(
      bus(() => NEVER),
      'p.q',
      {},
      {
        timeoutMs: 20,
        onError: (err) => {
          seen.push(err);
          return null;
        },
      },
    );
    expect(r).toBeNull();
    expect(seen[0]).toBeInstanceOf(BusReplyTimeoutError);
  }, 5000);

  it('with onError, a failure becomes what onError throws', async () => {
    const mapped = new Error('mapped');
    await expect(
      ask(
        bus(() => throwError(() => ({ status: 503, code: 'NO_HANDLER' }))),
        'p.q',
        {},
        {
          timeoutMs: 1000,
          onError: () => {
            throw mapped;
          },
        },
      ),
    ).rejects.toBe(mapped);
  });

  it('with onError, a reply is returned untouched (onError not called)', async () => {
    const onError = jest.fn(() => 'fallback');
    await expect(
      ask(
        bus(() => of({ reserved: true })),
        'p.q',
        {},
        { timeoutMs: 1000, onError },
      ),
    ).resolves.toEqual({ reserved: true });
    expect(onError).not.toHaveBeenCalled();
  });
});
