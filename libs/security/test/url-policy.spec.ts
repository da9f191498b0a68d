import { LookupAddress } from 'node:dns';
import { LookupFunction } from 'node:net';
import { addressProblem, guardedLookup, isBlockedAddress } from '@svc/security';

/**
 * The production address policy of webhook endpoints and Destinations: only public unicast space.
 * Special-purpose blocks (IANA's registries) are refused whatever they are for: documentation,
 * benchmarking, Teredo, discard-only, deprecated site-local, the reserved 240.0.0.0/4, broadcast.
 */
describe('isBlockedAddress: only public unicast addresses', () => {
  const refused: [string, string][] = [
    ['fec0::1', 'deprecated site-local fec0::/10'],
    ['feff:ffff::1', 'deprecated site-local, top of the block'],
    ['2001::1', 'Teredo 2001::/32'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo with an embedded server and client'],
    ['100::1', 'discard-only 100::/64'],
    ['100::ffff:ffff:ffff:ffff', 'discard-only, top of the block'],
    ['2001:db8::1', 'documentation 2001:db8::/32'],
    ['2001:db8:ffff::1', 'documentation, inside the block'],
    ['3fff::1', 'documentation 3fff::/20'],
    ['2001:2::1', 'benchmarking 2001:2::/48'],
    ['2001:10::1', 'ORCHID 2001:10::/28'],
    ['5f00::1', 'segment routing 5f00::/16'],
    ['4000::1', 'outside global unicast 2000::/3'],
    ['198.51.100.7', 'TEST-NET-2 198.51.100.0/24'],
    ['203.0.113.9', 'TEST-NET-3 203.0.113.0/24'],
    ['192.0.2.1', 'TEST-NET-1 192.0.2.0/24'],
    ['240.0.0.1', 'reserved 240.0.0.0/4'],
    ['250.1.2.3', 'reserved 240.0.0.0/4, inside'],
    ['255.255.255.255', 'limited broadcast'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['::ffff:198.51.100.7', 'IPv4-mapped documentation address'],
    ['::ffff:f000:1', 'IPv4-mapped 240.0.0.1, hex notation'],
  ];
  it.each(refused)('refuses %s (%s)', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  // What was refused before stays refused (loopback, private, link-local, CGNAT, multicast, NAT64, 6to4, IPv4-compatible, SIIT).
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '::',
    '::1',
    'fe80::1',
    'fd00::1',
    'ff02::1',
    '64:ff9b::a00:1',
    '64:ff9b:1::a00:1',
    '2002::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::127.0.0.1',
    '::ffff:0:7f00:1',
    'not an address',
    '127.1',
  ])('still refuses %s', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  it.each([
    ['93.184.216.34', 'public IPv4'],
    ['8.8.8.8', 'public IPv4'],
    ['198.51.99.1', 'just below TEST-NET-2'],
    ['203.0.114.1', 'just above TEST-NET-3'],
    ['2606:4700::1111', 'public IPv6'],
    ['2a00:1450:4001:82b::200e', 'public IPv6'],
    ['2001:4860:4860::8888', 'public IPv6 in 2001::/16 outside the special blocks'],
    ['::ffff:5db8:d822', 'IPv4-mapped public address: the embedded address decides'],
    ['::ffff:93.184.216.34', 'IPv4-mapped public address, dotted'],
  ])('allows %s (%s)', (address, why) => {
    expect([address, why, isBlockedAddress(address)]).toEqual([address, why, false]);
  });
});

describe('every caller refuses the special-purpose blocks', () => {
  it('URL check at creation (webhook endpoint url, Destination baseUrl), production only', async () => {
    for (const host of ['[fec0::1]', '[2001::1]', '[100::1]', '[2001:db8::1]', '198.51.100.7', '203.0.113.9', '240.0.0.1', '255.255.255.255']) {
      expect([host, await addressProblem(`https://${host}/hook`, true)]).toEqual([host, 'address_refused']);
      expect([host, await addressProblem(`https://${host}/hook`, false)]).toEqual([host, null]);
    }
    expect(await addressProblem('https://93.184.216.34/hook', true)).toBeNull();
  });

  it('DNS answer checked at connect time', async () => {
    const answer = (addresses: LookupAddress[]) => (_h: string, _o: unknown, cb: (err: NodeJS.ErrnoException | null, a: LookupAddress[]) => void) =>
      setImmediate(() => cb(null, addresses));
    const call = (lookup: LookupFunction) =>
      new Promise<NodeJS.ErrnoException | null>((resolve) =>
        (lookup as (h: string, o: object, cb: (err: NodeJS.ErrnoException | null) => void) => void)('hook.example', { all: true }, (err) => resolve(err)),
      );
    for (const a of [
      { address: '2001:db8::5', family: 6 },
      { address: 'fec0::1', family: 6 },
      { address: '2001::1', family: 6 },
      { address: '203.0.113.9', family: 4 },
    ]) {
      expect([a.address, (await call(guardedLookup(answer([{ address: '93.184.216.34', family: 4 }, a]))))?.code]).toEqual([a.address, 'ESVCBLOCKED']);
    }
    expect(
      await call(
        guardedLookup(
          answer([
            { address: '93.184.216.34', family: 4 },
            { address: '2606:4700::1111', family: 6 },
          ]),
        ),
      ),
    ).toBeNull();
  });
});
