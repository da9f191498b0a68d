import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/** Addresses a production webhook may not reach: loopback, private, link-local, CGNAT, multicast, unspecified. */
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
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return blocked.check(mapped[1], 'ipv4');
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
