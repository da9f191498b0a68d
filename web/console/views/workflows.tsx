// Over 400 lines: the workflow pages (list, versions, runs, switch-off) share their loaders and one state.
/**
 * Conversation workflows: the list with their states; one workflow's page with the draft's builder,
 * a test with a scripted conversation (the transcript turn by turn, each Destination request and
 * response as the service returns them, secrets redacted), the readiness checklist, switching on
 * and off, archive, restore, delete, the versions and the runs.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import { validateDefinition } from '../definition';
import { Go, Link, Organization, Route } from '../main';
import { EnvBadge, FieldError, Pager, ProblemBox, ScreenTitle, fieldError, invalid, when } from '../ui';
import { VersionRecord, Workflow } from '../workflow-model';
import { Builder } from './builder';
import type { Destination } from './destinations';

interface Props {
  api: Api;
  org: Organization;
  env: Organization['environments'][number];
  route: Route;
  go: Go;
}

interface Template {
  key: string;
  name: string;
  stableKey: string;
  description: string;
}

const pathOf = (org: Organization, env: Props['env']) => `/organizations/${org.id}/environments/${env.id}`;

export function stateOf(w: Workflow): { label: string; cls: string } {
  if (w.archivedAt) return { label: 'Archived', cls: 'archived' };
  if (w.active) return { label: `Live: version ${w.versions.find((v) => v.id === w.liveVersionId)?.number ?? '?'}`, cls: 'live' };
  return { label: 'Off', cls: 'off' };
}

function StateBadge({ w }: { w: Workflow }) {
  const s = stateOf(w);
  return <span class={`wf-state wf-${s.cls}`}>{s.label}</span>;
}

function useDestinations(api: Api, org: Organization, env: Props['env']) {
  const [list, setList] = useState<Destination[] | null>(null);
  useEffect(() => {
    void api.get<{ destinations: Destination[] }>(`${pathOf(org, env)}/destinations`).then((r) => r.ok && setList(r.body.destinations));
  }, [env.id]);
  return list;
}

function NewWorkflow({ api, base, destinations, onCreated }: { api: Api; base: string; destinations: Destination[] | null; onCreated: (w: Workflow) => void }) {
  const [templates, setTemplates] = useState<Template[]>([]);
  const [from, setFrom] = useState('');
  const [stableKey, setStableKey] = useState('');
  const [name, setName] = useState('');
  const [destination, setDestination] = useState('');
  const [problem, setProblem] = useState<Problem | null>(null);
  useEffect(() => {
    void api.get<{ templates: Template[] }>(`${base}/templates`).then((r) => r.ok && setTemplates(r.body.templates));
  }, [base]);
  const template = templates.find((t) => t.key === from);
  const err = (f: string) => fieldError(problem, f);
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        const req = template
          ? api.post<Workflow>(`${base}/from-template`, {
              templateKey: template.key,
              ...(stableKey.trim() ? { stableKey: stableKey.trim() } : {}),
              ...(name.trim() ? { name: name.trim() } : {}),
              ...(destination ? { destinationStableKey: destination } : {}),
            })
          : api.post<Workflow>(base, {
              stableKey: stableKey.trim(),
              name: name.trim(),
              // A blank workflow starts with one reply: staff build the rest in the builder.
              definition: {
                schema: 2,
                category: 'support',
                description: name.trim() || 'New workflow',
                triggerPhrases: [],
                steps: [{ id: 'hello', type: 'reply', message: 'Hello! How can I help?' }],
              },
            });
        void req.then((r) => (r.ok ? onCreated(r.body) : setProblem(r.problem)));
      }}
    >
      <fieldset>
        <legend>New workflow</legend>
        <label for="wf-from">Start from</label>
        <select id="wf-from" value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
          <option value="">a blank workflow</option>
          {templates.map((t) => (
            <option key={t.key} value={t.key}>
              the “{t.name}” template
            </option>
          ))}
        </select>
        {template ? <p class="hint">{template.description}</p> : null}
        <label for="wf-key">Stable key{template ? ` (optional; default ${template.stableKey})` : ''}</label>
        <input id="wf-key" class="mono" value={stableKey} onInput={(e) => setStableKey(e.currentTarget.value)} {...invalid('wf-key-err', err('stableKey'))} />
        <FieldError id="wf-key-err" message={err('stableKey')} />
        <label for="wf-name">Name{template ? ` (optional; default “${template.name}”)` : ''}</label>
        <input id="wf-name" value={name} onInput={(e) => setName(e.currentTarget.value)} {...invalid('wf-name-err', err('name'))} />
        <p class="hint">Staff see the name; patients do not.</p>
        <FieldError id="wf-name-err" message={err('name')} />
        {template ? (
          <>
            <label for="wf-dest">Destination it calls</label>
            <select id="wf-dest" value={destination} onChange={(e) => setDestination(e.currentTarget.value)}>
              <option value="">order_system (the template’s default)</option>
              {(destinations ?? []).map((d) => (
                <option key={d.id} value={d.stableKey}>
                  {d.name} ({d.stableKey})
                </option>
              ))}
            </select>
          </>
        ) : null}
        <button type="submit" class="primary">
          Create workflow
        </button>
      </fieldset>
      <ProblemBox problem={problem} />
    </form>
  );
}

function WorkflowList({ api, org, env, route, go }: Props) {
  const base = `${pathOf(org, env)}/conversation-workflows`;
  const destinations = useDestinations(api, org, env);
  const [list, setList] = useState<Workflow[] | null>(null);
  const [archived, setArchived] = useState(false);
  const [problem, setProblem] = useState<Problem | null>(null);
  useEffect(() => {
    void api.get<{ workflows: Workflow[] }>(base).then((r) => (r.ok ? setList(r.body.workflows) : setProblem(r.problem)));
  }, [env.id]);
  const shown = (list ?? []).filter((w) => archived || !w.archivedAt);
  return (
    <section>
      <ScreenTitle>
        Conversation workflows <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <p>
        The agent in the patient widget runs a live workflow when a patient's message matches one of its trigger phrases. Build a draft, test it, switch it on.
      </p>
      <label class="check">
        <input type="checkbox" checked={archived} onChange={(e) => setArchived(e.currentTarget.checked)} /> Show archived workflows
      </label>
      <ProblemBox problem={problem} />
      {list && shown.length === 0 ? <p>No workflows{archived ? '' : ' (archived ones aside)'} in this environment yet.</p> : null}
      {shown.length > 0 ? (
        <table>
          <caption class="sr-only">Workflows</caption>
          <thead>
            <tr>
              <th scope="col">Workflow</th>
              <th scope="col">Category</th>
              <th scope="col">State</th>
              <th scope="col">Draft</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((w) => {
              const draft = w.versions.find((v) => v.id === w.draftVersionId);
              return (
                <tr key={w.id} data-workflow={w.stableKey}>
                  <td>
                    <Link to={{ view: 'workflows', item: w.id }} route={route} go={go}>
                      {w.name}
                    </Link>
                    <br />
                    <code>{w.stableKey}</code>
                  </td>
                  <td>{w.category}</td>
                  <td>
                    <StateBadge w={w} />
                  </td>
                  <td>
                    {draft ? (
                      <>
                        version {draft.number}, revision {draft.revision}
                        <br />
                        <span class="hint">{testSummary(draft)}</span>
                      </>
                    ) : (
                      <span class="hint">none</span>
                    )}
                  </td>
                  <td>{when(w.updatedAt)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
      <NewWorkflow api={api} base={base} destinations={destinations} onCreated={(w) => go({ view: 'workflows', item: w.id })} />
    </section>
  );
}

const testSummary = (v: VersionRecord) =>
  !v.lastTest ? 'not tested' : `${v.lastTest.passed ? 'test passed' : 'test failed'} (revision ${v.lastTest.revision}, ${when(v.lastTest.at)})`;

// ---------- test ----------

interface TestStep {
  stepId: string;
  type: string;
  outcome: string;
  request?: { method: string; url: string; headers: Record<string, string>; body?: unknown };
  response?: { status: number | null; body?: unknown; error?: string };
}
interface TestResult {
  runId: string;
  passed: boolean;
  transcript: { from: 'patient' | 'agent'; text: string }[];
  steps: TestStep[];
}

/** Outcomes after which a run waits for the patient's next message. */
const WAITING = new Set(['asked', 'confirm_asked', 'invalid_answer']);

/** The transcript turn by turn (each patient message, the steps it ran, the agent's replies), or null when they cannot be lined up. */
export function turnsOf(r: TestResult): { patient: string; steps: TestStep[]; agent: string[] }[] | null {
  const turns: { patient: string; steps: TestStep[]; agent: string[] }[] = [];
  for (const m of r.transcript) {
    if (m.from === 'patient') turns.push({ patient: m.text, steps: [], agent: [] });
    else if (turns.length) turns[turns.length - 1].agent.push(m.text);
  }
  const groups: TestStep[][] = [[]];
  for (const s of r.steps) {
    groups[groups.length - 1].push(s);
    if (WAITING.has(s.outcome)) groups.push([]);
  }
  if (groups.length > turns.length && groups[groups.length - 1].length === 0) groups.pop();
  if (groups.length !== turns.length) return null;
  groups.forEach((g, i) => (turns[i].steps = g));
  return turns;
}

const json = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v, null, 2));

function StepTrace({ s }: { s: TestStep }) {
  return (
    <li class={`trace outcome-${s.outcome}`}>
      <code>{s.stepId}</code> <span class="hint">{s.type.replace('_', ' ')}</span> → <strong>{s.outcome.replace(/_/g, ' ')}</strong>
      {s.request ? (
        <details class="exchange">
          <summary>
            Request {s.request.method} <span class="mono">{s.request.url}</span> · response {s.response?.status ?? s.response?.error ?? 'none'}
          </summary>
          <div class="exchange-body">
            <h6>Request</h6>
            <p class="mono">
              {s.request.method} {s.request.url}
            </p>
            <table class="headers">
              <caption class="sr-only">Request headers</caption>
              <tbody>
                {Object.entries(s.request.headers).map(([k, v]) => (
                  <tr key={k}>
                    <th scope="row" class="mono">
                      {k}
                    </th>
                    <td class="mono">{v}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {s.request.body !== undefined ? (
              <pre class="code" tabIndex={0} aria-label={`Request body of ${s.stepId}`}>
                <code>{json(s.request.body)}</code>
              </pre>
            ) : null}
            <h6>Response</h6>
            {s.response?.status !== null && s.response?.status !== undefined ? (
              <p>Status {s.response.status}</p>
            ) : (
              <p>No answer: {s.response?.error ?? 'unknown'}</p>
            )}
            {s.response?.body !== undefined ? (
              <pre class="code" tabIndex={0} aria-label={`Response body of ${s.stepId}`}>
                <code>{json(s.response.body)}</code>
              </pre>
            ) : null}
          </div>
        </details>
      ) : null}
    </li>
  );
}

function Transcript({ r }: { r: TestResult }) {
  const turns = turnsOf(r);
  if (!turns)
    return (
      <div class="transcript">
        <ol class="messages">
          {r.transcript.map((m, i) => (
            <li key={i} class={`msg msg-${m.from}`}>
              <span class="who">{m.from === 'patient' ? 'Patient' : 'Agent'}</span> {m.text}
            </li>
          ))}
        </ol>
        <h5>Steps</h5>
        <ol class="traces">
          {r.steps.map((s, i) => (
            <StepTrace key={i} s={s} />
          ))}
        </ol>
      </div>
    );
  return (
    <ol class="transcript turns" aria-label="Transcript, turn by turn">
      {turns.map((t, i) => (
        <li key={i} class="turn">
          <p class="msg msg-patient">
            <span class="who">Patient</span> {t.patient}
          </p>
          {t.steps.length ? (
            <ol class="traces" aria-label={`Steps of turn ${i + 1}`}>
              {t.steps.map((s, j) => (
                <StepTrace key={j} s={s} />
              ))}
            </ol>
          ) : null}
          {t.agent.map((a, j) => (
            <p key={j} class="msg msg-agent">
              <span class="who">Agent</span> {a}
            </p>
          ))}
        </li>
      ))}
    </ol>
  );
}

function TestPanel({
  api,
  base,
  version,
  dirty,
  onTested,
}: {
  api: Api;
  base: string;
  version: VersionRecord;
  dirty: boolean;
  onTested: (stale: boolean) => void;
}) {
  const [opening, setOpening] = useState('');
  const [replies, setReplies] = useState('');
  const [patientId, setPatientId] = useState('');
  const [patientEmail, setPatientEmail] = useState('');
  const [result, setResult] = useState<TestResult | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [busy, setBusy] = useState(false);
  const err = (f: string) => fieldError(problem, f);
  return (
    <section aria-labelledby="test-h" class="card">
      <h3 id="test-h">Test version {version.number}</h3>
      <p>
        A scripted conversation with a sample patient. It calls your real Destinations (signed as in production), never messages a patient and uses no credit. A
        passing test of the current revision, less than 24 hours old, is what switching on needs.
      </p>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          const lines = replies.split('\n').filter((l) => l.trim() !== '');
          void api
            .post<TestResult>(`${base}/versions/${version.id}/test`, {
              expectedRevision: version.revision,
              opening,
              replies: lines,
              ...(patientId.trim() ? { patientId: patientId.trim() } : {}),
              ...(patientEmail.trim() ? { patientEmail: patientEmail.trim() } : {}),
            })
            .then((r) => {
              setBusy(false);
              if (!r.ok) {
                setProblem(r.problem);
                onTested(r.problem.code === 'STALE_REVISION');
                return;
              }
              setProblem(null);
              setResult(r.body);
              onTested(false);
            });
        }}
      >
        <label for="t-opening">The patient's first message</label>
        <input
          id="t-opening"
          value={opening}
          onInput={(e) => setOpening(e.currentTarget.value)}
          placeholder="where is my order"
          {...invalid('t-opening-err', err('opening'))}
        />
        <FieldError id="t-opening-err" message={err('opening')} />
        <label for="t-replies">The patient's next messages, one a line (optional)</label>
        <textarea id="t-replies" rows={3} value={replies} onInput={(e) => setReplies(e.currentTarget.value)} {...invalid('t-replies-err', err('replies'))} />
        <FieldError id="t-replies-err" message={err('replies')} />
        <div class="row">
          <span class="field">
            <label for="t-patient">Sample patient's id in your system</label>
            <input
              id="t-patient"
              class="mono"
              value={patientId}
              onInput={(e) => setPatientId(e.currentTarget.value)}
              {...invalid('t-patient-err', err('patientId'))}
            />
          </span>
          <span class="field">
            <label for="t-email">Sample patient's email</label>
            <input
              id="t-email"
              type="email"
              value={patientEmail}
              onInput={(e) => setPatientEmail(e.currentTarget.value)}
              {...invalid('t-email-err', err('patientEmail'))}
            />
          </span>
        </div>
        <FieldError id="t-patient-err" message={err('patientId')} />
        <FieldError id="t-email-err" message={err('patientEmail')} />
        <p class="hint">Without a sample patient id, a call that identifies the patient ends the run with “please sign in”, which does not pass.</p>
        {dirty ? <p class="warning">The builder has unsaved changes: a test runs the saved revision ({version.revision}). Save first.</p> : null}
        <button type="submit" class="primary" disabled={busy || dirty}>
          Run the test
        </button>
      </form>
      <ProblemBox problem={problem} />
      <div role="status">
        {result ? (
          <p class={result.passed ? 'ok' : 'bad'}>
            <strong>{result.passed ? 'Passed' : 'Did not pass'}</strong>: revision {version.revision}, run <code>{result.runId}</code>.
          </p>
        ) : null}
      </div>
      {result ? <Transcript r={result} /> : null}
    </section>
  );
}

// ---------- readiness ----------

interface Readiness {
  ready: boolean;
  blockers: { code: string; message: string }[];
}

const CHECKS: { codes: string[]; label: string }[] = [
  { codes: ['NOT_A_DRAFT'], label: 'It is a draft' },
  { codes: ['ARCHIVED'], label: 'The workflow is not archived' },
  { codes: ['NO_PASSING_TEST', 'TEST_OUTDATED'], label: 'A test of this revision passed within the last 24 hours' },
  { codes: ['DESTINATION_MISSING'], label: 'Every Destination it calls exists in this environment' },
];

function ReadinessPanel({
  api,
  base,
  workflow,
  version,
  dirty,
  onChanged,
}: {
  api: Api;
  base: string;
  workflow: Workflow;
  version: VersionRecord;
  dirty: boolean;
  onChanged: (w: Workflow | null, said?: string) => void;
}) {
  const [readiness, setReadiness] = useState<Readiness | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const valid = useMemo(() => validateDefinition(version.definition).length === 0, [version]);
  useEffect(() => {
    void api.get<Readiness>(`${base}/versions/${version.id}/readiness`).then((r) => (r.ok ? setReadiness(r.body) : setProblem(r.problem)));
  }, [version.id, version.revision, version.lastTest?.at, workflow.updatedAt]);
  const items = [
    { label: 'Everything in the builder is saved', ok: !dirty, why: 'Save the draft first.' },
    { label: 'The saved revision passes the service’s checks', ok: valid, why: 'Fix the problems the builder shows and save.' },
    ...CHECKS.map((c) => {
      const found = readiness?.blockers.filter((b) => c.codes.includes(b.code)) ?? [];
      return { label: c.label, ok: readiness ? found.length === 0 : null, why: found.map((b) => `${b.message} (${b.code})`).join('; ') };
    }),
  ];
  const ready = !!readiness?.ready && !dirty && valid;
  return (
    <section aria-labelledby="ready-h" class="card">
      <h3 id="ready-h">Ready to switch on?</h3>
      <ul class="checklist">
        {items.map((it) => (
          <li key={it.label} class={it.ok === null ? '' : it.ok ? 'done' : 'todo'}>
            <span aria-hidden="true">{it.ok === null ? '…' : it.ok ? '✓' : '✗'}</span>{' '}
            <span class="sr-only">{it.ok === null ? 'checking: ' : it.ok ? 'done: ' : 'missing: '}</span>
            {it.label}
            {it.ok === false && it.why ? <span class="hint"> — {it.why}</span> : null}
          </li>
        ))}
      </ul>
      <button
        type="button"
        class="primary"
        disabled={!ready}
        onClick={() =>
          void api.post<Workflow>(`${base}/versions/${version.id}/activate`, { expectedRevision: version.revision }).then((r) => {
            if (!r.ok) {
              setProblem(r.problem);
              onChanged(null);
              return;
            }
            setProblem(null);
            onChanged(r.body, `Version ${version.number} is live: patients' matching messages now start it.`);
          })
        }
      >
        Switch on version {version.number}
      </button>
      <ProblemBox problem={problem} />
    </section>
  );
}

// ---------- runs ----------

interface Run {
  runId: string;
  versionId: string;
  test?: boolean;
  startedAt: string;
  endedAt: string | null;
  outcome: string;
  steps: { stepId: string; type: string; outcome: string }[];
}

function Runs({ api, base, workflow, stamp }: { api: Api; base: string; workflow: Workflow; stamp: number }) {
  const [page, setPage] = useState<{ cursors: (string | null)[]; runs: Run[]; nextCursor: string | null } | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const load = async (cursors: (string | null)[]) => {
    const q = new URLSearchParams({ limit: '10' });
    const cursor = cursors[cursors.length - 1];
    if (cursor) q.set('cursor', cursor);
    const r = await api.get<{ runs: Run[]; nextCursor: string | null }>(`${base}/${workflow.id}/runs?${q}`);
    if (!r.ok) return setProblem(r.problem);
    setProblem(null);
    setPage({ cursors, runs: r.body.runs, nextCursor: r.body.nextCursor });
  };
  useEffect(() => void load([null]), [workflow.id, stamp]);
  const number = (id: string) => workflow.versions.find((v) => v.id === id)?.number ?? '?';
  return (
    <section aria-labelledby="runs-h">
      <h3 id="runs-h">Runs</h3>
      <p class="hint">Newest first, tests included. Outcomes only: what the patient said and what your systems answered are never kept here.</p>
      <div class="toolbar">
        <button type="button" onClick={() => void load(page?.cursors ?? [null])}>
          Refresh runs
        </button>
      </div>
      <ProblemBox problem={problem} />
      {page && page.runs.length === 0 ? <p>No runs yet.</p> : null}
      {page && page.runs.length > 0 ? (
        <table class="runs">
          <caption class="sr-only">Runs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Started</th>
              <th scope="col">Version</th>
              <th scope="col">Outcome</th>
              <th scope="col">Steps</th>
            </tr>
          </thead>
          <tbody>
            {page.runs.map((r) => (
              <tr key={r.runId} data-run={r.runId}>
                <td>
                  {when(r.startedAt)}
                  {r.test ? <span class="tag">test</span> : null}
                  <br />
                  <span class="hint">{r.endedAt ? `ended ${when(r.endedAt)}` : 'waiting for the patient'}</span>
                </td>
                <td>{number(r.versionId)}</td>
                <td>
                  <strong class={`outcome outcome-${r.outcome}`}>{r.outcome.replace(/_/g, ' ')}</strong>
                </td>
                <td>
                  <ol class="run-steps">
                    {r.steps.map((s, i) => (
                      <li key={i}>
                        <code>{s.stepId}</code> {s.outcome.replace(/_/g, ' ')}
                      </li>
                    ))}
                  </ol>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <Pager page={page} load={(c) => void load(c)} />
    </section>
  );
}

// ---------- one workflow ----------

function Versions({ api, base, workflow, onChanged }: { api: Api; base: string; workflow: Workflow; onChanged: () => void }) {
  const [problem, setProblem] = useState<Problem | null>(null);
  const others = workflow.versions.some((v) => v.state === 'live' || v.state === 'retired');
  return (
    <section aria-labelledby="versions-h">
      <h3 id="versions-h">Versions</h3>
      <table>
        <caption class="sr-only">Versions of {workflow.name}</caption>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">State</th>
            <th scope="col">Revision</th>
            <th scope="col">Last test</th>
            <th scope="col">Switched on</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {workflow.versions
            .filter((v) => v.state !== 'discarded')
            .map((v) => (
              <tr key={v.id}>
                <td>{v.number}</td>
                <td>{v.state}</td>
                <td>{v.revision}</td>
                <td>{testSummary(v)}</td>
                <td>{when(v.activatedAt)}</td>
                <td>
                  {v.state === 'draft' && others ? (
                    <button
                      type="button"
                      class="danger"
                      onClick={() => {
                        if (!confirm(`Discard the draft (version ${v.number})? The live or last live version stays as it is.`)) return;
                        void api.del(`${base}/versions/${v.id}`).then((r) => (r.ok ? onChanged() : setProblem(r.problem)));
                      }}
                    >
                      Discard draft<span class="sr-only"> version {v.number}</span>
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
        </tbody>
      </table>
      <ProblemBox problem={problem} />
    </section>
  );
}

function WorkflowPage({ api, org, env, route, go }: Props) {
  const base = `${pathOf(org, env)}/conversation-workflows`;
  const id = route.item!;
  const destinations = useDestinations(api, org, env);
  const [workflow, setWorkflow] = useState<Workflow | null>(null);
  const [missing, setMissing] = useState(false);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [said, setSaid] = useState('');
  const [dirty, setDirty] = useState(false);
  const [name, setName] = useState('');
  const [stamp, setStamp] = useState(0);
  const reload = async (): Promise<Workflow | null> => {
    const r = await api.get<{ workflows: Workflow[] }>(base);
    if (!r.ok) {
      setProblem(r.problem);
      return null;
    }
    const w = r.body.workflows.find((x) => x.id === id) ?? null;
    setWorkflow(w);
    setMissing(!w);
    if (w) setName(w.name);
    return w;
  };
  useEffect(() => void reload(), [id]);
  const act = (path: string, done: string, method: 'post' | 'del' = 'post') =>
    void (method === 'post' ? api.post<Workflow>(`${base}/${id}/${path}`) : api.del(`${base}/${id}`)).then(async (r) => {
      if (!r.ok) {
        setProblem(r.problem);
        await reload();
        return;
      }
      setProblem(null);
      setSaid(done);
      if (method === 'del') return go({ view: 'workflows' });
      await reload();
    });
  if (missing)
    return (
      <section>
        <ScreenTitle>Workflow not found</ScreenTitle>
        <p>
          It was deleted, or it belongs to another environment.{' '}
          <Link to={{ view: 'workflows' }} route={route} go={go}>
            All workflows
          </Link>
        </p>
      </section>
    );
  const draft = workflow?.versions.find((v) => v.id === workflow.draftVersionId) ?? null;
  const live = workflow?.versions.find((v) => v.id === workflow.liveVersionId) ?? null;
  const latest = workflow ? [...workflow.versions].filter((v) => v.state !== 'discarded').sort((a, b) => b.number - a.number)[0] : null;
  return (
    <section class="workflow-page">
      <ScreenTitle>
        {workflow ? workflow.name : 'Workflow'} {workflow ? <StateBadge w={workflow} /> : null} <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <p>
        <Link to={{ view: 'workflows' }} route={route} go={go}>
          All workflows
        </Link>
        {workflow ? (
          <span>
            {' '}
            · <code>{workflow.stableKey}</code> · {workflow.category}
          </span>
        ) : null}
      </p>
      {workflow ? (
        <>
          <div class="toolbar lifecycle">
            {workflow.active ? (
              <button
                type="button"
                onClick={() =>
                  confirm(
                    `Switch off ${workflow.name}? Patients' messages no longer start it; a run waiting for the patient stops at its next step. The live version is kept as retired.`,
                  ) && act('deactivate', `${workflow.name} is switched off.`)
                }
              >
                Switch off
              </button>
            ) : null}
            {!draft && !workflow.archivedAt ? (
              <button
                type="button"
                onClick={() =>
                  void api.post<VersionRecord>(`${base}/${id}/draft`).then(async (r) => {
                    if (!r.ok) return setProblem(r.problem);
                    setSaid(
                      `Draft version ${r.body.number} was created from the ${live ? 'live' : 'latest'} version; ${live ? 'the live version keeps running meanwhile' : 'edit it below'}.`,
                    );
                    await reload();
                  })
                }
              >
                Edit in a new draft
              </button>
            ) : null}
            {workflow.archivedAt ? (
              <button type="button" onClick={() => act('restore', `${workflow.name} is restored, still switched off.`)}>
                Restore
              </button>
            ) : workflow.everLive ? (
              <button
                type="button"
                class="danger"
                onClick={() =>
                  confirm(
                    `Archive ${workflow.name}? It is switched off and never matched; its versions and runs are kept. Restore brings it back, switched off.`,
                  ) && act('archive', `${workflow.name} is archived.`)
                }
              >
                Archive
              </button>
            ) : null}
            {!workflow.everLive ? (
              <button
                type="button"
                class="danger"
                onClick={() =>
                  confirm(`Delete ${workflow.name} with its drafts and test results? It has never been live.`) &&
                  act('', `${workflow.name} was deleted.`, 'del')
                }
              >
                Delete
              </button>
            ) : null}
            <form
              class="inline rename"
              onSubmit={(e) => {
                e.preventDefault();
                void api.send<Workflow>(`${base}/${id}`, { method: 'PATCH', body: { name: name.trim() } }).then((r) => {
                  if (!r.ok) return setProblem(r.problem);
                  setProblem(null);
                  setWorkflow(r.body);
                  setSaid(`Renamed to ${r.body.name}.`);
                });
              }}
            >
              <label for="wf-rename">Name</label>
              <input id="wf-rename" value={name} onInput={(e) => setName(e.currentTarget.value)} {...invalid('wf-rename-err', fieldError(problem, 'name'))} />
              <button type="submit" disabled={name.trim() === workflow.name}>
                Rename
              </button>
              <FieldError id="wf-rename-err" message={fieldError(problem, 'name')} />
            </form>
          </div>
          {workflow.archivedAt ? <p class="notice">Archived {when(workflow.archivedAt)}: it cannot be edited or switched on until it is restored.</p> : null}
          {!workflow.everLive ? <p class="hint">It has never been live: it can still be deleted. Once live, it can only be archived.</p> : null}
          <p role="status">{said}</p>
          <ProblemBox problem={problem} />
          {draft ? (
            <Builder
              key={draft.id}
              api={api}
              base={base}
              workflow={workflow}
              version={draft}
              destinations={destinations}
              reload={reload}
              onSaved={(w) => setWorkflow(w)}
              onDirty={setDirty}
              route={route}
              go={go}
            />
          ) : (
            <section aria-labelledby="def-h">
              <h3 id="def-h">{live ? `Live version ${live.number}` : latest ? `Version ${latest.number} (${latest.state})` : 'Definition'}</h3>
              <p>No draft: “Edit in a new draft” copies this version into one; what is live keeps running meanwhile.</p>
              <pre class="code" tabIndex={0} aria-label="Definition">
                <code>{JSON.stringify((live ?? latest)?.definition ?? {}, null, 2)}</code>
              </pre>
            </section>
          )}
          {draft || live ? (
            <div class="side">
              <TestPanel
                key={(draft ?? live)!.id}
                api={api}
                base={base}
                version={(draft ?? live)!}
                dirty={!!draft && dirty}
                onTested={(stale) => {
                  if (stale)
                    setSaid(
                      'The draft was saved elsewhere meanwhile: the builder now shows the newest revision (or what changed, if you have unsaved changes). Test again.',
                    );
                  setStamp((n) => n + 1);
                  void reload();
                }}
              />
              {draft ? (
                <ReadinessPanel
                  api={api}
                  base={base}
                  workflow={workflow}
                  version={draft}
                  dirty={dirty}
                  onChanged={(w, message) => {
                    if (message) setSaid(message);
                    if (w) setWorkflow(w);
                    else void reload();
                  }}
                />
              ) : null}
            </div>
          ) : null}
          <Versions api={api} base={base} workflow={workflow} onChanged={() => void reload()} />
          <Runs api={api} base={base} workflow={workflow} stamp={stamp} />
        </>
      ) : problem ? (
        <ProblemBox problem={problem} />
      ) : (
        <p role="status">Loading the workflow…</p>
      )}
    </section>
  );
}

export function WorkflowsView(props: Props) {
  return props.route.item ? <WorkflowPage {...props} /> : <WorkflowList {...props} />;
}
