import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { LookupFunction, isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * IPv6 global unicast space (RFC 4291 section 2.4, 2000::/3): every public IPv6 address IANA hands
 * out lies in it. Outside it is only special or unassigned space (the IPv4-compatible ::/96 among
 * it), which a public webhook receiver never uses.
 */
const IPV6_GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];

/**
 * Whether a production webhook or Destination call may not reach an address: anything but public
 * unicast space. ipaddr.js names every special-purpose block of IANA's registries (`range()`), and
 * only its `unicast` (what no special block holds) is allowed: loopback, private, link-local,
 * CGNAT, multicast, broadcast, unspecified, reserved (240.0.0.0/4), documentation (192.0.2.0/24,
 * 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20), benchmarking, unique-local,
 * deprecated site-local (fec0::/10), discard-only (100::/64), Teredo (2001::/32), 6to4, NAT64 and
 * SIIT (which embed an IPv4 address a gateway would reach for us, refused whatever they embed),
 * ORCHID, AMT, AS112 are all refused; an IPv6 address must also lie in 2000::/3. An IPv4-mapped
 * address (::ffff:a.b.c.d, in either notation: the WHATWG URL parser writes [::ffff:127.0.0.1] as
 * [::ffff:7f00:1]) is decided by the IPv4 address it maps. Anything that is not an IP address
 * (isIP: dotted-quad IPv4 only, so "127.1" and "0x7f000001" are refused here) is refused.
 */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  try {
    if (family === 4) return ipaddr.IPv4.parse(address).range() !== 'unicast';
    const v6 = ipaddr.IPv6.parse(address);
    const range = v6.range();
    if (range === 'ipv4Mapped') return v6.toIPv4Address().range() !== 'unicast';
    return range !== 'unicast' || !v6.match(IPV6_GLOBAL_UNICAST);
  } catch {
    return true;
  }
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
export type Resolver = (
  hostname: string,
  options: { all: true; family?: number; hints?: number },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

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
      if (!addresses || addresses.length === 0)
        return callback(Object.assign(new Error('host name does not resolve'), { code: 'ENOTFOUND' }), options?.all ? [] : '', 0);
      if (addresses.some((a) => isBlockedAddress(a.address)))
        return callback(Object.assign(new Error('address not allowed'), { code: 'ESVCBLOCKED' }), options?.all ? [] : '', 0);
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
