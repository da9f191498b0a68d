import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock } from '@svc/clock';
import { DomainError, SqliteEventStore } from '@svc/eventstore';
import { Keyring } from '@svc/security';
import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { IdentityTokenCommand, IdentityTokenEvent, identityTokenDecider, identityTokenStream } from '../src/domain/identity-token';
import { IdentityTokenUses } from '../src/application/identity-tokens.service';

const env = 'e0000000-0000-4000-8000-000000000001';
const t0 = new Date('2026-03-01T10:00:00.000Z');
const at = (s: number) => new Date(t0.getTime() + s * 1000);
const use = (sessionId: string, expS: number): IdentityTokenCommand => ({ type: 'UseIdentityToken', environmentId: env, sessionId, tokenExpiresAt: at(expS).toISOString() });

describe('identity token decider', () => {
  const first: IdentityTokenEvent = {
    type: 'IdentityTokenUsed',
    environmentId: env,
    sessionId: 's1',
    tokenExpiresAt: at(300).toISOString(),
    rememberedUntil: at(360).toISOString(),
    usedAt: t0.toISOString(),
  };

  it('records the first use, remembered until exp plus the minute of clock tolerance', () => {
    deciderSpec(identityTokenDecider).given([]).when(use('s1', 300), t0).then([first]);
  });

  it('refuses a second use while the token can still be accepted, whoever asks', () => {
    const spec = deciderSpec(identityTokenDecider);
    spec.given([first]).when(use('s2', 300), at(1)).thenThrows('INVALID_IDENTITY_TOKEN');
    spec.given([first]).when(use('s2', 600), at(359)).thenThrows('INVALID_IDENTITY_TOKEN');
  });

  it('forgets the use once the token expired: the jti may name a new token', () => {
    const later = deciderSpec(identityTokenDecider).given([first]).when(use('s3', 700), at(360)).result();
    expect(later).toEqual([{ ...first, sessionId: 's3', tokenExpiresAt: at(700).toISOString(), rememberedUntil: at(760).toISOString(), usedAt: at(360).toISOString() }]);
    deciderSpec(identityTokenDecider).given([first, ...later]).when(use('s4', 700), at(400)).thenThrows('INVALID_IDENTITY_TOKEN');
  });
});

describe('IdentityTokenUses over SQLite (two processes sharing one event store file)', () => {
  let dir: string;
  const stores: SqliteEventStore[] = [];
  const keyring = new Keyring(randomBytes(32));
  const clock: Clock = { now: () => t0, onAdvance: () => () => undefined };
  const open = () => {
    const store = new SqliteEventStore(join(dir, 'events.db'));
    stores.push(store);
    return new IdentityTokenUses(store, clock, keyring);
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'identity-token-'));
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('lets exactly one of many simultaneous uses through, across processes and after a restart', async () => {
    const a = open();
    const b = open();
    const key = a.tokenKey(env, 'h.p.s', 'jti-1', 'secret-1');
    expect(b.tokenKey(env, 'other.token.x', 'jti-1', 'secret-2')).toBe(key);
    const input = (i: number) => ({ organizationId: 'o1', environmentId: env, tokenKey: key, tokenExpS: t0.getTime() / 1000 + 300, sessionId: `s${i}` });
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).use(input(i))));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') {
        expect(r.reason).toBeInstanceOf(DomainError);
        expect((r.reason as DomainError).code).toBe('INVALID_IDENTITY_TOKEN');
      }
    }
    const stream = await a['handler'].load(identityTokenStream(env, key));
    expect(stream.events).toHaveLength(1);

    await Promise.all(stores.splice(0).map((s) => s.close()));
    const restarted = open();
    await expect(restarted.use(input(99))).rejects.toMatchObject({ code: 'INVALID_IDENTITY_TOKEN' });
  });

  it('keys a token by its jti, or by its signed part and signature as the secret computes it; per environment; never the jti in clear', () => {
    const uses = open();
    const k = (e: string, token: string, jti?: string, secret = 'idsec_1') => uses.tokenKey(e, token, jti, secret);
    expect(k(env, 'h.p.sig1')).toBe(k(env, 'h.p.sig2')); // the signature segment re-spelled
    expect(k(env, 'h.p.sig')).not.toBe(k(env, 'h.q.sig'));
    expect(k(env, 'h.p.sig', undefined, 'idsec_1')).not.toBe(k(env, 'h.p.sig', undefined, 'idsec_2')); // same claims, another secret
    expect(k(env, 'h.p.sig', 'x', 'idsec_1')).toBe(k(env, 'h.p.sig', 'x', 'idsec_2')); // a jti is the caller's id, whatever signs it
    expect(k(env, 'h.p.sig', 'x')).not.toBe(k(env, 'h.p.sig'));
    expect(k(env, 'a.b.c', 'x')).not.toBe(k('e0000000-0000-4000-8000-000000000002', 'a.b.c', 'x'));
    // `jti:` and `jws:` ids cannot collide: a jti spelling a token's header.payload is another id.
    expect(k(env, 'h.p.sig', 'jws:h.p')).not.toBe(k(env, 'h.p.sig'));
    expect(identityTokenStream(env, k(env, 'a.b.c', 'canary-jti'))).not.toContain('canary-jti');
  });
});
