import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer, { Transporter } from 'nodemailer';
import { parseConnectionUrl } from 'nodemailer/lib/shared';
import { PRIVATE_FILE_MODE, ensurePrivateDir } from './private-files';

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

/** The message both mailers hand to nodemailer: its Message-ID from the email's id, so a resend is recognisable. */
function mailOf(email: OutgoingEmail, from: string, sentAt: Date) {
  return { from, to: email.to, subject: email.subject, text: email.text, html: email.html, messageId: `<${email.id}@svc.invalid>`, date: sentAt };
}

/**
 * Standalone mail: nodemailer renders the message to an `.eml` file in `<dataDir>/outbox`,
 * with a JSON sidecar for `GET /dev/outbox`. Emails never carry clinical content, but a check-in
 * email's link is a live credential: the folder is 0700 and its files 0600.
 */
export class OutboxMailer implements Mailer {
  private readonly transport: Transporter;
  constructor(
    private readonly dir: string,
    private readonly from: string,
  ) {
    ensurePrivateDir(dir);
    this.transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
  }

  async send(email: OutgoingEmail, sentAt: Date): Promise<void> {
    const base = join(this.dir, email.id.replace(/[^a-zA-Z0-9_-]/g, '_'));
    if (existsSync(`${base}.json`)) return;
    const info = await this.transport.sendMail(mailOf(email, this.from, sentAt));
    writeFileSync(`${base}.eml`, info.message as Buffer, { mode: PRIVATE_FILE_MODE });
    const stored: StoredEmail = { ...email, sentAt: sentAt.toISOString() };
    writeFileSync(`${base}.json.tmp`, JSON.stringify(stored), { mode: PRIVATE_FILE_MODE });
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

/**
 * Why an SMTP URL would hand messages over in plain text, or null when it cannot: TLS from the
 * first byte (`smtps://`), or `smtp://` with `requireTLS=true` (STARTTLS, and no message when the
 * server does not offer it). nodemailer's own reading of the URL decides, so that what is checked
 * is what the transport does.
 */
export function smtpTlsProblem(url: string): string | null {
  const options = parseConnectionUrl(url) as { secure?: unknown; requireTLS?: unknown; ignoreTLS?: unknown; direct?: unknown };
  if (!/^smtps?:\/\//i.test(url) || options.direct) return 'it must be an smtps:// or smtp:// URL';
  if (options.secure === true) return null;
  if (options.ignoreTLS) return 'ignoreTLS turns STARTTLS off';
  if (options.requireTLS !== true) return 'an smtp:// URL needs requireTLS=true (STARTTLS required), or use smtps://';
  return null;
}

/** Whether an SMTP URL turns the check of the server's certificate off (`tls.rejectUnauthorized=false`). */
export function smtpCertificateUnchecked(url: string): boolean {
  const tls = (parseConnectionUrl(url) as { tls?: { rejectUnauthorized?: unknown } }).tls;
  return tls?.rejectUnauthorized === false;
}

/** Distributed mail over SMTP (`SMTP_URL`). */
export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;
  /** `requireTls` (production mode, docs/decisions.md, "Deployment safety"): a URL that would send in plain text is refused here too. */
  constructor(
    url: string,
    private readonly from: string,
    options: { requireTls?: boolean } = {},
  ) {
    const problem = options.requireTls ? smtpTlsProblem(url) : null;
    if (problem) throw new Error(`SMTP_URL must use TLS in production mode: ${problem}`);
    // Bounded: a check-in email is sent in its patient's turn (a cancellation waits for it), so a
    // mail server that stalls must not hold it for nodemailer's default minutes. Settings in the
    // URL's query (`?socketTimeout=…`) still win.
    this.transport = nodemailer.createTransport({
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
      ...parseConnectionUrl(url),
    });
  }

  async send(email: OutgoingEmail, sentAt: Date): Promise<void> {
    await this.transport.sendMail(mailOf(email, this.from, sentAt));
  }

  async list(): Promise<StoredEmail[]> {
    return [];
  }
}
