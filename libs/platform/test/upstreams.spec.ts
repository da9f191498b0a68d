import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteReadStore } from '@svc/read-store';
import { RouteTable, UpstreamAnnouncement, announceUpstream, readUpstreams } from '../src/upstreams';

const announced = (app: string, routes: [string, string][]): UpstreamAnnouncement => ({
  app,
  origin: `http://127.0.0.1:${app.length + 40000}`,
  routes: routes.map(([method, url]) => ({ method, url })),
  announcedAt: '2026-01-01T00:00:00.000Z',
});

describe('RouteTable: which app serves a request (distributed mode)', () => {
  const table = new RouteTable([
    announced('case-ledger', [
      ['GET', '/api/v1/clinical-cases/:caseId/progress'],
      ['POST', '/api/v1/clinical-cases/:caseId/updates'],
      ['GET', '/api/organizations/:orgId/environments/:envId/clinical-cases'],
      ['GET', '/api/organizations/:orgId/environments/:envId/clinical-cases/:caseId'],
    ]),
    announced('workflow-engine', [
      ['GET', '/api/organizations/:orgId/environments/:envId/conversation-workflows/templates'],
      ['GET', '/api/organizations/:orgId/environments/:envId/conversation-workflows/:profileId'],
      ['POST', '/api/organizations/:orgId/environments/:envId/conversation-workflows/from-template'],
    ]),
    announced('patient-pathway', [
      ['GET', '/api/check-ins/:checkInId'],
      ['GET', '/files/*'],
    ]),
  ]);

  it('matches parameters and names the owning app and its route pattern', () => {
    expect(table.match('GET', '/api/v1/clinical-cases/6f1c/progress?x=1')).toEqual({ app: 'case-ledger', route: '/api/v1/clinical-cases/:caseId/progress' });
    expect(table.match('POST', '/api/v1/clinical-cases/6f1c/updates')).toEqual({ app: 'case-ledger', route: '/api/v1/clinical-cases/:caseId/updates' });
    expect(table.match('GET', '/api/check-ins/abc?token=t')).toEqual({ app: 'patient-pathway', route: '/api/check-ins/:checkInId' });
  });

  it('prefers a static segment to a parameter, as Fastify does', () => {
    expect(table.match('GET', '/api/organizations/o/environments/e/conversation-workflows/templates')?.route).toBe(
      '/api/organizations/:orgId/environments/:envId/conversation-workflows/templates',
    );
    expect(table.match('GET', '/api/organizations/o/environments/e/conversation-workflows/p1')?.route).toBe(
      '/api/organizations/:orgId/environments/:envId/conversation-workflows/:profileId',
    );
  });

  it('goes back to a parameter when the static branch has no route for the method', () => {
    // POST .../from-template is static; GET .../from-template is the :profileId route.
    expect(table.match('GET', '/api/organizations/o/environments/e/conversation-workflows/from-template')?.route).toBe(
      '/api/organizations/:orgId/environments/:envId/conversation-workflows/:profileId',
    );
    expect(table.match('POST', '/api/organizations/o/environments/e/conversation-workflows/from-template')?.route).toBe(
      '/api/organizations/:orgId/environments/:envId/conversation-workflows/from-template',
    );
  });

  it('HEAD follows GET; another method, a longer or shorter path, or a trailing slash is no match', () => {
    expect(table.match('HEAD', '/api/check-ins/abc')?.app).toBe('patient-pathway');
    expect(table.match('DELETE', '/api/check-ins/abc')).toBeNull();
    expect(table.match('GET', '/api/check-ins/abc/more')).toBeNull();
    expect(table.match('GET', '/api/check-ins')).toBeNull();
    expect(table.match('GET', '/api/v1/clinical-cases/x/progress/')).toBeNull();
    expect(table.match('GET', '/api/no/such/route')).toBeNull();
  });

  it('a wildcard takes the rest of the path; static segments compare percent-decoded', () => {
    expect(table.match('GET', '/files/a/b/c.txt')?.app).toBe('patient-pathway');
    expect(table.match('GET', '/api/check-%69ns/abc')?.app).toBe('patient-pathway');
  });

  it('a route two apps announce goes to the first by name, and is reported', () => {
    const t = new RouteTable([announced('b-app', [['GET', '/api/x']]), announced('a-app', [['GET', '/api/x']])]);
    expect(t.match('GET', '/api/x')?.app).toBe('a-app');
    expect(t.conflicts).toEqual([{ method: 'GET', url: '/api/x', apps: ['a-app', 'b-app'] }]);
  });
});

describe('announcements in the read store', () => {
  it('are read back, an app announcing again replaces its entry, and internal routes are left out', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'upstreams-'));
    const store = new SqliteReadStore(join(dir, 'read.sqlite'));
    try {
      await announceUpstream(
        store,
        announced('case-ledger', [
          ['GET', '/api/a'],
          ['PUT', '/internal/dev-clock'],
        ]),
      );
      await announceUpstream(store, announced('conversation', [['GET', '/api/b']]));
      await announceUpstream(store, { ...announced('case-ledger', [['GET', '/api/c']]), origin: 'http://127.0.0.1:1' });
      const all = await readUpstreams(store);
      expect(all.map((u) => [u.app, u.origin, u.routes.map((r) => r.url)]).sort()).toEqual([
        ['case-ledger', 'http://127.0.0.1:1', ['/api/c']],
        ['conversation', 'http://127.0.0.1:40012', ['/api/b']],
      ]);
      await announceUpstream(
        store,
        announced('patient-pathway', [
          ['GET', '/api/p'],
          ['PUT', '/internal/dev-clock'],
        ]),
      );
      expect((await readUpstreams(store)).find((u) => u.app === 'patient-pathway')?.routes).toEqual([{ method: 'GET', url: '/api/p' }]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
