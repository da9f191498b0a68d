import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
// Types only at load: libs/testing is also loaded outside Jest's module map (the distributed
// target's global setup), where @svc/eventstore is imported when a method needs it.
import type { EventMetadata, NewEvent } from '@svc/eventstore';

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

/** Metadata that is the same on every call (empty ids, no tenant, actor `test`, 2026-01-01), with `overrides`. */
export function fixedMetadata(overrides: Partial<EventMetadata> = {}): EventMetadata {
  return {
    eventId: '',
    correlationId: '',
    causationId: null,
    organizationId: null,
    environmentId: null,
    actor: 'test',
    recordedAt: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

/**
 * A PostgreSQL event-store schema of one test file's own (`svc_<label>_t<random>`, so that runs
 * on one server never meet): `create` migrates it (a store opened and closed on it), `truncate`
 * empties tables between tests, `drop` removes it at the end. Its server: `url` as given, else
 * DATABASE_URL, else the event store's default (known once `create` has run).
 */
export class TestEventSchema {
  readonly name: string;
  private resolvedUrl: string | undefined;

  constructor(
    label: string,
    private readonly givenUrl: string | undefined = process.env.DATABASE_URL || undefined,
  ) {
    this.name = `svc_${label}_t${randomUUID().replace(/-/g, '').slice(0, 10)}`;
  }

  get url(): string {
    if (this.resolvedUrl === undefined) throw new Error('TestEventSchema: call create() first');
    return this.resolvedUrl;
  }

  async create(): Promise<void> {
    const { DEFAULT_DATABASE_URL, PostgresEventStore } = await import('@svc/eventstore');
    this.resolvedUrl = this.givenUrl ?? DEFAULT_DATABASE_URL;
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
