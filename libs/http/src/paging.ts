import { Keyring, decryptString, encryptString } from '@svc/security';
import { ApiError } from './errors';

/**
 * Bounded lists (docs/decisions.md, "Bounded lists"): every list that can grow without bound is read
 * a page at a time, as a range of its read model, with a `limit` the caller may choose within bounds.
 */
export interface LimitBounds {
  default: number;
  max: number;
}

/** `GET /v1/conversations/{id}/messages`: 1-500, 100 by default (with `afterSequence`, answering `hasMore`). */
export const MESSAGE_PAGE_LIMIT: LimitBounds = { default: 100, max: 500 };
/** Staff lists (clinical cases, webhook deliveries, workflow runs): 1-200, 50 by default (with `cursor`, answering `nextCursor`). */
export const STAFF_PAGE_LIMIT: LimitBounds = { default: 50, max: 200 };

/** The `limit` query parameter: absent → the default; else a decimal integer from 1 to `max`, or 400 naming `limit`. */
export function pageLimit(raw: unknown, bounds: LimitBounds): number {
  if (raw === undefined) return bounds.default;
  if (typeof raw !== 'string' || !/^[0-9]{1,6}$/.test(raw) || Number(raw) < 1 || Number(raw) > bounds.max) {
    throw ApiError.validation([{ path: 'limit', message: `limit must be an integer from 1 to ${bounds.max}` }]);
  }
  return Number(raw);
}

/** Where a page ended in its read model: the last item's score and key (the read store's `page` `after`). */
export interface PagePosition {
  score: number;
  key: string;
}

/** Longest `cursor` looked at (a sealed position is about 150 characters). */
const MAX_CURSOR_LENGTH = 1024;
/** The sealed envelope: `v1.<iv: 12 bytes>.<tag: the full 16 bytes>.<ciphertext>`, base64url (a shortened tag is refused). */
const SEALED = /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]+$/;
const MAX_KEY_LENGTH = 200;

/**
 * Opaque list cursors: a page's end position sealed (AES-256-GCM under a service key of its own)
 * together with the list it belongs to (`scope`: the list's name, environment and partition, e.g.
 * `webhook-deliveries|<envId>|<endpointId>|delivered`). A caller cannot read one (scores can be
 * internal numbers such as log positions), forge one, or use one on another list, environment or
 * organization: `open` answers 400 `VALIDATION_FAILED` naming `cursor` for anything but a cursor this
 * list handed out.
 */
export class ListCursors {
  private readonly key: Buffer;

  constructor(keyring: Keyring) {
    this.key = keyring.serviceKey('list-cursor');
  }

  seal(scope: string, at: PagePosition): string {
    return encryptString(this.key, JSON.stringify({ s: scope, o: at.score, k: at.key }));
  }

  /** The position in `raw` (the `cursor` query parameter), undefined when there is none. */
  open(raw: unknown, scope: string): PagePosition | undefined {
    if (raw === undefined) return undefined;
    const invalid = () => ApiError.validation([{ path: 'cursor', message: 'cursor must be a nextCursor answered by this same list' }]);
    if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_CURSOR_LENGTH || !SEALED.test(raw)) throw invalid();
    let sealed: unknown;
    try {
      sealed = JSON.parse(decryptString(this.key, raw));
    } catch {
      throw invalid();
    }
    const { s, o, k } = (sealed ?? {}) as { s?: unknown; o?: unknown; k?: unknown };
    if (s !== scope || typeof o !== 'number' || !Number.isFinite(o) || typeof k !== 'string' || k.length === 0 || k.length > MAX_KEY_LENGTH) throw invalid();
    return { score: o, key: k };
  }
}
