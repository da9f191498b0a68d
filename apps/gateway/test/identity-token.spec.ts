import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock } from '@svc/clock';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL, DomainError, EventStore, InMemoryEventStore, PostgresEventStore, SqliteEventStore } from '@svc/eventstore';
import { Keyring } from '@svc/security';
import { deciderSpec } from '../../../libs/eventstore/src/testing';
import { IdentityTokenCommand, IdentityTokenEvent, identityTokenDecider, identityTokenStream } from '../src/domain/identity-token';
import { IdentityTokenUses } from '../src/application/identity-tokens.service';

const env = 'e0000000-0000-4000-8000-000000000001';
const t0 = new Date('2026-03-01T10:00:00.000Z');
const at = (s: number) => new Date(t0.getTime() + s * 1000);
const use = (sessionId: string, expS: number): IdentityTokenCommand => ({
  type: 'UseIdentityToken',
  environmentId: env,
  sessionId,
  tokenExpiresAt: at(expS).toISOString(),
});

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
    expect(later).toEqual([
      { ...first, sessionId: 's3', tokenExpiresAt: at(700).toISOString(), rememberedUntil: at(760).toISOString(), usedAt: at(360).toISOString() },
    ]);
    deciderSpec(identityTokenDecider)
      .given([first, ...later])
      .when(use('s4', 700), at(400))
      .thenThrows('INVALID_IDENTITY_TOKEN');
  });
});

/**
 * Two processes sharing one event store: SQLite (two connections to one file, as standalone after a
 * restart) and PostgreSQL (two pools on one schema, as gateway replicas in distributed mode; the
 * server at DATABASE_URL, default the local one, in a schema made for this run and dropped after).
 */
const pgUrl = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
const backends: [string, { setUp(): Promise<void>; open(): Promise<EventStore>; tearDown(): Promise<void> }][] = [
  [
    'SQLite',
    (() => {
      let dir = '';
      return {
        async setUp() {
          dir = mkdtempSync(join(tmpdir(), 'identity-token-'));
        },
        async open() {
          return new SqliteEventStore(join(dir, 'events.db'));
        },
        async tearDown() {
          rmSync(dir, { recursive: true, force: true });
        },
      };
    })(),
  ],
  [
    'PostgreSQL',
    (() => {
      const schema = `svc_events_idtok_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      return {
        async setUp() {},
        async open() {
          return PostgresEventStore.open({ connectionString: pgUrl, schema, pollIntervalMs: 100, poolSize: 4 });
        },
        async tearDown() {
          const c = new Client({ connectionString: pgUrl });
          await c.connect();
          try {
            await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          } finally {
            await c.end();
          }
        },
      };
    })(),
  ],
];

const keyring = new Keyring(randomBytes(32));
const clock: Clock = { now: () => t0, onAdvance: () => () => undefined };

describe.each(backends)('IdentityTokenUses over %s (two processes sharing one event store)', (_name, backend) => {
  const stores: EventStore[] = [];
  const open = async () => {
    const store = await backend.open();
    stores.push(store);
    return new IdentityTokenUses(store, clock, keyring);
  };

  beforeAll(() => backend.setUp());
  afterAll(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
    await backend.tearDown();
  });

  it('lets exactly one of many simultaneous uses through, across processes and after a restart', async () => {
    const a = await open();
    const b = await open();
    const key = a.tokenKey(env, 'h.p.s', `jti-${randomUUID()}`, 'secret-1');
    const input = (i: number) => ({ organizationId: 'o1', environmentId: env, tokenKey: key, tokenExpS: t0.getTime() / 1000 + 300, sessionId: `s${i}` });
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).use(input(i))));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') {
        expect(r.reason).toBeInstanceOf(DomainError);
        expect((r.reason as DomainError).code).toBe('INVALID_IDENTITY_TOKEN');
      }
    }
    expect(await stores[0].readStream(identityTokenStream(env, key))).toHaveLength(1);

    await Promise.all(stores.splice(0).map((s) => s.close()));
    const restarted = await open();
    await expect(restarted.use(input(99))).rejects.toMatchObject({ code: 'INVALID_IDENTITY_TOKEN' });
  });
});

describe('IdentityTokenUses.tokenKey', () => {
  const uses = new IdentityTokenUses(new InMemoryEventStore(), clock, keyring);

  it('keys a token by its jti, or by its signed part and signature as the secret computes it; per environment; never the jti in clear', () => {
    const k = (e: string, token: string, jti?: string, secret = 'idsec_1') => uses.tokenKey(e, token, jti, secret);
    expect(k(env, 'h.p.sig1')).toBe(k(env, 'h.p.sig2')); // the signature segment re-spelled
    expect(k(env, 'h.p.sig')).not.toBe(k(env, 'h.q.sig'));
    expect(k(env, 'h.p.sig', undefined, 'idsec_1')).not.toBe(k(env, 'h.p.sig', undefined, 'idsec_2')); // same claims, another secret
    expect(k(env, 'h.p.sig', 'x', 'idsec_1')).toBe(k(env, 'other.claims.sig', 'x', 'idsec_2')); // a jti is the caller's id, whatever carries or signs it
    expect(k(env, 'h.p.sig', 'x')).not.toBe(k(env, 'h.p.sig'));
    expect(k(env, 'a.b.c', 'x')).not.toBe(k('e0000000-0000-4000-8000-000000000002', 'a.b.c', 'x'));
    // `jti:` and `jws:` ids cannot collide: a jti spelling a token's header.payload is another id.
    expect(k(env, 'h.p.sig', 'jws:h.p')).not.toBe(k(env, 'h.p.sig'));
    expect(identityTokenStream(env, k(env, 'a.b.c', 'canary-jti'))).not.toContain('canary-jti');
  });
});
