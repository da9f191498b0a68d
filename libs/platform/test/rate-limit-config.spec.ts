import { loadConfig } from '@svc/platform';

describe('loadConfig: rate limits (decisions 13) and the trusted proxies that decide the client address', () => {
  it('defaults to limits no ordinary integration meets, on', () => {
    expect(loadConfig({}).rateLimits).toEqual({
      enabled: true,
      apiKey: { ratePerS: 200, burst: 2000 },
      staff: { ratePerS: 100, burst: 1000 },
      address: { ratePerS: 50, burst: 500 },
    });
  });

  it('takes each rate and burst from SVC_RATE_LIMIT_*; a burst left unset is ten seconds of the rate', () => {
    const c = loadConfig({
      SVC_RATE_LIMIT_API_KEY_PER_S: '1000',
      SVC_RATE_LIMIT_STAFF_PER_S: '7',
      SVC_RATE_LIMIT_STAFF_BURST: '9',
      SVC_RATE_LIMIT_ADDRESS_BURST: '60',
    }).rateLimits;
    expect(c).toEqual({ enabled: true, apiKey: { ratePerS: 1000, burst: 10_000 }, staff: { ratePerS: 7, burst: 9 }, address: { ratePerS: 50, burst: 60 } });
  });

  it('SVC_RATE_LIMITS=off turns them all off; anything but on or off stops start-up', () => {
    expect(loadConfig({ SVC_RATE_LIMITS: 'off' }).rateLimits.enabled).toBe(false);
    expect(loadConfig({ SVC_RATE_LIMITS: 'on' }).rateLimits.enabled).toBe(true);
    for (const bad of ['0', 'false', 'OFF', 'no']) expect(() => loadConfig({ SVC_RATE_LIMITS: bad })).toThrow(/SVC_RATE_LIMITS/);
  });

  it('refuses a rate or burst that is not a whole number from 1', () => {
    for (const name of ['SVC_RATE_LIMIT_API_KEY_PER_S', 'SVC_RATE_LIMIT_STAFF_BURST', 'SVC_RATE_LIMIT_ADDRESS_PER_S']) {
      for (const bad of ['0', '-1', '1.5', 'abc', '1e3']) expect(() => loadConfig({ [name]: bad })).toThrow(new RegExp(name));
    }
  });

  it('SVC_TRUST_PROXY: no proxy by default; a hop count, or addresses, CIDRs and range names', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ SVC_TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(loadConfig({ SVC_TRUST_PROXY: '10.0.0.0/8, 192.168.1.5,loopback,fd00::/8' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '192.168.1.5',
      'loopback',
      'fd00::/8',
    ]);
    for (const bad of ['true', '*', '10.0.0.0/33', 'example.com', '0']) expect(() => loadConfig({ SVC_TRUST_PROXY: bad })).toThrow(/SVC_TRUST_PROXY/);
  });
});
