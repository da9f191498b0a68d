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

  it('checkpoints of the global log: every 10,000 events or 60 s by default, each settable within bounds', () => {
    expect(loadConfig({}).chainCheckpoints).toEqual({ everyEvents: 10_000, intervalS: 60 });
    expect(loadConfig({ SVC_CHAIN_CHECKPOINT_EVENTS: '500', SVC_CHAIN_CHECKPOINT_INTERVAL_S: '5' }).chainCheckpoints).toEqual({
      everyEvents: 500,
      intervalS: 5,
    });
    for (const bad of ['0', '100001', '1.5', 'x']) expect(() => loadConfig({ SVC_CHAIN_CHECKPOINT_EVENTS: bad })).toThrow(/SVC_CHAIN_CHECKPOINT_EVENTS/);
    for (const bad of ['0', '86401', '-1']) expect(() => loadConfig({ SVC_CHAIN_CHECKPOINT_INTERVAL_S: bad })).toThrow(/SVC_CHAIN_CHECKPOINT_INTERVAL_S/);
  });

  it('needs STAFF_OIDC_ISSUER for the other STAFF_OIDC_* settings, and https for the issuer in production (loopback aside)', () => {
    expect(() => loadConfig({ STAFF_OIDC_JWKS_URL: 'https://login.example.com/jwks' })).toThrow(/STAFF_OIDC_ISSUER/);
    expect(() => loadConfig({ STAFF_OIDC_AUDIENCE: 'svc-staff' })).toThrow(/STAFF_OIDC_ISSUER/);
    const prod = { NODE_ENV: 'production', SVC_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'), WIDGET_BASE_URL: 'https://care.example.com/api' };
    expect(() => loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'http://login.example.com/' })).toThrow(/STAFF_OIDC_ISSUER must be https/);
    expect(() => loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'https://login.example.com/', STAFF_OIDC_JWKS_URL: 'http://login.example.com/jwks' })).toThrow(
      /STAFF_OIDC_JWKS_URL must be https/,
    );
    expect(() => loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'login.example.com' })).toThrow(/STAFF_OIDC_ISSUER must be an http\(s\) URL/);
    expect(loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'https://login.example.com/' }).staffOidc).toEqual({
      issuer: 'https://login.example.com/',
      jwksUrl: 'https://login.example.com/.well-known/jwks.json',
      audience: 'svc-staff',
    });
    expect(loadConfig({ ...prod, STAFF_OIDC_ISSUER: 'http://127.0.0.1:8080' }).staffOidc?.jwksUrl).toBe('http://127.0.0.1:8080/.well-known/jwks.json');
    // Outside production an http issuer is allowed (local identity providers).
    expect(loadConfig({ STAFF_OIDC_ISSUER: 'http://idp.local' }).staffOidc?.issuer).toBe('http://idp.local');
  });
});

describe('loadConfig: production mode (decisions 16: mail over TLS, https patient links)', () => {
  const prod = { NODE_ENV: 'production', SVC_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'), WIDGET_BASE_URL: 'https://care.example.com/api' };

  it('refuses SMTP without TLS: an smtp:// URL that does not require STARTTLS, or ignores it', () => {
    const plain = [
      'smtp://mail.example.com:25',
      'smtp://mail.example.com:587',
      'smtp://u:p@mail.example.com:465',
      'smtp://mail.example.com:587?requireTLS=false',
      'smtp://mail.example.com:587?requireTLS=true&ignoreTLS=true',
      'direct://',
      'mail.example.com',
    ];
    const notRefused = plain.filter((url) => {
      try {
        loadConfig({ ...prod, MAIL: 'smtp', SMTP_URL: url });
        return true;
      } catch (err) {
        return !/SMTP_URL must use TLS in production mode/.test((err as Error).message);
      }
    });
    expect(notRefused).toEqual([]);
    // The default SMTP_URL (smtp://localhost:1025) is refused too once MAIL=smtp.
    expect(() => loadConfig({ ...prod, MAIL: 'smtp' })).toThrow(/SMTP_URL must use TLS/);
  });

  it('accepts SMTP over TLS: smtps:// (TLS from the first byte) or smtp:// with requireTLS (STARTTLS or no mail)', () => {
    expect(loadConfig({ ...prod, MAIL: 'smtp', SMTP_URL: 'smtps://u:p@mail.example.com:465' }).smtpUrl).toBe('smtps://u:p@mail.example.com:465');
    expect(loadConfig({ ...prod, MAIL: 'smtp', SMTP_URL: 'smtp://mail.example.com:587?requireTLS=true' }).mail).toBe('smtp');
    // Outside production a plain SMTP catcher stays allowed; the outbox never looks at SMTP_URL.
    expect(loadConfig({ MAIL: 'smtp', SMTP_URL: 'smtp://localhost:1025' }).smtpUrl).toBe('smtp://localhost:1025');
    expect(loadConfig({ ...prod, MAIL: 'outbox', SMTP_URL: 'smtp://localhost:1025' }).mail).toBe('outbox');
  });

  it('needs an https WIDGET_BASE_URL (the link in every check-in email carries its token)', () => {
    const { WIDGET_BASE_URL: _unset, ...noWidget } = prod;
    expect(() => loadConfig(noWidget)).toThrow(/WIDGET_BASE_URL must be an https URL in production mode/);
    expect(() => loadConfig({ ...prod, WIDGET_BASE_URL: 'http://care.example.com/api' })).toThrow(/WIDGET_BASE_URL must be an https URL in production mode/);
    expect(() => loadConfig({ ...prod, WIDGET_BASE_URL: 'http://localhost:3000/api' })).toThrow(/WIDGET_BASE_URL must be an https URL/);
    expect(loadConfig(prod).widgetBaseUrl).toBe('https://care.example.com/api');
    // Any mode: an address that is no http(s) URL stops start-up instead of going out in emails.
    for (const bad of ['care.example.com', 'javascript:alert(1)', 'ftp://care.example.com/'])
      expect(() => loadConfig({ WIDGET_BASE_URL: bad })).toThrow(/WIDGET_BASE_URL must be an http\(s\) URL/);
    expect(loadConfig({ WIDGET_BASE_URL: 'http://localhost:8080/w' }).widgetBaseUrl).toBe('http://localhost:8080/w');
    expect(loadConfig({}).widgetBaseUrl).toBeNull();
  });
});

describe('loadConfig: listener (decisions 16: dev tools listen on 127.0.0.1 unless HOST says otherwise)', () => {
  it('binds to 127.0.0.1 while the dev tools are on, 0.0.0.0 otherwise, and HOST always wins', () => {
    expect(loadConfig({})).toMatchObject({ devTools: true, host: '127.0.0.1' });
    expect(loadConfig({ HOST: '0.0.0.0' })).toMatchObject({ devTools: true, host: '0.0.0.0' });
    expect(loadConfig({ HOST: '' })).toMatchObject({ devTools: true, host: '127.0.0.1' }); // empty counts as unset
    expect(loadConfig({ SVC_DEV_TOOLS: '0' })).toMatchObject({ devTools: false, host: '0.0.0.0' });
    expect(loadConfig({}, 'distributed')).toMatchObject({ devTools: false, host: '0.0.0.0' });
    expect(loadConfig({ SVC_DEV_TOOLS: '1' }, 'distributed')).toMatchObject({ devTools: true, host: '127.0.0.1' });
    expect(
      loadConfig({ NODE_ENV: 'production', SVC_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'), WIDGET_BASE_URL: 'https://care.example.com/' }),
    ).toMatchObject({ devTools: false, host: '0.0.0.0' });
    expect(loadConfig({ HOST: '::1', SVC_DEV_TOOLS: '0' }).host).toBe('::1');
  });

  it('caps open connections (SVC_MAX_CONNECTIONS, a whole number from 1)', () => {
    expect(loadConfig({}).maxConnections).toBe(4096);
    expect(loadConfig({ SVC_MAX_CONNECTIONS: '250' }).maxConnections).toBe(250);
    for (const bad of ['0', '-5', 'lots', '1.5', '10000001'])
      expect(() => loadConfig({ SVC_MAX_CONNECTIONS: bad })).toThrow(/SVC_MAX_CONNECTIONS must be a whole number from 1 to 10000000/);
  });
});
