import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer, { Transporter } from 'nodemailer';
import { parseConnectionUrl } from 'nodemailer/lib/shared';

export interface OutgoingEmail {
  /** Stable id (the id of the event that caused it): sending twice writes one outbox entry. */
  id: string;
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface StoredEmail extends OutgoingEmail {
  sentAt: string;
}

export interface Mailer {
  send(email: OutgoingEmail, sentAt: Date): Promise<void>;
  /** Outbox only (dev tools): emails, newest last. */
  list(to?: string): Promise<StoredEmail[]>;
}

export const MAILER = Symbol('MAILER');

/**
 * Standalone mail: nodemailer renders the message to an `.eml` file in `<dataDir>/outbox`,
 * with a JSON sidecar for `GET /dev/outbox`. Emails never carry clinical content.
 */
export class OutboxMailer implements Mailer {
  private readonly transport: Transporter;
  constructor(
    private readonly dir: string,
    private readonly from: string,
  ) {
    mkdirSync(dir, { recursive: true });
    this.transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  }

  async send(email: OutgoingEmail, sentAt: Date): Promise<void> {
    const base = join(this.dir, email.id.replace(/[^a-zA-Z0-9_-]/g, '_'));
    if (existsSync(`${base}.json`)) return;
    const info = await this.transport.sendMail({ from: this.from, to: email.to, subject: email.subject, text: email.text, html: email.html, messageId: `<${email.id}@svc.invalid>`, date: sentAt });
    writeFileSync(`${base}.eml`, info.message as Buffer);
    const stored: StoredEmail = { ...email, sentAt: sentAt.toISOString() };
    writeFileSync(`${base}.json.tmp`, JSON.stringify(stored));
    renameSync(`${base}.json.tmp`, `${base}.json`);
  }

  async list(to?: string): Promise<StoredEmail[]> {
    const out: StoredEmail[] = [];
    for (const f of readdirSync(this.dir)) {
      if (!f.endsWith('.json')) continue;
      const e = JSON.parse(readFileSync(join(this.dir, f), 'utf8')) as StoredEmail;
      if (!to || e.to.toLowerCase() === to.toLowerCase()) out.push(e);
    }
    return out.sort((a, b) => a.sentAt.localeCompare(b.sentAt) || a.id.localeCompare(b.id));
  }
}

/** Longest wait for the SMTP server at each step (connect, greeting, any socket read or write). */
export const SMTP_TIMEOUT_MS = 10_000;

/** Distributed mail over SMTP (`SMTP_URL`). */
export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;
  constructor(
    url: string,
    private readonly from: string,
  ) {
    // Bounded: a check-in email is sent in its patient's turn (a cancellation waits for it), so a
    // mail server that stalls must not hold it for nodemailer's default minutes. Settings in the
    // URL's query (`?socketTimeout=…`) still win.
    this.transport = nodemailer.createTransport({ connectionTimeout: SMTP_TIMEOUT_MS, greetingTimeout: SMTP_TIMEOUT_MS, socketTimeout: SMTP_TIMEOUT_MS, ...parseConnectionUrl(url) });
  }

  async send(email: OutgoingEmail, sentAt: Date): Promise<void> {
    await this.transport.sendMail({ from: this.from, to: email.to, subject: email.subject, text: email.text, html: email.html, messageId: `<${email.id}@svc.invalid>`, date: sentAt });
  }

  async list(): Promise<StoredEmail[]> {
    return [];
  }
}
