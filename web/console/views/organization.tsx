/** Organizations: create one, its members (invite, change role, remove), the BAA, its two environments. */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import type { Organization } from '../main';
import { EnvBadge, FieldError, ProblemBox, ScreenTitle, fieldError, invalid, when } from '../ui';

export function CreateOrganization({ api, first, onCreated }: { api: Api; first: boolean; onCreated: (o: Organization) => void }) {
  const [name, setName] = useState('');
  const [problem, setProblem] = useState<Problem | null>(null);
  const [busy, setBusy] = useState(false);
  const err = fieldError(problem, 'name');
  return (
    <section>
      <ScreenTitle>{first ? 'Create your organization' : 'New organization'}</ScreenTitle>
      {first ? (
        <p>You are not a member of any organization yet. Create one: you become its owner, and it gets a sandbox and a production environment.</p>
      ) : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          void api.post<Organization>('/organizations', { name: name.trim() }).then((r) => {
            setBusy(false);
            if (r.ok) onCreated(r.body);
            else setProblem(r.problem);
          });
        }}
      >
        <label for="org-name">Organization name</label>
        <input id="org-name" required maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} {...invalid('org-name-err', err)} />
        <FieldError id="org-name-err" message={err} />
        <button type="submit" class="primary" disabled={busy}>
          Create organization
        </button>
      </form>
      <ProblemBox problem={problem} />
    </section>
  );
}

interface Member {
  sub: string;
  email: string;
  role: 'owner' | 'admin' | 'member';
  addedAt: string;
}

function Baa({ api, org, onSigned }: { api: Api; org: Organization; onSigned: () => void }) {
  const [signerName, setSignerName] = useState('');
  const [signerTitle, setSignerTitle] = useState('');
  const [problem, setProblem] = useState<Problem | null>(null);
  if (org.baaSignedAt)
    return (
      <section aria-labelledby="baa-h">
        <h3 id="baa-h">Business Associate Agreement</h3>
        <p class="ok">Signed {when(org.baaSignedAt)}.</p>
      </section>
    );
  return (
    <section aria-labelledby="baa-h" class="card">
      <h3 id="baa-h">Business Associate Agreement</h3>
      <p>
        Until it is signed, the API refuses every API-key call (403 BAA_REQUIRED) and workflow tests that call a Destination. Signing takes effect at once and
        needs the role owner or admin.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void api.post(`/organizations/${org.id}/baa`, { signerName: signerName.trim(), signerTitle: signerTitle.trim() }).then((r) => {
            if (r.ok) onSigned();
            else setProblem(r.problem);
          });
        }}
      >
        <label for="baa-name">Signer's full name</label>
        <input id="baa-name" required value={signerName} onInput={(e) => setSignerName(e.currentTarget.value)} autoComplete="name" />
        <label for="baa-title">Signer's title</label>
        <input id="baa-title" required value={signerTitle} onInput={(e) => setSignerTitle(e.currentTarget.value)} autoComplete="organization-title" />
        <button type="submit" class="primary">
          Sign the BAA
        </button>
      </form>
      <ProblemBox problem={problem} />
    </section>
  );
}

function Members({ api, org, me }: { api: Api; org: Organization; me: string }) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [sub, setSub] = useState('');
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<'admin' | 'member'>('member');
  const [status, setStatus] = useState('');
  const load = async () => {
    const r = await api.get<{ members: Member[] }>(`/organizations/${org.id}/members`);
    if (r.ok) setMembers(r.body.members);
    else setProblem(r.problem);
  };
  useEffect(() => void load(), [org.id]);
  const act = async (p: Promise<{ ok: boolean; problem?: Problem }>, done: string) => {
    const r = (await p) as { ok: true } | { ok: false; problem: Problem };
    if (!r.ok) return setProblem(r.problem);
    setProblem(null);
    setStatus(done);
    await load();
  };
  return (
    <section aria-labelledby="members-h">
      <h3 id="members-h">Members</h3>
      {members ? (
        <table>
          <caption class="sr-only">Members of {org.name}</caption>
          <thead>
            <tr>
              <th scope="col">Subject</th>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Added</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {members.map((m) => (
              <tr key={m.sub}>
                <td class="mono">
                  {m.sub}
                  {m.sub === me ? ' (you)' : ''}
                </td>
                <td>{m.email}</td>
                <td>
                  <select
                    aria-label={`Role of ${m.email}`}
                    value={m.role}
                    onChange={(e) =>
                      void act(
                        api.post(`/organizations/${org.id}/members`, { sub: m.sub, email: m.email, role: e.currentTarget.value }),
                        `${m.email} is now ${e.currentTarget.value}.`,
                      )
                    }
                  >
                    {m.role === 'owner' ? <option value="owner">owner</option> : null}
                    <option value="admin">admin</option>
                    <option value="member">member</option>
                  </select>
                </td>
                <td>{when(m.addedAt)}</td>
                <td>
                  <button
                    type="button"
                    class="danger"
                    onClick={() =>
                      confirm(`Remove ${m.email} from ${org.name}?`) &&
                      void act(api.del(`/organizations/${org.id}/members/${encodeURIComponent(m.sub)}`), `${m.email} was removed.`)
                    }
                  >
                    Remove<span class="sr-only"> {m.email}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void act(api.post(`/organizations/${org.id}/members`, { sub: sub.trim(), email: email.trim(), role }), `${email.trim()} was added as ${role}.`).then(
            () => {
              setSub('');
              setEmail('');
            },
          );
        }}
      >
        <fieldset>
          <legend>Invite a member</legend>
          <label for="m-sub">Subject (their identity provider's user id)</label>
          <input id="m-sub" required value={sub} onInput={(e) => setSub(e.currentTarget.value)} />
          <label for="m-email">Email</label>
          <input id="m-email" type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
          <label for="m-role">Role</label>
          <select id="m-role" value={role} onChange={(e) => setRole(e.currentTarget.value as 'admin' | 'member')}>
            <option value="member">member (clinical work)</option>
            <option value="admin">admin (also integration set-up)</option>
          </select>
          <button type="submit">Add member</button>
        </fieldset>
      </form>
      <p role="status">{status}</p>
      <ProblemBox problem={problem} />
    </section>
  );
}

export function OrganizationView({ api, org, me, onChanged }: { api: Api; org: Organization; me: string; onChanged: () => Promise<void> }) {
  return (
    <section>
      <ScreenTitle>{org.name}</ScreenTitle>
      <Baa api={api} org={org} onSigned={() => void onChanged()} />
      <section aria-labelledby="envs-h">
        <h3 id="envs-h">Environments</h3>
        <div class="side">
          {org.environments.map((e) => (
            <div key={e.id} class={`card env-card env-${e.kind}`}>
              <p>
                <EnvBadge kind={e.kind} />
              </p>
              <p>
                Environment id <code class="mono">{e.id}</code>
              </p>
              <p class="hint">{e.kind === 'production' ? 'Real patients. API keys begin svc_prod_.' : 'For building and testing. API keys begin svc_sb_.'}</p>
            </div>
          ))}
        </div>
      </section>
      <Members api={api} org={org} me={me} />
    </section>
  );
}
