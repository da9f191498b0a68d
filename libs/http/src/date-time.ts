import { ValidateBy, ValidationOptions } from 'class-validator';

// The spec's "date-time" (ISO 8601 with a time zone), shared by every DTO that takes one.

/**
 * ISO 8601 date-time with a time zone (spec "date-time"), in the extended format: RFC 3339
 * (`T`/`Z` in either case, any number of fraction digits) and the ISO offsets `±hh` and `±hhmm`.
 */
export const DATE_TIME_RE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}(:?\d{2})?)$/;

/** A real date-time: the DATE_TIME_RE shape, and every part in range (month, day of that month, hour, minute, second, offset). */
export function isRealDateTime(v: unknown): boolean {
  if (typeof v !== 'string' || !DATE_TIME_RE.test(v)) return false;
  const t = toRfc3339(v);
  if (!Number.isFinite(Date.parse(t))) return false;
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(t)!;
  const [y, mo, d, h, mi, sec] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number);
  const utc = new Date(Date.UTC(y, mo - 1, d, h, mi, sec));
  const roundTrip =
    utc.getUTCFullYear() === y &&
    utc.getUTCMonth() === mo - 1 &&
    utc.getUTCDate() === d &&
    utc.getUTCHours() === h &&
    utc.getUTCMinutes() === mi &&
    utc.getUTCSeconds() === sec;
  const off = /([+-])(\d{2}):(\d{2})$/.exec(t);
  return roundTrip && (!off || (Number(off[2]) <= 23 && Number(off[3]) <= 59));
}

export const IsRealDateTime = (options?: ValidationOptions) =>
  ValidateBy(
    { name: 'isRealDateTime', validator: { validate: isRealDateTime, defaultMessage: () => '$property must be a real ISO 8601 date-time with a time zone' } },
    options,
  );

/**
 * An accepted date-time (DATE_TIME_RE: ISO 8601 with a time zone) in RFC 3339 form, as
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
