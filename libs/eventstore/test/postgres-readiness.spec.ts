import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL, PostgresEventStore } from '@svc/eventstore';
import { TcpForwarder } from '@svc/testing';

/**
 * `ping()` of the PostgreSQL adapter against the real server at DATABASE_URL, reached through a
 * real TCP forwarder that the test can take away: the ping answers while the server does, is
 * still pending while the server is silent (GET /readyz bounds it with its own timeout), and fails
 * once the server cannot be reached.
 */
const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
const schema = `svc_events_ready_${randomUUID().replace(/-/g, '').slice(0, 10)}`;

function throughForwarder(port: number): string {
  const u = new URL(url);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

/** Settles within `ms`, or reports that it did not. */
async function within<T>(p: Promise<T>, ms: number): Promise<'pending' | 'resolved' | 'rejected'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  const settled = p.then(
    () => 'resolved' as const,
    () => 'rejected' as const,
  );
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('PostgresEventStore ping against a server that goes silent, then away', () => {
  let forwarder: TcpForwarder;
  let store: PostgresEventStore | undefined;
  const warnings: string[] = [];

  beforeAll(async () => {
    const { host, port } = TcpForwarder.target(url, 5432);
    forwarder = await new TcpForwarder(host, port).start();
  });

  afterAll(async () => {
    await forwarder.close();
    await store?.close().catch(() => undefined);
    const c = new Client({ connectionString: url });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  });

  it('answers, hangs while the server is silent, answers again, and fails once the server is unreachable', async () => {
    store = await PostgresEventStore.open({
      connectionString: throughForwarder(forwarder.port),
      schema,
      listen: false,
      logger: { warn: (m) => warnings.push(m) },
    });
    await expect(store.ping()).resolves.toBeUndefined();

    forwarder.hang();
    const silent = store.ping();
    expect(await within(silent, 500)).toBe('pending');
    forwarder.resume();
    expect(await within(silent, 5000)).toBe('resolved');

    await forwarder.close();
    expect(await within(store.ping(), 5000)).toBe('rejected');
  });
});
