// Over 400 lines: the audit CLI against one data set on SQLite and PostgreSQL.
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL } from '@svc/eventstore';
import { TestApp } from '@svc/testing';
import { openCase, update } from './case-helpers';
import { Run, buildIfNeeded, ndjson, root, svc } from './svc-cli';

/**
 * The audit CLI (`svc`, docs/audit.md) as an auditor runs it: the package's real bin as a child
 * process, against stores filled by the service over HTTP (the SQLite data dir of a standalone
 * run, and PostgreSQL in a schema of its own), while the service runs and after it stopped.
 * The build runs first when dist is older than the sources; the bin is then told not to build.
 */

/** A case made over HTTP with planted PHI canaries: the request text and a provider message. */
async function caseFlow(app: TestApp) {
  const t = await app.tenant();
  const canary = `canary-audit-${randomUUID()}`;
  const c = await openCase(app, t, `Please review the medication plan ${canary}-request`);
  const processed = await app.api.post(`/v1/clinical-cases/${c.caseId}/updates`, update(1, 'processed'), t.apiKey);
  expect(processed.status).toBe(200);
  const message = await app.api.post(
    `/v1/clinical-cases/${c.caseId}/messages`,
    { messageId: randomUUID(), message: `Take it with food ${canary}-message`, externalReference: 'ehr-msg-1' },
    t.apiKey,
  );
  expect(message.status).toBe(200);
  return { t, canary, ...c, caseStream: `case-ledger-case-${c.caseId}`, conversationStream: `conversation-conversation-${c.caseId}` };
}

beforeAll(() => {
  buildIfNeeded();
  expect(existsSync(join(root, 'dist', 'apps', 'cli', 'src', 'main.js'))).toBe(true);
}, 600_000);

/** The decrypting reads recorded so far (read with the CLI itself: the audit stream's data is in clear). */
async function decryptingReads(env: Record<string, string>): Promise<any[]> {
  const r = await svc(['replay', '--category', 'decrypting-reads', '--json'], env);
  expect(r.code).toBe(0);
  return ndjson(r.stdout);
}

describe('svc audit CLI on the SQLite data dir of a standalone run', () => {
  // No checkpoint of the global log during the suite (one would cover the event the anchor test removes: audit-checkpoints.e2e-spec.ts).
  const app = new TestApp(undefined, { SVC_CHAIN_CHECKPOINT_INTERVAL_S: '86400' });
  const env = () => ({ SVC_DATA_DIR: app.dataDir });
  let flow: Awaited<ReturnType<typeof caseFlow>>;
  const db = () => new Database(join(app.dataDir, 'events.sqlite'));

  beforeAll(async () => {
    await app.start();
    flow = await caseFlow(app);
  });
  afterAll(async () => {
    await app.stop();
    rmSync(app.dataDir, { recursive: true, force: true });
  });

  it('--help on every command; a usage problem is exit code 2', async () => {
    for (const cmd of [[], ['streams'], ['replay'], ['history'], ['verify']]) {
      const r = await svc([...cmd, '--help'], env());
      expect({ cmd, code: r.code }).toEqual({ cmd, code: 0 });
      expect(r.stdout).toContain('Usage: svc');
    }
    expect((await svc(['replay', '--all', flow.caseStream], env())).code).toBe(2);
    expect((await svc(['history', 'invoice', flow.caseId], env())).code).toBe(2);
    const missing = await svc(['streams'], { SVC_DATA_DIR: join(app.dataDir, 'nowhere') });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no event store at');
    expect(existsSync(join(app.dataDir, 'nowhere'))).toBe(false);
  });

  it('streams: every stream with its event count and last position (table and NDJSON), by category and tenant', async () => {
    const json = ndjson((await svc(['streams', '--json'], env())).stdout);
    const caseRow = json.find((s) => s.streamId === flow.caseStream);
    const replayed = ndjson((await svc(['replay', flow.caseStream, '--json'], env())).stdout);
    expect(caseRow).toMatchObject({
      category: 'case',
      events: replayed.length,
      lastPosition: replayed[replayed.length - 1].position,
      lastRevision: replayed.length - 1,
      organizationId: flow.t.orgId,
      environmentId: flow.t.sandbox,
    });
    expect(caseRow.chained).toBe(caseRow.events);
    expect(json.map((s) => s.streamId)).toEqual(
      expect.arrayContaining([flow.caseStream, flow.conversationStream, `patient-pathway-patient-${flow.patientId}`]),
    );

    const cases = ndjson((await svc(['streams', '--category', 'case', '--json'], env())).stdout);
    expect(cases.map((s) => s.streamId)).toEqual([flow.caseStream]);
    expect(ndjson((await svc(['streams', '--org', randomUUID(), '--json'], env())).stdout)).toEqual([]);
    const tenant = ndjson((await svc(['streams', '--org', flow.t.orgId, '--env', flow.t.sandbox, '--json'], env())).stdout);
    expect(tenant.every((s) => s.organizationId === flow.t.orgId && s.environmentId === flow.t.sandbox)).toBe(true);

    const table = await svc(['streams', '--category', 'case-ledger-case'], env());
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/Stream.*Events.*Last rev.*Last pos.*Last event/);
    expect(table.stdout).toContain(flow.caseStream);
    expect(table.stdout).toMatch(/1 streams, \d+ events/);
  });

  it('replay: events in order with type, time, actor, correlation, causation and tenant; encrypted payloads hidden, no PHI', async () => {
    const r = await svc(['replay', flow.caseStream, '--json'], env());
    expect(r.code).toBe(0);
    const events = ndjson(r.stdout);
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['CaseRegistered', 'clinical_case.opened', 'CaseUpdateAccepted', 'ProviderMessageAccepted']),
    );
    expect(events.map((e) => e.revision)).toEqual(events.map((_, i) => i));
    for (const e of events) {
      expect(e).toMatchObject({ streamId: flow.caseStream, sealed: true, organizationId: flow.t.orgId, environmentId: flow.t.sandbox });
      expect(e.recordedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
      expect(e.actor).toMatch(/^(staff:|api-key:|system)/);
      expect(e.correlationId).toMatch(/^[0-9a-f-]{36}$/);
      expect('causationId' in e).toBe(true);
      expect(e.data).toBeUndefined();
    }
    expect(events.find((e) => e.type === 'CaseRegistered').actor).toBe(`staff:${flow.t.ownerSub}`);
    expect(r.stdout).not.toContain(flow.canary);

    const human = await svc(['replay', flow.caseStream], env());
    expect(human.stdout).toMatch(/Pos.*Stream.*Rev.*Time.*Type.*Actor.*Correlation.*Causation.*Tenant/);
    expect(human.stdout).toContain('clinical_case.opened');
    expect(human.stdout).toContain('payloads encrypted at rest, not shown');
    expect(human.stdout).not.toContain(flow.canary);

    const all = await svc(['replay', '--all', '--json'], env());
    const log = ndjson(all.stdout);
    expect(log.length).toBeGreaterThan(events.length);
    expect(log.map((e) => e.position)).toEqual([...log.map((e) => e.position)].sort((a, b) => a - b));
    expect(all.stdout).not.toContain(flow.canary);
    expect(all.stdout).not.toContain('Canary-First');
    // Bounds: positions, and time.
    const [second, third] = [events[1].position, events[2].position];
    expect(
      ndjson((await svc(['replay', flow.caseStream, '--from', String(second), '--to', String(third), '--json'], env())).stdout).map((e) => e.position),
    ).toEqual(events.filter((e) => e.position >= second && e.position <= third).map((e) => e.position));
    expect(ndjson((await svc(['replay', '--category', 'case', '--since', '2999-01-01', '--json'], env())).stdout)).toEqual([]);
    expect(ndjson((await svc(['replay', '--category', 'case', '--json'], env())).stdout).map((e) => e.position)).toEqual(events.map((e) => e.position));
  });

  it('--decrypt is refused without an actor or without the master key, and nothing is recorded or opened', async () => {
    const before = (await decryptingReads(env())).length;
    const noActor = await svc(['replay', flow.caseStream, '--decrypt'], env());
    expect(noActor.code).toBe(2);
    expect(noActor.stderr).toContain('--actor');
    expect(noActor.stdout).toBe('');

    const keyFile = join(app.dataDir, 'master.key');
    renameSync(keyFile, `${keyFile}.away`);
    let noKey: Run;
    try {
      noKey = await svc(['replay', flow.caseStream, '--decrypt', '--actor', 'auditor-a'], env());
    } finally {
      renameSync(`${keyFile}.away`, keyFile);
    }
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('needs the master key');
    expect(noKey.stdout).toBe('');
    expect(noKey.stdout + noKey.stderr).not.toContain(flow.canary);
    expect((await decryptingReads(env())).length).toBe(before);
  });

  it('--decrypt opens the payloads after recording the read (who, when, which streams) in the audit stream; the running service goes on', async () => {
    const head = ndjson((await svc(['replay', '--all', '--json'], env())).stdout).pop().position;
    const r = await svc(['replay', flow.caseStream, '--decrypt', '--actor', 'auditor-a', '--json'], env());
    expect(r.code).toBe(0);
    const events = ndjson(r.stdout);
    expect(events.find((e) => e.type === 'CaseRegistered').data.internalNote).toContain(`${flow.canary}-request`);
    expect(events.find((e) => e.type === 'ProviderMessageAccepted').data.message).toContain(`${flow.canary}-message`);
    // Only the case stream's events: the audit event itself is beyond what the run reads.
    expect(events.every((e) => e.streamId === flow.caseStream && e.position <= head)).toBe(true);

    const reads = await decryptingReads(env());
    const last = reads[reads.length - 1];
    expect(last.streamId).toMatch(/^audit-decrypt-\d{4}-\d{2}$/);
    expect(last.type).toBe('DecryptingReadRecorded');
    expect(last.sealed).toBe(false);
    expect(last.actor).toBe('auditor:auditor-a');
    expect(last.position).toBeGreaterThan(head);
    expect(last.data).toMatchObject({
      actor: 'auditor-a',
      command: 'replay',
      streams: [flow.caseStream],
      upToPosition: head,
      selection: { stream: flow.caseStream },
    });
    expect(typeof last.data.osUser).toBe('string');
    expect(last.data.osUser.length).toBeGreaterThan(0);
    expect(Date.parse(last.data.startedAt)).toBeGreaterThan(Date.now() - 60_000);
    // SVC_AUDIT_ACTOR stands for --actor.
    expect((await svc(['replay', flow.caseStream, '--decrypt'], { ...env(), SVC_AUDIT_ACTOR: 'auditor-b' })).code).toBe(0);
    expect((await decryptingReads(env())).pop().data.actor).toBe('auditor-b');
    // The service, which follows the same log, still serves and writes.
    expect(
      (await app.api.post(`/v1/clinical-cases/${flow.caseId}/updates`, update(2, 'scheduled', { scheduledFor: '2030-01-01T10:00:00Z' }), flow.t.apiKey)).status,
    ).toBe(200);
    expect((await app.api.get(`/v1/clinical-cases/${flow.caseId}/progress`, flow.t.apiKey)).body).toMatchObject({ status: 'scheduled', nextSequence: 3 });
  });

  it('--decrypt shows nothing when the read cannot be recorded', async () => {
    const handle = db();
    handle.exec("CREATE TRIGGER refuse_audit BEFORE INSERT ON events WHEN NEW.stream_id LIKE 'audit-%' BEGIN SELECT RAISE(ABORT, 'audit stream refused'); END");
    handle.close();
    let r: Run;
    try {
      r = await svc(['replay', flow.caseStream, '--decrypt', '--actor', 'auditor-a'], env());
    } finally {
      const h = db();
      h.exec('DROP TRIGGER refuse_audit');
      h.close();
    }
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('could not be recorded');
    expect(r.stderr).not.toContain(flow.canary);
  });

  it("history: one timeline of a case across its streams in the contract's words; --decrypt finds a patient's case through payloads", async () => {
    const r = await svc(['history', 'case', flow.caseId], env());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`History of case ${flow.caseId}`);
    for (const phrase of [
      'case registered',
      'clinical_case.opened — case opened',
      'case update accepted',
      'conversation started',
      'provider message to the patient accepted',
    ])
      expect(r.stdout).toContain(phrase);
    expect(r.stdout).toContain(flow.caseStream);
    expect(r.stdout).toContain(flow.conversationStream);
    expect(r.stdout).not.toContain(flow.canary);
    const json = ndjson((await svc(['history', 'case', flow.caseId, '--json'], env())).stdout);
    expect(new Set(json.map((e) => e.streamId))).toEqual(new Set([flow.caseStream, flow.conversationStream]));
    expect(json.map((e) => e.position)).toEqual([...json.map((e) => e.position)].sort((a, b) => a - b));
    expect(json.find((e) => e.type === 'ConversationStarted')).toMatchObject({ what: 'conversation started', category: 'conversation', sealed: true });
    // A case's conversation has the case's id: its history is the same timeline.
    expect(ndjson((await svc(['history', 'conversation', flow.caseId, '--json'], env())).stdout).map((e) => e.position)).toEqual(json.map((e) => e.position));

    // The patient's stream names no case; its payloads do.
    const plain = ndjson((await svc(['history', 'patient', flow.patientId, '--json'], env())).stdout);
    expect(plain.map((e) => e.streamId)).not.toContain(flow.caseStream);
    const opened = await svc(['history', 'patient', flow.patientId, '--decrypt', '--actor', 'auditor-c', '--json'], env());
    expect(opened.code).toBe(0);
    const full = ndjson(opened.stdout);
    expect(full.map((e) => e.streamId)).toEqual(expect.arrayContaining([`patient-pathway-patient-${flow.patientId}`, flow.caseStream]));
    expect((await decryptingReads(env())).pop().data).toMatchObject({
      actor: 'auditor-c',
      command: 'history',
      selection: { kind: 'patient', id: flow.patientId },
    });
  });

  it('verify: the chain of every stream matches, with the events checked per second', async () => {
    const r = await svc(['verify', '--all', '--json'], env());
    expect(r.code).toBe(0);
    const [summary] = ndjson(r.stdout);
    expect(summary).toMatchObject({ kind: 'summary', ok: true, issues: 0, unchained: 0, firstBadEvent: null, chainedFrom: 1 });
    expect(summary.chained).toBe(summary.events);
    expect(summary.eventsPerSecond).toBeGreaterThan(0);
    const human = await svc(['verify', '--all'], env());
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/OK: \d+ events up to position \d+ match their hash chain/);
    expect(human.stdout).toMatch(/events\/s/);
    expect((await svc(['verify', flow.caseStream], env())).code).toBe(0);
    const missing = await svc(['verify', `case-ledger-case-${randomUUID()}`], env());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such stream');
  });

  describe('after the service stopped, with the log tampered with in SQLite', () => {
    beforeAll(() => app.stop());

    const row = (streamId: string, revision: number) => {
      const h = db();
      try {
        return h.prepare('SELECT position, data, metadata FROM events WHERE stream_id = ? AND revision = ?').get(streamId, revision) as {
          position: number;
          data: string;
          metadata: string;
        };
      } finally {
        h.close();
      }
    };
    const set = (position: number, column: 'data' | 'metadata', value: string) => {
      const h = db();
      try {
        h.prepare(`UPDATE events SET ${column} = ? WHERE position = ?`).run(value, position);
      } finally {
        h.close();
      }
    };

    it('one changed byte of a sealed payload: verify exits 1 naming that event; other streams still verify', async () => {
      const target = row(flow.caseStream, 2);
      const sealed = JSON.parse(target.data);
      sealed.ct = (sealed.ct[5] === 'A' ? sealed.ct.slice(0, 5) + 'B' : sealed.ct.slice(0, 5) + 'A') + sealed.ct.slice(6);
      set(target.position, 'data', JSON.stringify(sealed));
      try {
        const r = await svc(['verify', '--all', '--json'], env());
        expect(r.code).toBe(1);
        const lines = ndjson(r.stdout);
        const summary = lines.find((l) => l.kind === 'summary');
        const eventId = JSON.parse(target.metadata).eventId;
        expect(summary).toMatchObject({ ok: false, issues: 1, firstBadEvent: { streamId: flow.caseStream, revision: 2, position: target.position, eventId } });
        expect(summary.firstBadEvent.reason).toContain('hash does not match');
        const human = await svc(['verify', '--all'], env());
        expect(human.code).toBe(1);
        expect(human.stdout).toContain('TAMPERING EVIDENT');
        expect(human.stdout).toContain(`${flow.caseStream} revision 2 at position ${target.position} (event ${eventId})`);
        expect((await svc(['verify', flow.caseStream], env())).code).toBe(1);
        expect((await svc(['verify', flow.conversationStream], env())).code).toBe(0);
      } finally {
        set(target.position, 'data', target.data);
      }
      expect((await svc(['verify', '--all'], env())).code).toBe(0);
    });

    it('a changed actor in the metadata: verify names that event', async () => {
      const target = row(flow.conversationStream, 1);
      set(target.position, 'metadata', target.metadata.replace(/"actor":"[^"]*"/, '"actor":"staff:mallory"'));
      try {
        const r = await svc(['verify', '--all', '--json'], env());
        expect(r.code).toBe(1);
        expect(ndjson(r.stdout).find((l) => l.kind === 'summary').firstBadEvent).toMatchObject({
          streamId: flow.conversationStream,
          revision: 1,
          position: target.position,
        });
      } finally {
        set(target.position, 'metadata', target.metadata);
      }
    });

    it('events removed from the end of a stream after the last checkpoint: only a saved anchor tells', async () => {
      const anchors = join(mkdtempSync(join(tmpdir(), 'svc-anchor-')), 'anchors.json');
      expect((await svc(['verify', '--all', '--save-anchor', anchors], env())).code).toBe(0);
      expect(JSON.parse(readFileSync(anchors, 'utf8')).streams[flow.caseStream]).toMatchObject({
        revision: expect.any(Number),
        hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      const last = ndjson((await svc(['replay', flow.caseStream, '--json'], env())).stdout).pop();
      const h = db();
      const saved = h.prepare('SELECT * FROM events WHERE position = ?').get(last.position) as Record<string, unknown>;
      h.prepare('DELETE FROM events WHERE position = ?').run(last.position);
      h.close();
      try {
        expect((await svc(['verify', '--all'], env())).code).toBe(0);
        const r = await svc(['verify', '--all', '--anchor', anchors], env());
        expect(r.code).toBe(1);
        expect(r.stdout).toContain('events were removed');
        expect(r.stdout).toContain(flow.caseStream);
      } finally {
        const h2 = db();
        h2.prepare(
          'INSERT INTO events (position, event_id, stream_id, revision, type, data, metadata) VALUES (@position, @event_id, @stream_id, @revision, @type, @data, @metadata)',
        ).run(saved);
        h2.close();
      }
      expect((await svc(['verify', '--all', '--anchor', anchors], env())).code).toBe(0);
    });
  });
});

describe('svc audit CLI on the PostgreSQL event store', () => {
  const url = process.env.DATABASE_URL || DEFAULT_DATABASE_URL;
  const schema = `svc_events_audit_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const masterKey = randomBytes(32).toString('base64');
  // The key is given (as in production), so the data dir holds none.
  const app = new TestApp(undefined, { EVENT_STORE: 'postgres', DATABASE_URL: url, EVENT_STORE_SCHEMA: schema, SVC_MASTER_KEY: masterKey });
  const env = () => ({ EVENT_STORE: 'postgres', DATABASE_URL: url, EVENT_STORE_SCHEMA: schema, SVC_DATA_DIR: app.dataDir });
  let flow: Awaited<ReturnType<typeof caseFlow>>;
  const sql = async <T extends Record<string, unknown>>(text: string, values: unknown[] = []): Promise<T[]> => {
    const c = new Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<T>(text, values)).rows;
    } finally {
      await c.end();
    }
  };

  beforeAll(async () => {
    await app.start();
    flow = await caseFlow(app);
  });
  afterAll(async () => {
    await app.stop();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    rmSync(app.dataDir, { recursive: true, force: true });
  });

  it('replay and history read the schema of the running service, without PHI', async () => {
    const r = await svc(['replay', flow.caseStream, '--json'], env());
    expect(r.code).toBe(0);
    const events = ndjson(r.stdout);
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['CaseRegistered', 'clinical_case.opened', 'CaseUpdateAccepted', 'ProviderMessageAccepted']),
    );
    expect(events.every((e) => e.sealed && e.data === undefined && e.organizationId === flow.t.orgId)).toBe(true);
    expect(r.stdout).not.toContain(flow.canary);
    const h = await svc(['history', 'case', flow.caseId], env());
    expect(h.code).toBe(0);
    expect(h.stdout).toContain('clinical_case.opened — case opened');
    expect(h.stdout).toContain(flow.conversationStream);
    const streams = ndjson((await svc(['streams', '--category', 'case', '--json'], env())).stdout);
    expect(streams).toEqual([expect.objectContaining({ streamId: flow.caseStream, events: events.length })]);
  });

  it('a schema that does not exist is an error, and is not created', async () => {
    const other = `${schema}_none`;
    const r = await svc(['streams'], { ...env(), EVENT_STORE_SCHEMA: other });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`no event store in schema ${other}`);
    expect(await sql('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [other])).toEqual([]);
  });

  it('--decrypt needs SVC_MASTER_KEY here; with it, the read is recorded in PostgreSQL before the payloads are shown', async () => {
    const refused = await svc(['replay', flow.caseStream, '--decrypt', '--actor', 'auditor-pg'], env());
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('needs the master key');
    expect(await sql(`SELECT 1 FROM "${schema}".events WHERE stream_id LIKE 'audit-%'`)).toEqual([]);

    const r = await svc(['replay', flow.caseStream, '--decrypt', '--actor', 'auditor-pg', '--json'], { ...env(), SVC_MASTER_KEY: masterKey });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`${flow.canary}-message`);
    const [audit] = await sql<{ data: string; metadata: string; position: string }>(
      `SELECT data, metadata, position FROM "${schema}".events WHERE stream_id LIKE 'audit-decrypt-%'`,
    );
    expect(JSON.parse(audit.data)).toMatchObject({ actor: 'auditor-pg', command: 'replay', streams: [flow.caseStream] });
    expect(JSON.parse(audit.metadata)).toMatchObject({ actor: 'auditor:auditor-pg', prevHash: null, hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(Math.max(...ndjson(r.stdout).map((e) => e.position))).toBeLessThan(Number(audit.position));

    // An append that fails: nothing is shown.
    await sql(
      `CREATE FUNCTION "${schema}".refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.stream_id LIKE 'audit-%' THEN RAISE EXCEPTION 'audit refused'; END IF; RETURN NEW; END $$`,
    );
    await sql(`CREATE TRIGGER refuse_audit BEFORE INSERT ON "${schema}".events FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_audit()`);
    try {
      const failed = await svc(['replay', flow.caseStream, '--decrypt', '--actor', 'auditor-pg'], { ...env(), SVC_MASTER_KEY: masterKey });
      expect(failed.code).toBe(2);
      expect(failed.stdout).toBe('');
      expect(failed.stderr).toContain('could not be recorded');
    } finally {
      await sql(`DROP TRIGGER refuse_audit ON "${schema}".events`);
    }
  });

  it('verify passes, then names the event whose payload or metadata was changed with SQL', async () => {
    expect((await svc(['verify', '--all'], env())).code).toBe(0);
    const [target] = await sql<{ position: string; data: string; metadata: string }>(
      `SELECT position, data, metadata FROM "${schema}".events WHERE stream_id = $1 AND revision = 1`,
      [flow.caseStream],
    );
    const position = Number(target.position);
    const eventId = JSON.parse(target.metadata).eventId;
    for (const [column, value] of [
      ['metadata', target.metadata.replace(/"recordedAt":"[^"]*"/, '"recordedAt":"2020-01-01T00:00:00.000Z"')],
      ['data', target.data.replace(/"tag":"(.)/, (_m, ch: string) => `"tag":"${ch === 'A' ? 'B' : 'A'}`)],
    ] as const) {
      await sql(`UPDATE "${schema}".events SET ${column} = $1 WHERE position = $2`, [value, position]);
      try {
        const r = await svc(['verify', '--all', '--json'], env());
        expect({ column, code: r.code }).toEqual({ column, code: 1 });
        expect(ndjson(r.stdout).find((l) => l.kind === 'summary').firstBadEvent).toMatchObject({ streamId: flow.caseStream, revision: 1, position, eventId });
      } finally {
        await sql(`UPDATE "${schema}".events SET ${column} = $1 WHERE position = $2`, [column === 'data' ? target.data : target.metadata, position]);
      }
    }
    expect((await svc(['verify', '--all'], env())).code).toBe(0);
  });
});
