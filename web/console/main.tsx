/**
 * The staff console (`{origin}/console/`, docs/decisions.md, "Pages for people"): integration set-up, webhook deliveries and
 * clinical cases, on the public staff API only, with the signed-in user's ID token.
 *
 * Addresses: `/console/{view}/{item}?org={orgId}&env=sandbox|production`, one page for all of them
 * (the gateway serves the same HTML); `/console/callback` finishes an OIDC sign-in.
 */
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { Api, Problem, devToken } from './api';
import { OidcConfig, finishSignIn, redirectUri, startSignIn } from './oidc';
import { claimsOf, clearToken, loadToken, saveToken } from './session';
import { EnvBadge, ProblemBox, ScreenTitle } from './ui';
import { CasesView } from './views/cases';
import { DestinationsView } from './views/destinations';
import { KeysView } from './views/keys';
import { OrganizationView, CreateOrganization } from './views/organization';
import { PatientsView, ProtocolsView } from './views/protocols';
import { WebhooksView } from './views/webhooks';
import { WorkflowsView } from './views/workflows';
import './console.css';

interface ConsoleConfig {
  devTools: boolean;
  oidc: OidcConfig | null;
  oidcProblem: string | null;
}

function readConfig(): ConsoleConfig {
  try {
    const raw = document.querySelector('meta[name="console-config"]')?.getAttribute('content') ?? '';
    return JSON.parse(raw) as ConsoleConfig;
  } catch {
    return { devTools: false, oidc: null, oidcProblem: 'The page carries no sign-in settings.' };
  }
}

export interface Organization {
  id: string;
  name: string;
  baaSignedAt: string | null;
  environments: { id: string; kind: 'sandbox' | 'production' }[];
}

export interface Route {
  view: string;
  item: string | null;
  org: string | null;
  env: 'sandbox' | 'production';
}

function readRoute(): Route {
  const parts = location.pathname
    .replace(/^\/console\/?/, '')
    .split('/')
    .filter(Boolean);
  const q = new URLSearchParams(location.search);
  return { view: parts[0] ?? '', item: parts[1] ?? null, org: q.get('org'), env: q.get('env') === 'production' ? 'production' : 'sandbox' };
}

export function hrefOf(r: Partial<Route>, base: Route): string {
  const next = { ...base, item: null, ...r };
  const q = new URLSearchParams();
  if (next.org) q.set('org', next.org);
  q.set('env', next.env);
  const path = next.view ? `${next.view}${next.item ? `/${encodeURIComponent(next.item)}` : ''}` : '';
  return `/console/${path}?${q}`;
}

export type Go = (r: Partial<Route>) => void;

/** An in-app link: a real <a href> (opens in a new tab, works by keyboard), followed without a page load. */
export function Link({
  to,
  route,
  go,
  children,
  current,
}: {
  to: Partial<Route>;
  route: Route;
  go: Go;
  children: preact.ComponentChildren;
  current?: boolean;
}) {
  return (
    <a
      href={hrefOf(to, route)}
      aria-current={current ? 'page' : undefined}
      onClick={(e) => {
        if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        go(to);
      }}
    >
      {children}
    </a>
  );
}

function SignIn({ config, onToken, notice }: { config: ConsoleConfig; onToken: (t: string) => void; notice: string | null }) {
  const [sub, setSub] = useState('');
  const [email, setEmail] = useState('');
  const [mfa, setMfa] = useState(true);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <main class="signin">
      <h1>Staff console</h1>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      {config.oidc ? (
        <section aria-labelledby="oidc-h">
          <h2 id="oidc-h">Sign in with your organization's identity provider</h2>
          <p class="hint">{new URL(config.oidc.issuer).host}</p>
          <button
            type="button"
            class="primary"
            onClick={() => void startSignIn(config.oidc!).catch((e: Error) => setProblem({ status: 0, code: null, message: e.message, details: [] }))}
          >
            Sign in
          </button>
        </section>
      ) : null}
      {config.oidcProblem ? (
        <p class="problem" role="alert">
          {config.oidcProblem}
        </p>
      ) : null}
      {config.devTools ? (
        <section aria-labelledby="dev-h">
          <h2 id="dev-h">Sign in with the dev issuer</h2>
          <p class="hint">The dev tools are on (standalone, not production): any subject can sign in here. Never available in production mode.</p>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              setBusy(true);
              void devToken(sub.trim(), email.trim(), mfa).then((r) => {
                setBusy(false);
                if (r.ok) onToken(r.body.idToken);
                else setProblem(r.problem);
              });
            }}
          >
            <label for="dev-sub">Subject (user id)</label>
            <input id="dev-sub" required value={sub} onInput={(e) => setSub(e.currentTarget.value)} autoComplete="username" />
            <label for="dev-email">Email</label>
            <input id="dev-email" type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} autoComplete="email" />
            <label class="check">
              <input type="checkbox" checked={mfa} onChange={(e) => setMfa(e.currentTarget.checked)} /> Signed in with multi-factor authentication
            </label>
            <button type="submit" class="primary" disabled={busy}>
              Sign in as this user
            </button>
          </form>
        </section>
      ) : null}
      {!config.oidc && !config.devTools && !config.oidcProblem ? (
        <p class="problem" role="alert">
          No sign-in is configured: the operator sets STAFF_OIDC_ISSUER (and STAFF_OIDC_AUDIENCE, the console's client id) and registers {redirectUri()} as its
          redirect URI.
        </p>
      ) : null}
      <ProblemBox problem={problem} />
    </main>
  );
}

function Callback({ config, onToken }: { config: ConsoleConfig; onToken: (t: string) => void }) {
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!config.oidc) return setError('Sign-in with an identity provider is not configured.');
    finishSignIn(config.oidc, new URLSearchParams(location.search)).then(onToken, (e: Error) => setError(e.message));
  }, []);
  return (
    <main class="signin">
      <h1>Staff console</h1>
      {error ? (
        <div class="problem" role="alert">
          <p>{error}</p>
          <p>
            <a href="/console/">Back to sign-in</a>
          </p>
        </div>
      ) : (
        <p role="status">Signing you in…</p>
      )}
    </main>
  );
}

const VIEWS: { view: string; label: string }[] = [
  { view: '', label: 'Organization' },
  { view: 'keys', label: 'API keys and secrets' },
  { view: 'webhooks', label: 'Webhooks' },
  { view: 'protocols', label: 'Protocols' },
  { view: 'patients', label: 'Patients' },
  { view: 'destinations', label: 'Destinations' },
  { view: 'workflows', label: 'Workflows' },
  { view: 'cases', label: 'Clinical cases' },
];
/** The views of one environment (the one picked at the top). */
const ENV_VIEWS = new Set(['webhooks', 'protocols', 'patients', 'destinations', 'workflows', 'cases']);

function Shell({ token, signOut }: { token: string; signOut: (notice?: string) => void }) {
  const api = useMemo(() => new Api(token, () => signOut('Your sign-in has expired. Sign in again.')), [token]);
  const claims = claimsOf(token);
  const [route, setRoute] = useState<Route>(readRoute);
  const [orgs, setOrgs] = useState<Organization[] | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);

  useEffect(() => {
    const pop = () => setRoute(readRoute());
    addEventListener('popstate', pop);
    return () => removeEventListener('popstate', pop);
  }, []);
  const go: Go = useCallback(
    (r) =>
      setRoute((cur) => {
        const next = { ...cur, item: null, ...r };
        history.pushState(null, '', hrefOf(next, next));
        return next;
      }),
    [],
  );
  const reload = useCallback(async () => {
    const r = await api.get<{ organizations: Organization[] }>('/organizations');
    if (r.ok) setOrgs(r.body.organizations);
    else setProblem(r.problem);
  }, [api]);
  useEffect(() => void reload(), [reload]);

  const org = orgs?.find((o) => o.id === route.org) ?? orgs?.[0] ?? null;
  useEffect(() => {
    if (org && route.org !== org.id) {
      const next = { ...route, org: org.id };
      history.replaceState(null, '', hrefOf(next, next));
      setRoute(next);
    }
  }, [org?.id]);
  const env = org?.environments.find((e) => e.kind === route.env) ?? null;

  let screen: preact.ComponentChildren = null;
  if (!orgs) screen = problem ? <ProblemBox problem={problem} /> : <p role="status">Loading your organizations…</p>;
  else if (!org || route.view === 'new-organization')
    screen = (
      <CreateOrganization
        api={api}
        first={!org}
        onCreated={(o) => {
          setOrgs([...(orgs ?? []), o]);
          go({ view: '', org: o.id });
        }}
      />
    );
  else if (route.view === '') screen = <OrganizationView api={api} org={org} me={claims?.sub ?? ''} onChanged={reload} />;
  else if (route.view === 'keys') screen = <KeysView api={api} org={org} />;
  else if (route.view === 'webhooks' && env) screen = <WebhooksView key={env.id} api={api} org={org} env={env} route={route} go={go} />;
  else if (route.view === 'protocols' && env) screen = <ProtocolsView key={env.id} api={api} org={org} env={env} />;
  else if (route.view === 'patients' && env) screen = <PatientsView key={env.id} api={api} org={org} env={env} />;
  else if (route.view === 'destinations' && env) screen = <DestinationsView key={env.id} api={api} org={org} env={env} route={route} go={go} />;
  else if (route.view === 'workflows' && env) screen = <WorkflowsView key={env.id} api={api} org={org} env={env} route={route} go={go} />;
  else if (route.view === 'cases' && env) screen = <CasesView key={env.id} api={api} org={org} env={env} route={route} go={go} />;
  else
    screen = (
      <section>
        <ScreenTitle>Not found</ScreenTitle>
        <p>There is no such page in the console.</p>
      </section>
    );

  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to the content
      </a>
      <header class="top">
        <p class="brand">Staff console</p>
        {orgs && orgs.length > 0 ? (
          <div class="pickers">
            <label for="org-pick">Organization</label>
            <select
              id="org-pick"
              value={org?.id}
              onChange={(e) => go({ org: e.currentTarget.value, view: route.view === 'new-organization' ? '' : route.view })}
            >
              {orgs.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.name}
                </option>
              ))}
            </select>
            <fieldset class="envs">
              <legend>Environment</legend>
              {(['sandbox', 'production'] as const).map((k) => (
                <label key={k} class={`env-choice env-${k}`}>
                  <input type="radio" name="env" value={k} checked={route.env === k} onChange={() => go({ env: k, view: route.view })} />
                  {k === 'sandbox' ? 'Sandbox' : 'Production'}
                </label>
              ))}
            </fieldset>
            <Link to={{ view: 'new-organization' }} route={route} go={go}>
              New organization
            </Link>
          </div>
        ) : null}
        <div class="who">
          <span>{claims?.email ?? claims?.sub}</span>
          <button type="button" class="secondary" onClick={() => signOut()}>
            Sign out
          </button>
        </div>
      </header>
      {org && !org.baaSignedAt ? (
        <div class="banner" role="region" aria-label="BAA not signed">
          <p>
            <strong>{org.name} has not signed the Business Associate Agreement.</strong> Set-up works, but API keys are refused (403 BAA_REQUIRED) until it is
            signed.{' '}
            <Link to={{ view: '', item: null }} route={route} go={go}>
              Sign it on the Organization page
            </Link>
          </p>
        </div>
      ) : null}
      {org ? (
        <nav aria-label="Console">
          <ul>
            {VIEWS.map((v) => (
              <li key={v.view}>
                <Link to={{ view: v.view }} route={route} go={go} current={route.view === v.view}>
                  {v.label}
                </Link>
              </li>
            ))}
          </ul>
          {ENV_VIEWS.has(route.view) ? (
            <p class="envnote">
              Showing <EnvBadge kind={route.env} />
            </p>
          ) : null}
        </nav>
      ) : null}
      <main id="main" class={`page view-${route.view || 'organization'}`}>
        {screen}
      </main>
    </div>
  );
}

function App() {
  const config = useMemo(readConfig, []);
  const [token, setToken] = useState<string | null>(() => loadToken());
  const [notice, setNotice] = useState<string | null>(null);
  const onToken = (t: string) => {
    saveToken(t);
    setToken(t);
    if (location.pathname === '/console/callback') history.replaceState(null, '', '/console/');
  };
  if (location.pathname === '/console/callback' && !token) return <Callback config={config} onToken={onToken} />;
  if (!token) return <SignIn config={config} onToken={onToken} notice={notice} />;
  return (
    <Shell
      token={token}
      signOut={(n) => {
        clearToken();
        setNotice(n ?? null);
        setToken(null);
      }}
    />
  );
}

render(<App />, document.getElementById('root')!);
