import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL, HashChainingEventStore, SqliteEventStore } from '@svc/eventstore';
import { TestApp } from '@svc/testing';
import { openCase, update } from './case-helpers';
import { Run, buildIfNeeded, ndjson, root, svc } from './svc-cli';

/**
 * Checkpoints of the global log and the chain migration (docs/audit.md), as an auditor sees them:
 * the package's real `svc` bin as a child process, against stores a running service filled over
 * HTTP and checkpointed in the background (SQLite data dir, PostgreSQL schema), then tampered with
 * SQL. The build runs first when dist is older than the sources; the bin is told not to build.
 */
/** A checkpoint every 4 events or every second: a short flow leaves several. */
const CHECKPOINTS = { SVC_CHAIN_CHECKPOINT_EVENTS: '4', SVC_CHAIN_CHECKPOINT_INTERVAL_S: '1' };

async function verifyAll(env: Record<string, string>): Promise<{ code: number | null; summary: any; lines: any[]; run: Run }> {
  const run = await svc(['verify', '--all', '--json'], env);
  const lines = ndjson(run.stdout);
  return { code: run.code, summary: lines.find((l) => l.kind === 'summary'), lines, run };
}

/** A case made over HTTP: a dozen events over several streams. */
async function caseFlow(app: TestApp) {
  const t = await app.tenant();
  const c = await openCase(app, t, 'Please review the medication plan');
  expect((await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey)).status).toBe(200);
  expect(
    (
      await app.api.post(
        `/v1/clinical-cases/${c.caseId}/messages`,
        { messageId: randomUUID(), message: 'Take it with food', externalReference: 'ehr-msg-1' },
        t.apiKey,
      )
    ).status,
  ).toBe(200);
  return { caseStream: `case-ledger-case-${c.caseId}`, conversationStream: `conversation-conversation-${c.caseId}` };
}

/** Waits until the running service's checkpoints cover the log up to `position`. */
async function checkpointedTo(env: Record<string, string>, position: number): Promise<any> {
  const until = Date.now() + 30_000;
  for (;;) {
    const { summary } = await verifyAll(env);
    if (summary?.checkpoints?.coveredTo >= position) return summary;
    if (Date.now() > until) throw new Error(`no checkpoint reached position ${position}: ${JSON.stringify(summary)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The position of the log's last event other than a checkpoint (checkpoints alone are covered by the next checkpoint that covers anything else). */
async function head(env: Record<string, string>): Promise<number> {
  return ndjson((await svc(['replay', '--all', '--json'], env)).stdout)
    .filter((e) => !e.streamId.startsWith('audit-checkpoint-'))
    .pop().position;
}

beforeAll(() => {
  buildIfNeeded();
  expect(existsSync(join(root, 'dist', 'apps', 'cli', 'src', 'main.js'))).toBe(true);
}, 600_000);

describe('checkpoints on the SQLite store of a standalone run', () => {
  const app = new TestApp(undefined, CHECKPOINTS);
  const env = () => ({ SVC_DATA_DIR: app.dataDir });
  const db = () => new Database(join(app.dataDir, 'events.sqlite'));
  let flow: Awaited<ReturnType<typeof caseFlow>>;
  let flowHead: number;

  beforeAll(async () => {
    await app.start();
    flow = await caseFlow(app);
    flowHead = await head(env());
  });
  afterAll(async () => {
    await app.stop();
    rmSync(app.dataDir, { recursive: true, force: true });
  });

  it('the running service writes checkpoints that chain to each other; verify --all recomputes them', async () => {
    const summary = await checkpointedTo(env(), flowHead);
    expect(summary).toMatchObject({ ok: true, issues: 0 });
    expect(summary.checkpoints.checkpoints).toBeGreaterThanOrEqual(2);
    expect(summary.checkpoints.firstBadCheckpoint).toBeNull();
    const cps = ndjson((await svc(['replay', '--category', 'checkpoints', '--json'], env())).stdout);
    expect(cps.length).toBe(summary.checkpoints.checkpoints);
    expect(cps.every((c) => c.streamId === 'audit-checkpoint-0' && c.type === 'ChainCheckpointRecorded' && c.sealed === false && c.actor === 'system')).toBe(
      true,
    );
    const data = (await svc(['replay', 'audit-checkpoint-0', '--json'], env())).stdout;
    expect(data).not.toContain('Please review');
    const human = await svc(['verify', '--all'], env());
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/\d+ checkpoints match the log up to position \d+/);
  });

  describe('after the service stopped, with events deleted with SQL', () => {
    beforeAll(() => app.stop());

    const rowAt = (sql: string, ...args: unknown[]) => {
      const h = db();
      try {
        return h.prepare(sql).get(...args) as Record<string, any>;
      } finally {
        h.close();
      }
    };
    const remove = (position: number) => {
      const h = db();
      h.prepare('DELETE FROM events WHERE position = ?').run(position);
      h.close();
    };
    const putBack = (row: Record<string, unknown>) => {
      const h = db();
      h.prepare(
        'INSERT INTO events (position, event_id, stream_id, revision, type, data, metadata) VALUES (@position, @event_id, @stream_id, @revision, @type, @data, @metadata)',
      ).run(row);
      h.close();
    };

    it("a stream's last event deleted before the last checkpoint: the per-stream chains cannot see it, the checkpoint names its range", async () => {
      // The conversation's last event, covered by a checkpoint (the flow's events all are).
      const last = rowAt('SELECT * FROM events WHERE stream_id = ? ORDER BY revision DESC LIMIT 1', flow.conversationStream);
      expect(last.position).toBeLessThanOrEqual(flowHead);
      remove(last.position);
      try {
        const { code, summary, lines } = await verifyAll(env());
        expect(code).toBe(1);
        expect(summary).toMatchObject({ ok: false, issues: 0, firstBadEvent: null });
        const { kind, ...bad } = lines.find((l) => l.kind === 'checkpoint-issue');
        expect(kind).toBe('checkpoint-issue');
        expect(bad).toEqual(summary.checkpoints.firstBadCheckpoint);
        expect(bad.afterPosition).toBeLessThan(last.position);
        expect(bad.toPosition).toBeGreaterThanOrEqual(last.position);
        expect(bad.reason).toContain('events were removed');
        const human = await svc(['verify', '--all'], env());
        expect(human.code).toBe(1);
        expect(human.stdout).toContain('TAMPERING EVIDENT');
        expect(human.stdout).toContain(
          `checkpoint ${bad.checkpoint} (position ${bad.checkpointPosition}), covering positions (${bad.afterPosition}, ${bad.toPosition}]`,
        );
      } finally {
        putBack(last);
      }
      expect((await verifyAll(env())).code).toBe(0);
    });

    it('an event deleted in the middle of a stream: verify names its checkpoint and range, and the next event of its stream', async () => {
      const middle = rowAt('SELECT * FROM events WHERE stream_id = ? AND revision = 1', flow.caseStream);
      remove(middle.position);
      try {
        const { code, summary } = await verifyAll(env());
        expect(code).toBe(1);
        expect(summary.firstBadEvent).toMatchObject({ streamId: flow.caseStream, revision: 2 });
        const cp = summary.checkpoints.firstBadCheckpoint;
        expect(cp.afterPosition).toBeLessThan(middle.position);
        expect(cp.toPosition).toBeGreaterThanOrEqual(middle.position);
        expect(cp.reason).toContain('1 of the');
      } finally {
        putBack(middle);
      }
      expect((await verifyAll(env())).code).toBe(0);
    });
  });
});

describe('checkpoints on the PostgreSQL store, two services on one schema', () => {
  const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  const schema = `svc_events_ckpt_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const settings = {
    EVENT_STORE: 'postgres',
    DATABASE_URL: url,
    EVENT_STORE_SCHEMA: schema,
    SVC_MASTER_KEY: randomBytes(32).toString('base64'),
    ...CHECKPOINTS,
  };
  const apps = [new TestApp(undefined, settings), new TestApp(undefined, settings)];
  const env = () => ({ EVENT_STORE: 'postgres', DATABASE_URL: url, EVENT_STORE_SCHEMA: schema, SVC_DATA_DIR: apps[0].dataDir });
  const sql = async <T extends Record<string, unknown>>(text: string, values: unknown[] = []): Promise<T[]> => {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<T>(text, values)).rows;
    } finally {
      await c.end();
    }
  };
  let flowHead: number;
  let flows: Awaited<ReturnType<typeof caseFlow>>[];

  beforeAll(async () => {
    for (const a of apps) await a.start();
    // Both services write, and both run the checkpoint job on the one log.
    flows = await Promise.all(apps.map((a) => caseFlow(a)));
    flowHead = await head(env());
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    for (const a of apps) rmSync(a.dataDir, { recursive: true, force: true });
  });

  it('each checkpoint is written once: numbers follow one another, each range starts where the one before ended; verify passes', async () => {
    const summary = await checkpointedTo(env(), flowHead);
    expect(summary).toMatchObject({ ok: true, issues: 0 });
    const rows = await sql<{ revision: number; data: string }>(
      `SELECT revision, data FROM "${schema}".events WHERE stream_id = 'audit-checkpoint-0' ORDER BY revision`,
    );
    const cps = rows.map((r) => ({ revision: r.revision, ...JSON.parse(r.data) }));
    expect(cps.length).toBeGreaterThanOrEqual(2);
    cps.forEach((c, i) => {
      expect(c.checkpoint).toBe(i);
      expect(c.revision).toBe(i);
      expect(c.afterPosition).toBe(i === 0 ? 0 : cps[i - 1].toPosition);
      expect(c.prevHash).toBe(i === 0 ? null : cps[i - 1].hash);
    });
  });

  it('an event deleted with SQL: verify fails naming the checkpoint and its range', async () => {
    for (const a of apps) await a.stop();
    const [target] = await sql<{ position: string }>(`SELECT position FROM "${schema}".events WHERE stream_id = $1 ORDER BY revision DESC LIMIT 1`, [
      flows[1].conversationStream,
    ]);
    const position = Number(target.position);
    await sql(`DELETE FROM "${schema}".events WHERE position = $1`, [position]);
    const { code, summary } = await verifyAll(env());
    expect(code).toBe(1);
    const cp = summary.checkpoints.firstBadCheckpoint;
    expect(cp).toMatchObject({ reason: expect.stringContaining('events were removed') });
    expect(cp.afterPosition).toBeLessThan(position);
    expect(cp.toPosition).toBeGreaterThanOrEqual(position);
    expect(cp.fromPosition).toBeLessThan(position);
    expect(cp.throughPosition).toBeGreaterThanOrEqual(position);
  });
});

describe('svc migrate-chain on a store written before the chain existed', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-migrate-chain-'));
  const file = join(dataDir, 'events.sqlite');
  const env = { SVC_DATA_DIR: dataDir };
  const meta = () => ({
    eventId: randomUUID(),
    correlationId: randomUUID(),
    causationId: null,
    organizationId: null,
    environmentId: null,
    actor: 'system',
    recordedAt: '2024-01-01T00:00:00.000Z',
  });

  beforeAll(async () => {
    // A previous version wrote three streams without the chain; the current one goes on with it.
    const raw = new SqliteEventStore(file, { writerThread: false, backgroundCheckpoint: false });
    for (let s = 0; s < 3; s++)
      await raw.append(
        `legacy-import-${s}`,
        [0, 1, 2].map((n) => ({ type: 'LegacyImported', data: { n }, metadata: meta() })),
        'no_stream',
      );
    const chained = new HashChainingEventStore(raw);
    await chained.append('legacy-import-0', [{ type: 'LegacyImported', data: { n: 3 }, metadata: meta() }], 2);
    await chained.append('current-1', [{ type: 'Current', data: {}, metadata: meta() }], 'no_stream');
    await raw.close();
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('anchors the unchained streams once (a second run appends nothing); verify then checks those events, and names one changed with SQL', async () => {
    let { summary } = await verifyAll(env);
    expect(summary).toMatchObject({ ok: true, unchained: 9, anchored: 0 });

    const dry = await svc(['migrate-chain', '--dry-run', '--json'], env);
    expect(dry.code).toBe(0);
    expect(ndjson(dry.stdout).pop()).toMatchObject({ kind: 'summary', dryRun: true, anchored: 0, wouldAnchor: 3, unchainedStreams: 3, unchainedEvents: 9 });
    expect((await verifyAll(env)).summary.anchored).toBe(0);

    const first = await svc(['migrate-chain', '--actor', 'auditor-m', '--json'], env);
    expect(first.code).toBe(0);
    const lines = ndjson(first.stdout);
    expect(lines.filter((l) => l.kind === 'anchored').map((l) => [l.streamId, l.toRevision])).toEqual([
      ['legacy-import-0', 2],
      ['legacy-import-1', 2],
      ['legacy-import-2', 2],
    ]);
    expect(lines.pop()).toMatchObject({ kind: 'summary', anchored: 3, alreadyAnchored: 0 });

    const second = await svc(['migrate-chain'], env);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('Nothing to anchor');
    const anchors = ndjson((await svc(['replay', '--category', 'chain-anchors', '--json'], env)).stdout);
    expect(anchors.map((a) => a.type)).toEqual(['ChainAnchored', 'ChainAnchored', 'ChainAnchored']);
    expect(anchors[0].actor).toMatch(/^auditor:auditor-m@/);

    ({ summary } = await verifyAll(env));
    expect(summary).toMatchObject({ ok: true, unchained: 9, anchored: 9 });
    const human = await svc(['verify', '--all'], env);
    expect(human.stdout).toContain("9 match the chain migration's anchors");

    // An event from before the chain, changed after the migration: named.
    const h = new Database(file);
    const row = h.prepare("SELECT position, data FROM events WHERE stream_id = 'legacy-import-1' AND revision = 1").get() as { position: number; data: string };
    h.prepare('UPDATE events SET data = ? WHERE position = ?').run(JSON.stringify({ n: 99 }), row.position);
    h.close();
    const tampered = await verifyAll(env);
    expect(tampered.code).toBe(1);
    expect(tampered.summary.firstBadEvent).toMatchObject({ streamId: 'legacy-import-1', revision: 2 });
    expect(tampered.summary.firstBadEvent.reason).toContain('do not match what the chain migration anchored');
  });
});
