import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Patterns } from '@svc/messaging';
import { TestApp, tempDataDir } from '@svc/testing';
import { busRequest, widgetToken } from './case-helpers';

// Before the app starts: the PHI-safe logger reads SVC_LOG_FILE when first used.
const logDir = tempDataDir('svc-case-log-');
const logFile = join(logDir, 'svc.log');
process.env.SVC_LOG_FILE = logFile;
process.env.SVC_LOG_LEVEL = 'debug';

const CANARY = {
  request: 'CANARY-STAFFREQ-7d1f chest pain',
  externalReference: 'CANARY-EXTREF-21ab',
  note: 'CANARY-NOTE-9c3e resolution text',
  provider: 'CANARY-PROVIDER-4e2a message',
  providerRef: 'CANARY-PROVREF-0b7c',
  inbound: 'CANARY-INBOUND-55d0 reply',
  externalMessageId: 'CANARY-EXTMSG-6f18',
  fileName: 'CANARY-FILE-a9e2.jpg',
  widget: 'CANARY-WIDGET-3b44 reply',
  patientNotes: 'CANARY-PATIENTNOTES-e1d7',
  errorCode: 'CANARY-ERRCODE-77aa',
  rule: 'CANARY-RULE-5c1e',
};
/** Clinical text that must not be in clear anywhere under the data dir either (docs/decisions.md, "Encryption at rest"). */
const AT_REST = [
  CANARY.request,
  CANARY.note,
  CANARY.provider,
  CANARY.inbound,
  CANARY.widget,
  CANARY.patientNotes,
  CANARY.fileName,
  CANARY.errorCode,
  CANARY.externalMessageId,
  CANARY.externalReference,
  CANARY.providerRef,
  CANARY.rule,
];

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push(p);
  }
  return out;
}

/** Issue 4, "Must show": canary values planted in bodies, notes and external ids never reach the log. */
describe('log canary: case and conversation PHI never logged', () => {
  const app = new TestApp();
  beforeAll(() => app.start());
  afterAll(() => app.stop());

  it('runs the whole case story with canaries and greps the log file', async () => {
    const t = await app.tenant();
    const { patientId, externalPatientId } = await app.enrolledPatient(t);
    const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: CANARY.request }, t.staff);
    expect(opened.status).toBe(201);
    const caseId = opened.body.caseId as string;
    const concern = await busRequest(app, Patterns.openClinicalCase, {
      requestId: randomUUID(),
      organizationId: t.orgId,
      environmentId: t.sandbox,
      patientId,
      source: 'patient_concern',
      priority: 'routine',
      patientNotes: CANARY.patientNotes,
      symptomScores: { note: CANARY.patientNotes },
      matchedRules: [`phrase:${CANARY.rule}`],
      stoppedEarly: false,
      actor: 'system',
    });
    // Matched rules are health information: encrypted at rest (checked below), shown to staff as matched.
    expect((await app.api.get(`${t.env}/clinical-cases/${concern.caseId}`, t.staff)).body.matchedRules).toEqual([`phrase:${CANARY.rule}`]);
    const up = (sequence: number, status: string, extra = {}) => ({
      updateId: randomUUID(),
      sequence,
      status,
      externalReference: CANARY.externalReference,
      ...extra,
    });
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/updates`, up(1, 'processed'), t.apiKey)).status).toBe(200);
    // refusals carrying canaries: 400, 409
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/updates`, { ...up(2, 'resolved'), resolutionNote: CANARY.note }, t.apiKey)).status).toBe(400);
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/updates`, up(5, 'scheduled', { scheduledFor: CANARY.note }), t.apiKey)).status).toBe(400);
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/updates`, up(9, 'clinician_responded'), t.apiKey)).status).toBe(409);
    const pm = { messageId: randomUUID(), message: CANARY.provider, externalReference: CANARY.providerRef };
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/messages`, pm, t.apiKey)).status).toBe(200);
    expect((await app.api.post(`/v1/clinical-cases/${caseId}/messages`, { ...pm, message: `${CANARY.provider} changed` }, t.apiKey)).status).toBe(409);
    const inbound = {
      requestId: randomUUID(),
      message: CANARY.inbound,
      externalMessageId: CANARY.externalMessageId,
      attachments: [{ id: randomUUID(), fileName: CANARY.fileName, contentType: 'image/jpeg', sha256: 'b'.repeat(64) }],
    };
    expect((await app.api.post(`/v1/conversations/${caseId}/messages`, inbound, t.apiKey)).status).toBe(201);
    expect((await app.api.post(`/v1/conversations/${caseId}/messages`, { ...inbound, message: 'x' }, t.apiKey)).status).toBe(409);
    expect((await app.api.post(`/v1/conversations/${caseId}/messages`, { ...inbound, message: '' }, t.apiKey)).status).toBe(400);
    const thread = await app.api.get(`/v1/conversations/${caseId}/messages?afterSequence=0`, t.apiKey);
    const provider = thread.body.messages.find((m: { sender: string }) => m.sender === 'provider');
    expect(
      (
        await app.api.post(
          `/v1/conversations/${caseId}/messages/${provider.id}/delivery`,
          { externalMessageId: CANARY.externalMessageId, status: 'failed', errorCode: CANARY.errorCode },
          t.apiKey,
        )
      ).status,
    ).toBe(201);
    // Encrypted at rest, shown as sent.
    const reported = (await app.api.get(`/v1/conversations/${caseId}/messages`, t.apiKey)).body.messages.find((m: { id: string }) => m.id === provider.id);
    expect(reported.delivery).toMatchObject({ status: 'failed', errorCode: CANARY.errorCode, externalMessageId: CANARY.externalMessageId });
    const token = await widgetToken(app, { organizationId: t.orgId, environmentId: t.sandbox, patientId, externalPatientId });
    expect((await app.api.post(`/widget/v1/cases/${caseId}/messages`, { message: CANARY.widget }, token)).status).toBe(201);
    expect(
      (await app.api.post(`/v1/clinical-cases/${caseId}/updates`, up(2, 'resolved', { resolutionOutcome: 'other', resolutionNote: CANARY.note }), t.apiKey))
        .status,
    ).toBe(200);
    expect((await app.api.get(`${t.env}/clinical-cases/${caseId}`, t.staff)).body.internalNote).toBe(CANARY.request);
    expect((await app.api.post(`/widget/v1/cases/${caseId}/messages`, { message: CANARY.widget }, token)).status).toBe(409);

    await app.stop();
    expect(existsSync(logFile)).toBe(true);
    const log = readFileSync(logFile, 'utf8');
    expect(log).toContain('/v1/clinical-cases/:caseId/updates'); // the log did capture the run
    for (const value of Object.values(CANARY)) expect(log).not.toContain(value.split(' ')[0]);
    // and nothing clinical in clear at rest
    for (const file of filesUnder(app.dataDir)) {
      const content = readFileSync(file).toString('latin1');
      for (const value of AT_REST) expect({ file, found: content.includes(value.split(' ')[0]) }).toEqual({ file, found: false });
    }
    await app.start();
  });
});
