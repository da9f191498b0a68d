import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { BlockList, LookupFunction, isIP } from 'node:net';

/**
 * Addresses a production webhook or Destination call may not reach: loopback, private, link-local, CGNAT, multicast,
 * unspecified, and the IPv6 prefixes that embed an IPv4 address a gateway would reach for us
 * (NAT64 64:ff9b::/96, 6to4 2002::/16: refused whole, whatever they embed).
 */
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48], // local-use NAT64
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['2002::', 16],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (isIP already said it is one), dotted IPv4 tails included. */
function hextets(address: string): number[] {
  let a = address.toLowerCase();
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  if (v4) a = a.slice(0, v4.index) + [((+v4[1] << 8) | +v4[2]).toString(16), ((+v4[3] << 8) | +v4[4]).toString(16)].join(':');
  const [head, tail] = a.includes('::') ? a.split('::') : [a, undefined];
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.map((g) => parseInt(g, 16));
}

export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const g = hextets(address);
    const zeros = (n: number) => g.slice(0, n).every((x) => x === 0);
    // IPv4-compatible ::a.b.c.d (deprecated; the first 96 bits zero, :: and ::1 included) and SIIT
    // ::ffff:0:a.b.c.d: refused whole, whatever they embed (a translator on the path would reach it).
    if (zeros(6)) return true;
    if (zeros(4) && g[4] === 0xffff && g[5] === 0) return true;
    // IPv4-mapped ::ffff:a.b.c.d, in either notation (the WHATWG URL parser writes [::ffff:127.0.0.1]
    // as [::ffff:7f00:1]): the embedded IPv4 address decides.
    if (zeros(5) && g[5] === 0xffff) return blocked.check(`${g[6] >> 8}.${g[6] & 255}.${g[7] >> 8}.${g[7] & 255}`, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true;
}

export type UrlProblem = 'invalid' | 'https_required' | 'credentials_in_url' | 'address_refused' | 'unresolvable';

/** Syntax rules (every mode): http(s), no user info. Production: https only. */
export function urlSyntaxProblem(raw: string, production: boolean): UrlProblem | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'invalid';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'invalid';
  if (production && url.protocol !== 'https:') return 'https_required';
  if (url.username || url.password) return 'credentials_in_url';
  return null;
}

/** Production: the host (and every address it resolves to) must be public. Standalone allows anything. */
export async function addressProblem(raw: string, production: boolean): Promise<UrlProblem | null> {
  if (!production) return null;
  const host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) return isBlockedAddress(host) ? 'address_refused' : null;
  if (host === 'localhost' || host.endsWith('.localhost')) return 'address_refused';
  try {
    const addresses = await lookup(host, { all: true, verbatim: true });
    if (addresses.length === 0) return 'unresolvable';
    return addresses.some((a) => isBlockedAddress(a.address)) ? 'address_refused' : null;
  } catch {
    return 'unresolvable';
  }
}

/** What `guardedLookup` resolves with (node:dns `lookup` with `all: true`; replaceable in tests). */
export type Resolver = (hostname: string, options: { all: true; family?: number; hints?: number }, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

const systemResolver: Resolver = (hostname, options, callback) => dnsLookup(hostname, { ...options, verbatim: true }, callback);

/**
 * A `lookup` for the socket of a production delivery: the addresses are checked when the socket
 * connects, on the very answer it connects to, so a DNS answer that changes between a check and
 * the connection (rebinding) cannot reach a blocked address. Any blocked address in the answer
 * refuses the connection (error code `ESVCBLOCKED`). Serves both lookup shapes: `all: true` (what
 * net asks for with autoSelectFamily, Node 20's default) and a single address.
 */
export function guardedLookup(resolve: Resolver = systemResolver): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number; hints?: number }, callback: (...args: unknown[]) => void) => {
    const family = typeof options?.family === 'number' ? options.family : undefined;
    resolve(hostname, { all: true, ...(family ? { family } : {}), ...(options?.hints ? { hints: options.hints } : {}) }, (err, addresses) => {
      if (err) return callback(err, options?.all ? [] : '', 0);
      if (!addresses || addresses.length === 0) return callback(Object.assign(new Error('host name does not resolve'), { code: 'ENOTFOUND' }), options?.all ? [] : '', 0);
      if (addresses.some((a) => isBlockedAddress(a.address))) return callback(Object.assign(new Error('address not allowed'), { code: 'ESVCBLOCKED' }), options?.all ? [] : '', 0);
      if (options?.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  }) as LookupFunction;
}

/** The 400 detail message of a URL problem (webhook endpoint `url`, Destination `baseUrl`). */
export function urlProblemMessage(problem: UrlProblem): string {
  switch (problem) {
    case 'https_required':
      return 'must be an https URL';
    case 'credentials_in_url':
      return 'must not contain a user name or password';
    case 'address_refused':
      return 'must not point to a loopback, private or link-local address';
    case 'unresolvable':
      return 'host name does not resolve';
    default:
      return 'must be an http(s) URL';
  }
}
