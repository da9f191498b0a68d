import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { readMasterKey } from '@svc/platform';
import { Keyring } from '@svc/security';
import { TestApp, describeInProcess } from '@svc/testing';
import { openCase, update } from './case-helpers';
import { buildIfNeeded, ndjson, svc } from './svc-cli';

/**
 * `svc rebuild` (docs/audit.md) as an operator runs it: the package's real bin as a child process
 * against the SQLite data dir of a standalone run filled over HTTP. The read store is deleted with
 * the service stopped, rebuilt from the log, and the restarted service answers as before. The
 * build runs first when dist is older than the sources; the bin is then told not to build.
 */

beforeAll(() => {
  buildIfNeeded();
}, 600_000);

describeInProcess('stops and restarts its own service, and runs the CLI on its data dir')(
  'svc rebuild: read models rebuilt from the log of a standalone run',
  () => {
    const app = new TestApp();
    const env = () => ({ SVC_DATA_DIR: app.dataDir });
    const readStoreFiles = () => ['', '-wal', '-shm'].map((s) => join(app.dataDir, `read-models.sqlite${s}`));

    afterAll(async () => {
      await app.stop();
      rmSync(app.dataDir, { recursive: true, force: true });
    });

    /** Keyring envelopes (`v1.<iv>.<tag>.<ct>`, base64url). */
    const ENVELOPE = /^v1\.[\w-]+\.[\w-]+\.[\w-]*$/;

    /**
     * Every document of the rebuilt projections' collections, as stored, with each sealed field
     * opened (a rebuild seals with fresh nonces, so the envelopes differ while what they hold must
     * not): collection, key, partition, score and the document.
     */
    function storedDocs(collections: string[]): Record<string, unknown>[] {
      const keyring = new Keyring(readMasterKey({ dataDir: app.dataDir }, {}) as Buffer);
      const db = new Database(readStoreFiles()[0], { readonly: true });
      const rows = db
        .prepare(
          `SELECT collection, key, partition, score, doc FROM docs WHERE collection IN (${collections.map(() => '?').join(',')}) ORDER BY collection, key`,
        )
        .all(...collections) as { collection: string; key: string; partition: string | null; score: number; doc: string }[];
      db.close();
      // The keys to try: global and every id in the documents (environments among them).
      const keyIds = new Set(['global']);
      for (const r of rows)
        for (const id of `${r.key} ${r.partition} ${r.doc}`.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? []) keyIds.add(id);
      const open = (envelope: string): unknown => {
        for (const id of keyIds) {
          try {
            return { opened: keyring.decrypt(id, envelope) };
          } catch {
            // another environment's key
          }
        }
        return { unopened: envelope };
      };
      return rows.map((r) => ({ ...r, doc: JSON.parse(r.doc, (_k, v) => (typeof v === 'string' && ENVELOPE.test(v) ? open(v) : v)) }));
    }

    /** What the service answers about the data set (read models only). */
    async function answers(t: Awaited<ReturnType<TestApp['tenant']>>, caseIds: string[]) {
      const out: Record<string, unknown> = {};
      for (const id of caseIds) {
        const progress = await app.api.get(`/v1/clinical-cases/${id}/progress`, t.apiKey);
        const messages = await app.api.get(`/v1/conversations/${id}/messages`, t.apiKey);
        const staffView = await app.api.get(`${t.env}/clinical-cases/${id}`, t.staff);
        out[id] = { progress: [progress.status, progress.body], messages: [messages.status, messages.body], staff: [staffView.status, staffView.body] };
      }
      const list = await app.api.get(`${t.env}/clinical-cases`, t.staff);
      const keys = await app.api.get(`/organizations/${t.orgId}/environments/${t.sandbox}/api-keys`, t.staff);
      const org = await app.api.get(`/organizations/${t.orgId}`, t.staff);
      out.lists = { cases: [list.status, list.body], keys: [keys.status, keys.body], org: [org.status, org.body] };
      return out;
    }

    it('--help, --list, and a wrong selection (exit code 2, before any store is opened)', async () => {
      const help = await svc(['rebuild', '--help'], env());
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('Usage: svc rebuild');
      expect(help.stdout).toContain('--all');

      const list = await svc(['rebuild', '--list', '--json'], env());
      expect({ code: list.code, stderr: list.stderr }).toEqual({ code: 0, stderr: '' });
      const names = ndjson(list.stdout).map((p) => p.name);
      expect(names).toEqual(
        expect.arrayContaining([
          'gateway-access-v2',
          'case-ledger-cases-v2',
          'case-ledger-patient-cases',
          'conversation-messages',
          'patient-pathway',
          'workflow-engine-workflows-v2',
          'webhook-dispatcher-v3',
        ]),
      );
      expect(ndjson(list.stdout).every((p) => p.collections.length > 0)).toBe(true);

      const unknown = await svc(['rebuild', 'no-such-projection'], env());
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain('unknown projection no-such-projection');
      expect(unknown.stderr).toContain('case-ledger-cases-v2');
      const none = await svc(['rebuild'], env());
      expect(none.code).toBe(2);
      expect(none.stderr).toContain('--all');
      expect((await svc(['rebuild', '--all', 'patient-pathway'], env())).code).toBe(2);
    });

    it('refused while the service runs; with it stopped, a deleted read store is rebuilt and the restarted service answers the same', async () => {
      await app.start();
      const t = await app.tenant();
      const caseIds: string[] = [];
      for (let i = 0; i < 3; i++) {
        const c = await openCase(app, t, `Please review the medication plan ${i}`);
        caseIds.push(c.caseId);
        expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
        expect(
          (
            await app.api.post(
              `/v1/clinical-cases/${c.caseId}/messages`,
              { messageId: randomUUID(), message: `Take it with food ${i}`, externalReference: `ehr-${i}` },
              t.apiKey,
            )
          ).status,
        ).toBe(200);
      }
      expect((await app.api.post(`/organizations/${t.orgId}/environments/${t.sandbox}/api-keys`, { name: 'second' }, t.staff)).status).toBe(201);
      const before = await answers(t, caseIds);
      expect((before[caseIds[0]] as any).progress[0]).toBe(200);
      expect((before[caseIds[0]] as any).messages[1].messages ?? (before[caseIds[0]] as any).messages[1]).toBeTruthy();

      // The running service keeps its read store open: refused, nothing changed, the service still answers.
      const refused = await svc(['rebuild', '--all'], env());
      expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('open in another process') });
      expect(refused.stderr).toContain('open in another process');
      expect(await answers(t, caseIds)).toEqual(before);

      await app.stop();
      const list = ndjson((await svc(['rebuild', '--list', '--json'], env())).stdout) as { collections: string[] }[];
      const collections = list.flatMap((p) => p.collections);
      // What the live projections built, document by document (sealed fields opened).
      const live = storedDocs(collections);
      expect(live.length).toBeGreaterThan(10);
      expect(JSON.stringify(live)).toContain('"opened":"Take it with food 0"');
      expect(JSON.stringify(live)).not.toContain('"unopened"');
      for (const f of readStoreFiles()) rmSync(f, { force: true });

      const run = await svc(['rebuild', '--all', '--json'], env());
      expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
      const records = ndjson(run.stdout);
      const summary = records.find((r) => r.kind === 'summary');
      const progress = records.filter((r) => r.kind === 'progress');
      expect(progress.length).toBeGreaterThan(0);
      expect(progress[progress.length - 1]).toMatchObject({ position: summary.position, head: summary.position, etaSeconds: 0 });
      expect(progress[0]).toEqual(expect.objectContaining({ eventsPerSecond: expect.any(Number), events: expect.any(Number) }));
      expect(summary).toMatchObject({ projections: 7, eventsPerSecond: expect.any(Number) });
      expect(summary.events).toBeGreaterThan(20);
      const rebuilt = records.filter((r) => r.kind === 'rebuilt');
      expect(rebuilt.map((r) => r.projection).sort()).toEqual([
        'case-ledger-cases-v2',
        'case-ledger-patient-cases',
        'conversation-messages',
        'gateway-access-v2',
        'patient-pathway',
        'webhook-dispatcher-v3',
        'workflow-engine-workflows-v2',
      ]);
      expect(rebuilt.find((r) => r.projection === 'case-ledger-cases-v2').documents).toBeGreaterThanOrEqual(3);

      // The checkpoint of every projection is the log's head: the service starts from there.
      const db = new Database(readStoreFiles()[0], { readonly: true });
      const checkpoints = db.prepare('SELECT projection, position FROM checkpoints').all() as { projection: string; position: number }[];
      db.close();
      expect(checkpoints.length).toBe(7);
      expect(checkpoints.every((c) => c.position === summary.position)).toBe(true);
      // The rebuilt read models are the live ones, document by document.
      expect(storedDocs(collections)).toEqual(live);

      await app.start();
      expect(await answers(t, caseIds)).toEqual(before);
      // And it goes on from there: a new message is read back.
      expect(
        (
          await app.api.post(
            `/v1/clinical-cases/${caseIds[0]}/messages`,
            { messageId: randomUUID(), message: 'After the rebuild', externalReference: 'ehr-after' },
            t.apiKey,
          )
        ).status,
      ).toBe(200);
      const messagesAfter = await app.api.get(`/v1/conversations/${caseIds[0]}/messages`, t.apiKey);
      expect(messagesAfter.status).toBe(200);
      expect(JSON.stringify(messagesAfter.body)).toContain('After the rebuild');
      const beforeOne = await answers(t, caseIds);
      await app.stop();

      // One projection alone, as a table with a summary line; the others keep their documents.
      const one = await svc(['rebuild', 'case-ledger-patient-cases'], env());
      expect(one.code).toBe(0);
      expect(one.stdout).toContain('case-ledger-patient-cases');
      expect(one.stdout).not.toContain('gateway-access-v2');
      expect(one.stdout).toMatch(/rebuilt 1 read models from [\d,]+ events in [\d.]+ s \([\d,]+ events\/s\)/);
      await app.start();
      expect(await answers(t, caseIds)).toEqual(beforeOne);
    }, 300_000);
  },
);
