export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID_RE.test(v);

/**
 * An accepted date-time (dto.ts DATE_TIME_RE) in RFC 3339 form, as stored and returned: `:00`
 * seconds inserted when the caller left them out (`2031-01-01T00:00Z` → `2031-01-01T00:00:00Z`),
 * same instant, same offset. A value with seconds is kept exactly as sent.
 */
export const withSeconds = (v: string): string => v.replace(/^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(?=Z$|[+-]\d{2}:\d{2}$)/, '$1:00');
