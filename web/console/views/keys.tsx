/** API keys and secrets of both environments, side by side: create (secret shown once), list, revoke; rotate secrets. */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import type { Organization } from '../main';
import { EnvBadge, FieldError, ProblemBox, ScreenTitle, SecretOnce, fieldError, invalid, when } from '../ui';

interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
}

const SECRET_KINDS = [
  { kind: 'widget_signing', label: 'Widget signing secret', hint: 'Signs every call to your Destinations (x-svc-signature).' },
  {
    kind: 'identity_token',
    label: 'Identity token secret',
    hint: 'Verifies the identity tokens your backend signs for the widget. Rotating ends open widget sessions.',
  },
] as const;

function EnvironmentKeys({ api, org, env }: { api: Api; org: Organization; env: Organization['environments'][number] }) {
  const base = `/organizations/${org.id}/environments/${env.id}`;
  const [keys, setKeys] = useState<ApiKey[] | null>(null);
  const [name, setName] = useState('');
  const [shown, setShown] = useState<{ label: string; value: string } | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [status, setStatus] = useState('');
  const load = async () => {
    const r = await api.get<{ apiKeys: ApiKey[] }>(`${base}/api-keys`);
    if (r.ok) setKeys(r.body.apiKeys);
    else setProblem(r.problem);
  };
  useEffect(() => void load(), [env.id]);
  const kind = env.kind === 'production' ? 'Production' : 'Sandbox';
  const nameErr = fieldError(problem, 'name');
  return (
    <section class={`card env-card env-${env.kind}`} aria-labelledby={`keys-${env.kind}`}>
      <h3 id={`keys-${env.kind}`}>
        <EnvBadge kind={env.kind} /> <span class="sr-only">environment</span>
      </h3>
      <h4>API keys</h4>
      {keys && keys.length === 0 ? <p class="hint">No API keys yet.</p> : null}
      {keys && keys.length > 0 ? (
        <ul class="list">
          {keys.map((k) => (
            <li key={k.id} class={k.revokedAt ? 'revoked' : ''}>
              <span>
                <strong>{k.name}</strong> <code class="mono">{k.prefix}…</code>
                <br />
                <span class="hint">
                  created {when(k.createdAt)}
                  {k.revokedAt ? `, revoked ${when(k.revokedAt)}` : ''}
                </span>
              </span>
              {k.revokedAt ? null : (
                <button
                  type="button"
                  class="danger"
                  onClick={() => {
                    if (!confirm(`Revoke the ${kind.toLowerCase()} key "${k.name}"? Calls with it are refused at once.`)) return;
                    void api.del(`${base}/api-keys/${k.id}`).then((r) => {
                      if (!r.ok) return setProblem(r.problem);
                      setStatus(`The key "${k.name}" was revoked.`);
                      void load();
                    });
                  }}
                >
                  Revoke<span class="sr-only"> {k.name}</span>
                </button>
              )}
            </li>
          ))}
        </ul>
      ) : null}
      {shown ? <SecretOnce label={shown.label} value={shown.value} onDone={() => setShown(null)} /> : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void api.post<{ key: string; name: string }>(`${base}/api-keys`, { name: name.trim() }).then((r) => {
            if (!r.ok) return setProblem(r.problem);
            setProblem(null);
            setName('');
            setShown({ label: `${kind} API key "${r.body.name}"`, value: r.body.key });
            void load();
          });
        }}
      >
        <label for={`key-name-${env.kind}`}>New {kind.toLowerCase()} key name</label>
        <input
          id={`key-name-${env.kind}`}
          required
          maxLength={120}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
          {...invalid(`key-name-${env.kind}-err`, nameErr)}
        />
        <FieldError id={`key-name-${env.kind}-err`} message={nameErr} />
        <button type="submit">Create {kind.toLowerCase()} API key</button>
      </form>
      <h4>Secrets</h4>
      <ul class="list">
        {SECRET_KINDS.map((s) => (
          <li key={s.kind}>
            <span>
              <strong>{s.label}</strong>
              <br />
              <span class="hint">{s.hint}</span>
            </span>
            <button
              type="button"
              onClick={() => {
                if (!confirm(`Rotate the ${kind.toLowerCase()} ${s.label.toLowerCase()}? The old one stops working at once.`)) return;
                void api.post<{ secret: string }>(`${base}/secrets/rotate`, { kind: s.kind }).then((r) => {
                  if (!r.ok) return setProblem(r.problem);
                  setShown({ label: `${kind} ${s.label.toLowerCase()}`, value: r.body.secret });
                });
              }}
            >
              Rotate<span class="sr-only"> the {s.label.toLowerCase()}</span>
            </button>
          </li>
        ))}
      </ul>
      <p role="status">{status}</p>
      <ProblemBox problem={problem} />
    </section>
  );
}

export function KeysView({ api, org }: { api: Api; org: Organization }) {
  return (
    <section>
      <ScreenTitle>API keys and secrets</ScreenTitle>
      <p>Your backend calls the API with an API key of one environment. Sandbox and production are separate: keys, secrets and data never cross.</p>
      <div class="side">
        {(['sandbox', 'production'] as const).map((k) => {
          const env = org.environments.find((e) => e.kind === k);
          return env ? <EnvironmentKeys key={env.id} api={api} org={org} env={env} /> : null;
        })}
      </div>
    </section>
  );
}
