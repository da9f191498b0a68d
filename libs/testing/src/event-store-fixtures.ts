import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL, NewEvent, PostgresEventStore } from '@svc/eventstore';

/** A NewEvent of `type` with test metadata: fresh ids, organization `o`, environment `e`, actor `system`. */
export function testEvent(type: string, data: unknown = {}): NewEvent {
  const metadata = {
    eventId: randomUUID(),
    correlationId: randomUUID(),
    causationId: null,
    organizationId: 'o',
    environmentId: 'e',
    actor: 'system',
    recordedAt: new Date().toISOString(),
  };
  return { type, data, metadata };
}

/**
 * A PostgreSQL event-store schema of one test file's own (`svc_<label>_t<random>`, so that runs
 * on one server never meet): `create` migrates it (a store opened and closed on it), `truncate`
 * empties tables between tests, `drop` removes it at the end.
 */
export class TestEventSchema {
  readonly name: string;

  constructor(
    label: string,
    readonly url: string = process.env.DATABASE_URL || DEFAULT_DATABASE_URL,
  ) {
    this.name = `svc_${label}_t${randomUUID().replace(/-/g, '').slice(0, 10)}`;
  }

  async create(): Promise<void> {
    const store = await PostgresEventStore.open({ connectionString: this.url, schema: this.name, listen: false, poolSize: 1 });
    await store.close();
  }

  async truncate(...tables: string[]): Promise<void> {
    await this.query(`TRUNCATE ${tables.map((t) => `"${this.name}".${t}`).join(', ')}`);
  }

  async drop(): Promise<void> {
    await this.query(`DROP SCHEMA IF EXISTS "${this.name}" CASCADE`);
  }

  private async query(sql: string): Promise<void> {
    const c = new Client({ connectionString: this.url });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  }
}
