import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { StandaloneProcess, tempDataDir } from '@svc/testing';
import { DAY, created, emailsTo, link, protocolBody, sleep, waitForEmails } from '../../apps/patient-pathway/test/e2e-helpers';

/** T2: kill -9 between enrolment and the due check-in: after the restart, exactly one email and one check_in.sent. */
describe('patient pathway survives kill -9 (built standalone process)', () => {
  const dataDir = tempDataDir('svc-pathway-restart-');
  let proc = new StandaloneProcess(dataDir);
  afterAll(() => proc.kill9());

  it('sends the due check-in exactly once after a kill -9', async () => {
    await proc.start();
    const api = proc.api;
    const staff = (await api.post('/dev/staff-tokens', { sub: 'owner-pathway-restart', email: 'owner@example.test' })).body.idToken as string;
    const org = (await api.post('/organizations', { name: 'Restart Clinic' }, staff)).body;
    const sandbox = org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    const env = `/organizations/${org.id}/environments/${sandbox}`;
    const key = (await api.post(`${env}/api-keys`, { name: 'k' }, staff)).body.key as string;
    expect((await api.post(`/organizations/${org.id}/baa`, { signerName: 'A', signerTitle: 'B' }, staff)).status).toBe(201);
    const protocol = (await api.post(`${env}/protocols`, protocolBody('kill-program'), staff)).body;
    expect((await api.post(`${env}/protocols/${protocol.id}/activate`, undefined, staff)).status).toBe(200);
    const email = `kill-${randomUUID()}@example.test`;
    const original = created('EXT-KILL', email, { checkInCadenceDays: 1 });
    const enrolled = await api.post('/client/patient-events', original, key);
    expect(enrolled.status).toBe(202);

    await proc.kill9();
    proc = new StandaloneProcess(dataDir);
    await proc.start();
    // The original body after the restart: a duplicate with the same patientId.
    expect((await proc.api.post('/client/patient-events', original, key)).body).toEqual({
      accepted: true,
      duplicate: true,
      patientId: enrolled.body.patientId,
    });
    await proc.api.post('/dev/clock', { advanceSeconds: DAY + 60 });
    const emails = await waitForEmails(proc.api, email, 1, 10000);
    expect(emails).toHaveLength(1);
    const { checkInId } = link(emails[0].text);
    await sleep(2500);
    expect(await emailsTo(proc.api, email)).toHaveLength(1);
    await proc.kill9();

    // Counted in the streams (the outbox would hide a second send: it dedupes by id).
    const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
    try {
      const count = (stream: string, type: string) =>
        (db.prepare('SELECT COUNT(*) AS n FROM events WHERE stream_id = ? AND type = ?').get(stream, type) as { n: number }).n;
      expect(count(`patient-pathway-checkin-${checkInId}`, 'check_in.sent')).toBe(1);
      expect(count(`patient-pathway-checkin-${checkInId}`, 'CheckInSendClaimed')).toBe(1);
      expect(count(`patient-pathway-patient-${enrolled.body.patientId}`, 'CheckInSent')).toBe(1);
    } finally {
      db.close();
    }
  });
});
