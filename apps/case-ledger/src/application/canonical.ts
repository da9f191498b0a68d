export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID_RE.test(v);

/**
 * An accepted date-time (dto.ts DATE_TIME_RE: ISO 8601 with a time zone) in RFC 3339 form, as
 * stored and returned: upper-case `T` and `Z`, the offset as `±hh:mm`, and `:00` seconds inserted
 * when the caller left them out (`2031-01-01t00:00+02` → `2031-01-01T00:00:00+02:00`): the same
 * instant in the same offset. A value already in that form is kept exactly as sent.
 */
export function toRfc3339(v: string): string {
  const m = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?([Zz]|[+-]\d{2}(?::?\d{2})?)$/.exec(v);
  if (!m) return v;
  let zone = m[4].toUpperCase();
  if (zone !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    zone = `${zone[0]}${digits.slice(0, 2)}:${digits.slice(2) || '00'}`;
  }
  return `${m[1]}T${m[2]}${m[3] ?? ':00'}${zone}`;
}
