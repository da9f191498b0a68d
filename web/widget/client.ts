/**
 * The widget's side of the widget API (docs/decisions.md, "Widget sessions and identity tokens"): a session, then messages to the patient
 * agent, and for a signed-in patient their cases and case threads. Every call goes through
 * `call` (../shared/http): Retry-After honoured on 409/429/503, writes retried only with their
 * Idempotency-Key. A session that ended (401 SESSION_REQUIRED) is opened again once and the call
 * repeated, with the same key.
 */
import { call, newKey, type Answer } from '../shared/http';

/** A fresh identity token from the caller's backend, or the one token the page was given. */
export type IdentitySource = string | (() => string | null | undefined | Promise<string | null | undefined>);

export interface Session {
  sessionToken: string;
  patientId: string | null;
  expiresAt: string;
}

export type OrderStatus = 'processing' | 'shipped' | 'delivered' | 'delayed' | 'cancelled';
export interface OrderCard {
  id: string;
  status: OrderStatus;
  statusLabel: string | null;
  carrier: string | null;
  trackingUrl: string | null;
  estimatedDelivery: string | null;
  placedAt: string | null;
  items: { name: string; quantity: number }[] | null;
}
export type Reply = { type: 'text'; text: string } | { type: 'orders'; orders: OrderCard[] } | { type: 'upload'; variable: string };
export interface MessageAnswer {
  conversationId: string;
  replies: Reply[];
  handedOff: boolean;
  caseReference?: string;
  emergency?: boolean;
}
export interface CaseItem {
  caseId: string;
  reference: string;
  status: string;
  openedAt: string;
  resolvedAt: string | null;
}
export interface ThreadMessage {
  id: string;
  sequence: number;
  sender: 'patient' | 'provider' | 'agent' | 'staff';
  message: string;
  createdAt: string;
}
export interface Attachment {
  id: string;
  fileName: string;
  contentType: string;
  sha256: string;
}

/** Why no signed-in session could be had (the widget then goes on anonymously). */
export type SignInProblem = 'identity_refused' | null;

export class WidgetClient {
  private session: Session | null = null;
  private opening: Promise<Session | null> | null = null;
  /** A string identity token opens one session only (docs/decisions.md, "Widget sessions and identity tokens"); after that, sessions are anonymous. */
  private tokenUsed = false;
  signInProblem: SignInProblem = null;
  /** Set when the environment cannot take the widget (unknown, or its organization has no BAA). */
  unavailable = false;

  constructor(
    private readonly apiBase: string,
    private readonly environmentId: string,
    private readonly identity: IdentitySource | null,
  ) {}

  get patientId(): string | null {
    return this.session?.patientId ?? null;
  }

  private async identityToken(): Promise<string | null> {
    if (this.identity === null) return null;
    if (typeof this.identity === 'string') {
      if (this.tokenUsed) return null;
      this.tokenUsed = true;
      return this.identity;
    }
    try {
      return (await this.identity()) || null;
    } catch {
      return null;
    }
  }

  /** The current session, or a new one (one opening at a time). */
  ensureSession(): Promise<Session | null> {
    if (this.session) return Promise.resolve(this.session);
    if (!this.opening) {
      this.opening = this.open().finally(() => {
        this.opening = null;
      });
    }
    return this.opening;
  }

  private async open(): Promise<Session | null> {
    const identityToken = await this.identityToken();
    let a = await call<Session>(`${this.apiBase}/widget/v1/sessions`, {
      body: { environmentId: this.environmentId, ...(identityToken ? { identityToken } : {}) },
    });
    if (identityToken && a.status === 401) {
      // The token was refused (expired, used, wrongly signed): chat on as an anonymous visitor.
      this.signInProblem = 'identity_refused';
      a = await call<Session>(`${this.apiBase}/widget/v1/sessions`, { body: { environmentId: this.environmentId } });
    }
    if (a.status === 201 && a.body) {
      this.session = a.body;
      return a.body;
    }
    if (a.status === 403 || a.status === 404 || a.status === 400) this.unavailable = true;
    return null;
  }

  /** A call with the session; a session that ended is opened again once. */
  private async withSession<T>(path: string, options: { body?: unknown; idempotencyKey?: string } = {}): Promise<Answer<T>> {
    for (let attempt = 0; ; attempt++) {
      const s = await this.ensureSession();
      if (!s) return { status: this.unavailable ? 403 : 0, body: null, code: null };
      const a = await call<T>(`${this.apiBase}${path}`, { ...options, token: s.sessionToken });
      if (a.status === 401 && a.code === 'SESSION_REQUIRED' && attempt === 0) {
        this.session = null;
        continue;
      }
      return a;
    }
  }

  send(message: string, idempotencyKey: string, attachments?: Attachment[]): Promise<Answer<MessageAnswer>> {
    return this.withSession<MessageAnswer>('/widget/v1/messages', { body: { message, ...(attachments ? { attachments } : {}) }, idempotencyKey });
  }

  cases(): Promise<Answer<{ clinicalCases: CaseItem[]; hasMore: boolean }>> {
    return this.withSession('/widget/v1/cases');
  }

  thread(caseId: string): Promise<Answer<{ messages: ThreadMessage[]; hasMore: boolean; closed: boolean }>> {
    return this.withSession(`/widget/v1/cases/${encodeURIComponent(caseId)}/messages?limit=500`);
  }

  reply(caseId: string, message: string, idempotencyKey: string): Promise<Answer<{ id: string; sequence: number }>> {
    return this.withSession(`/widget/v1/cases/${encodeURIComponent(caseId)}/messages`, { body: { message }, idempotencyKey });
  }
}

export { newKey };
