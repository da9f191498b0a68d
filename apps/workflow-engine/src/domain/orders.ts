/** The order lookup response contract (spec "order_lookup.requested") and the cards shown. Pure. */
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

const STATUSES = ['processing', 'shipped', 'delivered', 'delayed', 'cancelled'];
const DATE = /^\d{4}-\d{2}-\d{2}$/;
/** ISO 8601 date-time; `estimatedDelivery` needs the time zone, `placedAt` may leave it out (spec Order item). */
const DATE_TIME_ZONED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * A string of min-max characters as the spec counts them: Unicode code points (an emoji is one),
 * not UTF-16 units (a string no longer than `max` units is within it without counting).
 */
export const charsBetween = (v: string, min: number, max: number) => v.length >= min && (v.length <= max || [...v].length <= max);

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const optStr = (v: unknown, max: number) => v === undefined || v === null || (typeof v === 'string' && charsBetween(v, 0, max));
/** The calendar date of a `YYYY-MM-DD...` value exists (Date.parse rolls 2024-02-30 over to March 1). */
function realCalendarDate(v: string): boolean {
  const y = Number(v.slice(0, 4));
  const m = Number(v.slice(5, 7));
  const d = Number(v.slice(8, 10));
  const t = new Date(Date.UTC(y, m - 1, d));
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}
const optDate = (v: unknown, zoneRequired: boolean) =>
  v === undefined ||
  v === null ||
  (typeof v === 'string' && (DATE.test(v) || (zoneRequired ? DATE_TIME_ZONED : DATE_TIME).test(v)) && !Number.isNaN(Date.parse(v)) && realCalendarDate(v));

/** Tracking link shown only when https with no user name or password. */
export function safeTrackingUrl(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  try {
    const u = new URL(v);
    return u.protocol === 'https:' && !u.username && !u.password ? v : null;
  } catch {
    return null;
  }
}

/** The orders of a contract-conforming body, or null when it breaks the contract. */
export function parseOrdersResponse(body: unknown): OrderCard[] | null {
  if (!isObj(body) || !Array.isArray(body.orders) || body.orders.length > 50) return null;
  const out: OrderCard[] = [];
  for (const o of body.orders) {
    if (!isObj(o)) return null;
    if (typeof o.id !== 'string' || !charsBetween(o.id, 1, 64)) return null;
    if (!STATUSES.includes(o.status as string)) return null;
    if (!optStr(o.statusLabel, 80) || !optStr(o.carrier, 60) || !optStr(o.trackingUrl, 2000)) return null;
    if (!optDate(o.estimatedDelivery, true) || !optDate(o.placedAt, false)) return null;
    let items: OrderCard['items'] = null;
    if (o.items !== undefined && o.items !== null) {
      if (!Array.isArray(o.items) || o.items.length > 20) return null;
      items = [];
      for (const it of o.items) {
        if (!isObj(it) || typeof it.name !== 'string' || !charsBetween(it.name, 1, 120)) return null;
        if (typeof it.quantity !== 'number' || !Number.isInteger(it.quantity) || it.quantity < 1 || it.quantity > 999) return null;
        items.push({ name: it.name, quantity: it.quantity });
      }
    }
    out.push({
      id: o.id,
      status: o.status as OrderStatus,
      statusLabel: (o.statusLabel as string | null | undefined) ?? null,
      carrier: (o.carrier as string | null | undefined) ?? null,
      trackingUrl: safeTrackingUrl(o.trackingUrl),
      estimatedDelivery: (o.estimatedDelivery as string | null | undefined) ?? null,
      placedAt: (o.placedAt as string | null | undefined) ?? null,
      items,
    });
  }
  return out;
}

/** At most three, latest first when every order has placedAt (else the caller's order). */
export function ordersToShow(orders: OrderCard[]): OrderCard[] {
  const sorted = orders.every((o) => o.placedAt) ? [...orders].sort((a, b) => Date.parse(b.placedAt!) - Date.parse(a.placedAt!)) : orders;
  return sorted.slice(0, 3);
}
