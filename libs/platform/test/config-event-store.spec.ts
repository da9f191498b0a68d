import { loadConfig } from '@svc/platform';

describe('loadConfig: the event store', () => {
  it('takes sqlite (default), postgres and esdb, and nothing else', () => {
    expect(loadConfig({}).eventStore).toBe('sqlite');
    expect(loadConfig({ EVENT_STORE: 'postgres' }).eventStore).toBe('postgres');
    expect(loadConfig({ EVENT_STORE: 'esdb' }).eventStore).toBe('esdb');
    expect(() => loadConfig({ EVENT_STORE: 'postgresql' })).toThrow(/EVENT_STORE must be one of sqlite, postgres, esdb/);
  });

  it('reads DATABASE_URL and EVENT_STORE_SCHEMA for PostgreSQL, with the local server and svc_events as defaults', () => {
    expect(loadConfig({ EVENT_STORE: 'postgres' })).toMatchObject({
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
      eventStoreSchema: 'svc_events',
    });
    expect(loadConfig({ EVENT_STORE: 'postgres', DATABASE_URL: 'postgres://svc@db:5432/care', EVENT_STORE_SCHEMA: 'care_events' })).toMatchObject({
      databaseUrl: 'postgres://svc@db:5432/care',
      eventStoreSchema: 'care_events',
    });
  });

  it('refuses a schema name that is not a plain lower-case identifier (it is written into SQL)', () => {
    for (const bad of ['Events', '1events', 'svc-events', 'svc events', 'svc_events"; drop', 'x'.repeat(49)]) {
      expect(() => loadConfig({ EVENT_STORE_SCHEMA: bad })).toThrow(/EVENT_STORE_SCHEMA/);
    }
  });
});
