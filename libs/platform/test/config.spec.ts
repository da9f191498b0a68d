import { loadConfig } from '@svc/platform';

describe('loadConfig: settings that would otherwise be read wrongly', () => {
  it('refuses a number setting that is not a whole number in range (STAFF_MFA_MAX_AGE_S=abc turned the MFA age check off: NaN)', () => {
    for (const bad of ['abc', '-1', '0', '1.5', '1e3', '99999999999']) {
      expect(() => loadConfig({ STAFF_MFA_MAX_AGE_S: bad })).toThrow(/STAFF_MFA_MAX_AGE_S/);
    }
    for (const bad of ['http', '-1', '70000', '3000.5']) expect(() => loadConfig({ PORT: bad })).toThrow(/PORT/);
    expect(loadConfig({ STAFF_MFA_MAX_AGE_S: '600', PORT: '0' })).toMatchObject({ mfaMaxAgeS: 600, port: 0 });
    expect(loadConfig({})).toMatchObject({ mfaMaxAgeS: 3600, port: 3000 });
  });

  it('needs STAFF_OIDC_ISSUER for the other STAFF_OIDC_* settings, and https for the issuer in production (loopback aside)', () => {
    expect(() => loadConfig({ STAFF_OIDC_JWKS_URL: 'https://login.example.com/jwks' })).toThrow(/STAFF_OIDC_ISSUER/);
    expect(() => loadConfig({ STAFF_OIDC_AUDIENCE: 'svc-staff' })).toThrow(/STAFF_OIDC_ISSUER/);
    const prod = { NODE_ENV: 'production', SVC_MASTER_KEY: Buffer.alloc(32, 1).toString('base64') };
    expect(() => loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'http://login.example.com/' })).toThrow(/STAFF_OIDC_ISSUER must be https/);
    expect(() => loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'https://login.example.com/', STAFF_OIDC_JWKS_URL: 'http://login.example.com/jwks' })).toThrow(/STAFF_OIDC_JWKS_URL must be https/);
    expect(() => loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'login.example.com' })).toThrow(/STAFF_OIDC_ISSUER must be an http\(s\) URL/);
    expect(loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'https://login.example.com/' }).staffOidc).toEqual({ issuer: 'https://login.example.com/', jwksUrl: 'https://login.example.com/.well-known/jwks.json', audience: 'svc-staff' });
    expect(loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'http://127.0.0.1:8080' }).staffOidc?.jwksUrl).toBe('http://127.0.0.1:8080/.well-known/jwks.json');
    // Outside production an http issuer is allowed (local identity providers).
    expect(loadConfig({ STAFF_OIDC_ISSUER: 'http://idp.local' }).staffOidc?.issuer).toBe('http://idp.local');
  });
});
