/**
 * The widget demo (`/widget-demo`, dev tools only): mounts `/widget.js` for a chosen environment,
 * or for a sandbox organization it makes through the dev tools, so a newcomer sees the widget
 * working in one click.
 */
import { render } from 'preact';
import { useState } from 'preact/hooks';
import { call } from '../shared/http';
import './demo.css';

interface WidgetApi {
  init(options: { environmentId: string; identityToken?: string; language?: 'en' | 'es'; open?: boolean }): void;
  destroy(): void;
}
const widget = () => (window as unknown as { PatientCareWidget?: WidgetApi }).PatientCareWidget;

function Demo() {
  const params = new URLSearchParams(location.search);
  const [environmentId, setEnvironmentId] = useState(params.get('environmentId') ?? '');
  const [identityToken, setIdentityToken] = useState('');
  const [language, setLanguage] = useState<'' | 'en' | 'es'>('');
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);

  const show = (env = environmentId) => {
    const w = widget();
    if (!w) return setStatus('The widget script did not load.');
    w.init({
      environmentId: env.trim(),
      ...(identityToken.trim() ? { identityToken: identityToken.trim() } : {}),
      ...(language ? { language } : {}),
      open: true,
    });
    setStatus('The widget is open at the bottom right of this page.');
  };

  const sandbox = async () => {
    setBusy(true);
    setStatus('Making a sandbox organization…');
    const sub = `demo-${Math.random().toString(36).slice(2, 10)}`;
    const token = await call<{ idToken: string }>('/api/dev/staff-tokens', { body: { sub, email: `${sub}@example.test` } });
    const org = token.body
      ? await call<{ id: string; environments: { id: string; kind: string }[] }>('/api/organizations', {
          body: { name: 'Widget demo' },
          token: token.body.idToken,
        })
      : null;
    const baa = org?.body
      ? await call(`/api/organizations/${org.body.id}/baa`, { body: { signerName: 'Demo Owner', signerTitle: 'Owner' }, token: token.body!.idToken })
      : null;
    setBusy(false);
    const env = org?.body?.environments.find((e) => e.kind === 'sandbox')?.id;
    if (!env || !baa || (baa.status !== 201 && baa.status !== 200)) return setStatus('The sandbox could not be made (are the dev tools on?).');
    setEnvironmentId(env);
    show(env);
  };

  const snippet = `<script src="${location.origin}/widget.js" data-environment-id="${environmentId.trim() || 'ENVIRONMENT_ID'}" async></script>`;
  return (
    <main>
      <h1>Patient widget demo</h1>
      <p>
        This page (dev tools only) mounts the widget the way a caller's site does. Make a sandbox to try it, or give an environment of your own and, to sign a
        patient in, an identity token from your backend.
      </p>
      <p>
        <button type="button" class="primary" disabled={busy} onClick={() => void sandbox()}>
          Create a sandbox and open the widget
        </button>
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          show();
        }}
      >
        <label for="env">Environment id</label>
        <input id="env" value={environmentId} onInput={(e) => setEnvironmentId((e.currentTarget as HTMLInputElement).value)} required />
        <label for="token">Identity token (optional)</label>
        <textarea id="token" rows={3} value={identityToken} onInput={(e) => setIdentityToken((e.currentTarget as HTMLTextAreaElement).value)} />
        <label for="lang">Language</label>
        <select id="lang" value={language} onChange={(e) => setLanguage((e.currentTarget as HTMLSelectElement).value as '' | 'en' | 'es')}>
          <option value="">The browser's</option>
          <option value="en">English</option>
          <option value="es">Español</option>
        </select>
        <button type="submit" class="primary">
          Show the widget
        </button>
      </form>
      <p role="status">{status}</p>
      <h2>Embed it</h2>
      <pre>
        <code>{snippet}</code>
      </pre>
    </main>
  );
}

const root = document.getElementById('root')!;
root.textContent = '';
render(<Demo />, root);
