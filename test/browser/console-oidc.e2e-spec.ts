import { ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { TestApp, freePort } from '@svc/testing';
import { Browser, buildPages, describeInBrowser, launch, watch } from './browser';
import { consoleToken, noSeriousViolations } from './console-helpers';

/**
 * The console's sign-in with a real OpenID provider (oidc-provider on 127.0.0.1, in a child process:
 * test/browser/support/oidc-provider.mjs): the authorization-code flow with PKCE S256, state and
 * nonce, the code exchanged from the browser at the provider's token endpoint (CORS), the RS256 ID
 * token accepted by the service for a write that needs MFA and integrations.manage.
 */
jest.setTimeout(120_000);

const b64url = (b: Buffer) => b.toString('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;

describeInBrowser('staff console: OIDC sign-in with a real provider (browser)', () => {
  let provider: ChildProcess;
  let issuer: string;
  let app: TestApp;
  let origin: string;
  let browser: Browser;

  beforeAll(async () => {
    buildPages();
    // The console's origin must be known to the provider (redirect URI, CORS) before the service starts.
    const port = await freePort();
    origin = `http://localhost:${port}`; // the service's own base URL names localhost
    provider = spawn(process.execPath, [join(__dirname, 'support', 'oidc-provider.mjs')], {
      env: { ...process.env, CONSOLE_ORIGIN: origin },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    provider.stderr!.resume(); // its warnings (in-memory adapter) are not this test's business
    issuer = await new Promise<string>((resolve, reject) => {
      provider.once('exit', (code) => reject(new Error(`the test OpenID provider exited (${code})`)));
      createInterface({ input: provider.stdout! }).on('line', (line) => {
        if (line.startsWith('{')) resolve((JSON.parse(line) as { issuer: string }).issuer);
      });
    });
    app = await new TestApp(undefined, {
      PORT: String(port),
      STAFF_OIDC_ISSUER: issuer,
      STAFF_OIDC_JWKS_URL: `${issuer}/jwks`,
      STAFF_OIDC_AUDIENCE: 'svc-staff',
    }).start();
    expect(new URL(app.baseUrl).origin).toBe(origin);
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    provider?.kill();
  });

  it('signs in with the authorization code and PKCE S256 at the provider, and the ID token it keeps is accepted for a write', async () => {
    const context = await browser.context({ viewport: { width: 1280, height: 800 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    const seen = watch(page);
    const res = await page.goto(`${origin}/console/`);
    // The page may call the provider's token endpoint, and nothing else beyond its own origin.
    expect(res?.headers()['content-security-policy']).toContain(`connect-src 'self' ${issuer};`);
    await page.getByRole('heading', { name: "Sign in with your organization's identity provider" }).waitFor();
    expect(await page.getByText(new URL(issuer).host, { exact: true }).count()).toBe(1);
    await noSeriousViolations(page, 'sign-in with an identity provider');

    const authorize = page.waitForRequest((r) => r.url().startsWith(`${issuer}/auth?`));
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    const asked = new URL((await authorize).url()).searchParams;
    expect(Object.fromEntries(['response_type', 'client_id', 'redirect_uri', 'scope', 'code_challenge_method'].map((k) => [k, asked.get(k)]))).toEqual({
      response_type: 'code',
      client_id: 'svc-staff',
      redirect_uri: `${origin}/console/callback`,
      scope: 'openid email profile',
      code_challenge_method: 'S256',
    });
    for (const k of ['state', 'nonce', 'code_challenge']) expect(asked.get(k)).toMatch(/^[A-Za-z0-9_-]{43,}$/);

    // The provider's own sign-in page; back at the console, the code is exchanged with the verifier.
    await page.waitForURL(`${issuer}/interaction/**`);
    await page.getByRole('heading', { name: 'Test identity provider' }).waitFor();
    const exchange = page.waitForRequest((r) => r.url() === `${issuer}/token` && r.method() === 'POST');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const sent = new URLSearchParams((await exchange).postData() ?? '');
    expect(sent.get('grant_type')).toBe('authorization_code');
    expect(sent.get('client_id')).toBe('svc-staff');
    expect(sent.get('redirect_uri')).toBe(`${origin}/console/callback`);
    expect(
      b64url(
        createHash('sha256')
          .update(sent.get('code_verifier') ?? '')
          .digest(),
      ),
    ).toBe(asked.get('code_challenge'));

    // Signed in: the callback address is left, only the ID token is kept, and the service takes it.
    await page.getByRole('heading', { name: 'Create your organization' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/');
    expect(await page.getByText('oidc-staff-1@example.test').count()).toBe(1);
    const idToken = await consoleToken(page);
    expect(claimsOf(idToken)).toMatchObject({
      iss: issuer,
      aud: 'svc-staff',
      sub: 'oidc-staff-1',
      nonce: asked.get('nonce'),
      amr: ['pwd', 'mfa'],
      permissions: ['integrations.manage'],
      auth_time: expect.any(Number),
    });
    expect(await page.evaluate('Object.keys(sessionStorage)')).toEqual(['svc-console.idToken']);
    expect(await page.evaluate('document.cookie')).toBe('');
    await page.getByLabel('Organization name').fill('OIDC Clinic');
    await page.getByRole('button', { name: 'Create organization' }).click();
    await page.getByRole('heading', { name: 'OIDC Clinic' }).waitFor();
    const orgs = await app.api.get('/organizations', idToken);
    expect(orgs.body.organizations.map((o: { name: string }) => o.name)).toEqual(['OIDC Clinic']);
    await noSeriousViolations(page, 'signed in through the provider');

    // Only this origin and the provider were contacted; no policy violation, no script error.
    expect((await seen.sent()).filter((r) => !r.url.startsWith(origin) && !r.url.startsWith(issuer))).toEqual([]);
    expect(seen.problems).toEqual([]);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: "Sign in with your organization's identity provider" }).waitFor();
    expect(await page.evaluate('sessionStorage.getItem("svc-console.idToken")')).toBeNull();
    await context.close();
  });

  it('refuses an answer this tab did not ask for, and says what the provider refused', async () => {
    const context = await browser.context({ viewport: { width: 1024, height: 768 }, locale: 'en-US' });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    await page.goto(`${origin}/console/callback?code=forged-code&state=forged-state`);
    await page.getByRole('alert').filter({ hasText: 'state mismatch' }).waitFor();
    expect(await consoleToken(page)).toBeNull();
    await noSeriousViolations(page, 'callback refused');
    await page.goto(`${origin}/console/callback?error=access_denied&error_description=The%20user%20cancelled`);
    await page.getByRole('alert').filter({ hasText: 'The sign-in provider refused: The user cancelled' }).waitFor();
    await page.getByRole('link', { name: 'Back to sign-in' }).click();
    await page.getByRole('heading', { name: "Sign in with your organization's identity provider" }).waitFor();
    await context.close();
  });
});
