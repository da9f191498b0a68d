/**
 * The console's calls: the public staff API under `/api`, with the signed-in user's ID token,
 * through the pages' shared client (Retry-After on 429/503, Idempotency-Key retries). Refusals are
 * turned into sentences that say what is missing.
 */
import { Answer, CallOptions, call } from '../shared/http';

export interface Problem {
  status: number;
  code: string | null;
  message: string;
  /** VALIDATION_FAILED's details: `[{ path, message }]` (activation's blockers add their `code`). */
  details: { path: string; message: string; code?: string }[];
  /** A conflict's own message from the service, when the explanation above replaces it (it names the revision or the version's state). */
  said?: string;
}

export type Result<T> = { ok: true; status: number; body: T } | { ok: false; problem: Problem };

const EXPLAINED: Record<string, string> = {
  MFA_REQUIRED:
    'This change needs a recent multi-factor sign-in: your token has no "mfa" sign-in method, or it was more than an hour ago. Sign out and sign in again with multi-factor authentication.',
  PERMISSION_REQUIRED:
    'Your sign-in does not carry the "integrations.manage" permission that integration set-up needs. Ask your identity administrator to grant it, then sign in again.',
  ROLE_REQUIRED:
    'Your role in this organization does not allow this: integration set-up, members and the BAA need the role owner or admin (an admin cannot change an owner). Ask an owner.',
  STAFF_AUTH_REQUIRED: 'Your sign-in has expired or was not accepted. Sign in again.',
  BAA_REQUIRED: 'The organization has not signed the Business Associate Agreement yet: sign it on the Organization page first.',
  NOT_FOUND: 'Not found, or you are not a member of this organization.',
  LAST_OWNER: 'The organization must keep at least one owner: add another owner first.',
  STALE_REVISION: 'Someone saved this draft after you opened it.',
  DUPLICATE_KEY: 'That key is already taken in this environment (stable keys and program keys are unique per environment): choose another.',
  VERSION_LOCKED:
    'This version can no longer change: only a draft can be saved or discarded (a live or retired version stays as it was), and a workflow’s only draft goes by deleting the workflow.',
  WORKFLOW_ARCHIVED: 'The workflow is archived: it cannot be edited, tested or switched on until it is restored. Restore it first.',
  WORKFLOW_EVER_LIVE: 'This workflow has been live, so it cannot be deleted (its versions and runs are kept): archive it instead.',
  OUT_OF_ORDER: 'The patient’s pathway is cancelled: no check-in can be sent until the patient is enrolled again.',
  USAGE_PAUSED: 'Check-ins and workflow runs are paused: the organization has used this month’s credits. They resume with the next period or a larger plan.',
  RATE_LIMITED: 'Too many requests: wait a moment and try again.',
};

export function explain(a: Answer<unknown>): Problem {
  const body = (a.body ?? {}) as { message?: string; details?: { path: string; message: string }[] };
  const own = a.code ? EXPLAINED[a.code] : undefined;
  const message =
    a.status === 0 ? 'The service could not be reached. Check your connection and try again.' : (own ?? body.message ?? `The service answered ${a.status}.`);
  const said = a.status === 409 && own && body.message && body.message !== own ? body.message : undefined;
  return { status: a.status, code: a.code, message, details: Array.isArray(body.details) ? body.details : [], ...(said ? { said } : {}) };
}

export class Api {
  constructor(
    private readonly token: string,
    private readonly onSignedOut: () => void,
  ) {}

  async send<T>(path: string, options: CallOptions = {}): Promise<Result<T>> {
    const a = await call<T>(`/api${path}`, { ...options, token: this.token });
    if (a.status >= 200 && a.status < 300) return { ok: true, status: a.status, body: a.body as T };
    if (a.status === 401 && a.code === 'STAFF_AUTH_REQUIRED') this.onSignedOut();
    return { ok: false, problem: explain(a) };
  }

  get<T>(path: string) {
    return this.send<T>(path);
  }
  post<T>(path: string, body: unknown = {}) {
    return this.send<T>(path, { method: 'POST', body });
  }
  put<T>(path: string, body: unknown) {
    return this.send<T>(path, { method: 'PUT', body });
  }
  del<T>(path: string) {
    return this.send<T>(path, { method: 'DELETE' });
  }
}

/** The dev issuer (dev tools only): a staff token for any subject. */
export async function devToken(sub: string, email: string, mfa: boolean): Promise<Result<{ idToken: string }>> {
  const a = await call<{ idToken: string }>('/api/dev/staff-tokens', { body: { sub, email, mfa } });
  return a.status === 201 && a.body ? { ok: true, status: 201, body: a.body } : { ok: false, problem: explain(a) };
}
