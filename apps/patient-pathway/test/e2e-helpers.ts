import { randomUUID } from 'node:crypto';
import { Api, TestApp } from '@svc/testing';

/** Helpers shared by the patient-pathway e2e specs (test/e2e/patient-pathway*.e2e-spec.ts). */
export const DAY = 86_400;

export function protocolBody(programKey: string, extra: Record<string, unknown> = {}) {
  return {
    programKey,
    name: 'Post-op recovery',
    defaultCadenceDays: 7,
    questions: [
      { key: 'pain', text: 'How bad is your pain today?', type: 'scale', min: 0, max: 10 },
      { key: 'mood', text: 'How is your mood?', type: 'scale', min: 0, max: 10, higherIsBetter: true },
      { key: 'fever', text: 'Do you have a fever?', type: 'yes_no' },
      { key: 'other', text: 'Anything else?', type: 'text' },
    ],
    redFlags: {
      scores: [
        { question: 'pain', tier: 'urgent', op: '>=', value: 7 },
        { question: 'mood', tier: 'routine', op: '<=', value: 2 },
      ],
      phrases: [{ phrase: 'wound is leaking', tier: 'urgent' }],
      semanticPhrases: [{ phrase: 'leg swelling', tier: 'urgent' }],
      emergencyTerms: true,
    },
    ...extra,
  };
}

export async function setUpTenant(app: TestApp, programKey = 'post-op', activate = true) {
  const t = await app.tenant();
  const p = await app.api.post(`${t.env}/protocols`, protocolBody(programKey), t.staff);
  if (p.status !== 201) throw new Error(`protocol: ${p.status} ${p.text}`);
  if (activate) {
    const a = await app.api.post(`${t.env}/protocols/${p.body.id}/activate`, undefined, t.staff);
    if (a.status !== 200) throw new Error(`activate: ${a.status} ${a.text}`);
  }
  return { ...t, protocol: p.body };
}

export function created(externalPatientId: string, email: string, extra: Record<string, unknown> = {}) {
  return {
    eventId: randomUUID(),
    type: 'patient.created',
    externalPatientId,
    email,
    firstName: 'Ana',
    lastName: 'García',
    dateOfBirth: '1980-02-29',
    phone: '+15550001111',
    ...extra,
  };
}

export async function emailsTo(api: Api, to: string): Promise<{ id: string; to: string; subject: string; text: string; html: string; sentAt: string }[]> {
  const r = await api.get(`/dev/outbox?to=${encodeURIComponent(to)}`);
  return r.body.emails;
}

export async function waitForEmails(api: Api, to: string, count: number, timeoutMs = 8000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const emails = await emailsTo(api, to);
    if (emails.length >= count || Date.now() > until) return emails;
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function link(text: string): { checkInId: string; token: string; url: string } {
  const m = /(https?:\/\/\S+\/check-ins\/([0-9a-f-]{36})\?token=([A-Za-z0-9_-]+))/.exec(text);
  if (!m) throw new Error('no check-in link in the email');
  return { url: m[1], checkInId: m[2], token: m[3] };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
