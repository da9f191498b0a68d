/** Clinical cases: the list by status and deadline (overdue first, highlighted), one case's timeline, acknowledge; a case from the team chat. */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import { Go, Link, Organization, Route } from '../main';
import { EnvBadge, FieldError, Pager, ProblemBox, ScreenTitle, fieldError, invalid, when } from '../ui';
import { SendCheckIn } from './protocols';

interface CaseSummary {
  caseId: string;
  reference: string;
  patientId: string;
  priority: 'emergency' | 'urgent' | 'routine';
  source: string;
  status: string;
  openedAt: string;
  confirmationDueAt: string;
  confirmationOverdue: boolean;
  scheduledFor: string | null;
  acknowledgedAt: string | null;
  resolvedAt: string | null;
  updatedAt: string;
}
interface CaseDetail extends CaseSummary {
  matchedRules: string[];
  internalNote: string | null;
  patientNotes: string | null;
  externalReference: string | null;
  resolutionOutcome: string | null;
  resolutionNote: string | null;
}

interface Props {
  api: Api;
  org: Organization;
  env: Organization['environments'][number];
  route: Route;
  go: Go;
}

const STATUSES = ['awaiting_processing', 'processed', 'scheduled', 'clinician_responded', 'patient_contacted', 'resolved'];

function NewCase({ api, base, onOpened }: { api: Api; base: string; onOpened: (id: string) => void }) {
  const [patientId, setPatientId] = useState('');
  const [request, setRequest] = useState('');
  const [problem, setProblem] = useState<Problem | null>(null);
  const pErr = fieldError(problem, 'patientId');
  const rErr = fieldError(problem, 'request');
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        void api
          .post<{ caseId: string }>(base, { patientId: patientId.trim(), request: request.trim() })
          .then((r) => (r.ok ? onOpened(r.body.caseId) : setProblem(r.problem)));
      }}
    >
      <fieldset>
        <legend>Open a case from the team chat</legend>
        <label for="c-patient">Patient id</label>
        <input
          id="c-patient"
          required
          value={patientId}
          onInput={(e) => setPatientId(e.currentTarget.value)}
          class="mono"
          {...invalid('c-patient-err', pErr)}
        />
        <FieldError id="c-patient-err" message={pErr} />
        <label for="c-request">Request</label>
        <textarea id="c-request" required rows={3} value={request} onInput={(e) => setRequest(e.currentTarget.value)} {...invalid('c-request-err', rErr)} />
        <FieldError id="c-request-err" message={rErr} />
        <button type="submit">Open case</button>
      </fieldset>
      <ProblemBox problem={problem} />
    </form>
  );
}

function CaseList({ api, org, env, route, go }: Props) {
  const base = `/organizations/${org.id}/environments/${env.id}/clinical-cases`;
  const [status, setStatus] = useState('');
  const [page, setPage] = useState<{ cursors: (string | null)[]; cases: CaseSummary[]; nextCursor: string | null } | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const load = async (cursors: (string | null)[]) => {
    const q = new URLSearchParams({ limit: '50' });
    const cursor = cursors[cursors.length - 1];
    if (cursor) q.set('cursor', cursor);
    const r = await api.get<{ clinicalCases: CaseSummary[]; nextCursor: string | null }>(`${base}?${q}`);
    if (!r.ok) return setProblem(r.problem);
    setPage({ cursors, cases: r.body.clinicalCases, nextCursor: r.body.nextCursor });
  };
  useEffect(() => void load([null]), [env.id]);
  // Overdue first, then by deadline (soonest first); resolved ones last.
  const shown = (page?.cases ?? [])
    .filter((c) => !status || c.status === status)
    .sort(
      (a, b) =>
        Number(a.status === 'resolved') - Number(b.status === 'resolved') ||
        Number(b.confirmationOverdue) - Number(a.confirmationOverdue) ||
        a.confirmationDueAt.localeCompare(b.confirmationDueAt),
    );
  return (
    <section>
      <ScreenTitle>
        Clinical cases <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <div class="toolbar">
        <label for="c-status">Status</label>
        <select id="c-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)}>
          <option value="">any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.replace(/_/g, ' ')}
            </option>
          ))}
        </select>
        <button type="button" onClick={() => page && void load(page.cursors)}>
          Refresh
        </button>
      </div>
      <ProblemBox problem={problem} />
      {page && shown.length === 0 ? <p>No cases{status ? ` with status ${status.replace(/_/g, ' ')}` : ''} on this page.</p> : null}
      {shown.length > 0 ? (
        <table>
          <caption class="sr-only">Cases, overdue first, then by confirmation deadline</caption>
          <thead>
            <tr>
              <th scope="col">Case</th>
              <th scope="col">Priority</th>
              <th scope="col">Status</th>
              <th scope="col">Confirmation due</th>
              <th scope="col">Opened</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((c) => (
              <tr key={c.caseId} class={c.confirmationOverdue && c.status !== 'resolved' ? 'overdue' : ''}>
                <td>
                  <Link to={{ view: 'cases', item: c.caseId }} route={route} go={go}>
                    {c.reference}
                  </Link>
                  <br />
                  <span class="hint">{c.source.replace(/_/g, ' ')}</span>
                </td>
                <td>
                  <span class={`prio prio-${c.priority}`}>{c.priority}</span>
                </td>
                <td>{c.status.replace(/_/g, ' ')}</td>
                <td>
                  {when(c.confirmationDueAt)}
                  {c.confirmationOverdue && c.status !== 'resolved' ? <strong class="bad"> overdue</strong> : null}
                </td>
                <td>{when(c.openedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <Pager page={page} load={(c) => void load(c)} />
      <NewCase api={api} base={base} onOpened={(id) => go({ view: 'cases', item: id })} />
    </section>
  );
}

function CaseView({ api, org, env, route, go }: Props) {
  const base = `/organizations/${org.id}/environments/${env.id}/clinical-cases/${route.item}`;
  const [c, setC] = useState<CaseDetail | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const load = async () => {
    const r = await api.get<CaseDetail>(base);
    if (r.ok) setC(r.body);
    else setProblem(r.problem);
  };
  useEffect(() => void load(), [route.item]);
  const timeline = c
    ? (
        [
          ['Opened', c.openedAt],
          ['Confirmation due', c.confirmationDueAt],
          ['Acknowledged', c.acknowledgedAt],
          ['Scheduled for', c.scheduledFor],
          ['Resolved', c.resolvedAt],
          ['Last update', c.updatedAt],
        ].filter(([, at]) => at) as [string, string][]
      ).sort((a, b) => a[1].localeCompare(b[1]))
    : [];
  return (
    <section>
      <ScreenTitle>
        Case {c?.reference ?? ''} <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <p>
        <Link to={{ view: 'cases' }} route={route} go={go}>
          All cases
        </Link>
      </p>
      <ProblemBox problem={problem} />
      {c ? (
        <div>
          <dl class="facts">
            <dt>Priority</dt>
            <dd>
              <span class={`prio prio-${c.priority}`}>{c.priority}</span>
            </dd>
            <dt>Status</dt>
            <dd>
              {c.status.replace(/_/g, ' ')}
              {c.confirmationOverdue && c.status !== 'resolved' ? <strong class="bad"> (confirmation overdue)</strong> : null}
            </dd>
            <dt>Source</dt>
            <dd>{c.source.replace(/_/g, ' ')}</dd>
            <dt>Patient</dt>
            <dd>
              <span class="mono">{c.patientId}</span>
              <SendCheckIn api={api} org={org} env={env} patientId={c.patientId} />
            </dd>
            {c.internalNote ? (
              <>
                <dt>Team request</dt>
                <dd>{c.internalNote}</dd>
              </>
            ) : null}
            {c.matchedRules.length ? (
              <>
                <dt>Matched rules</dt>
                <dd>{c.matchedRules.join(', ')}</dd>
              </>
            ) : null}
          </dl>
          <h3>Timeline</h3>
          <ol class="timeline">
            {timeline.map(([what, at]) => (
              <li key={what}>
                <strong>{what}</strong> {when(at)}
              </li>
            ))}
          </ol>
          {c.acknowledgedAt ? null : (
            <button
              type="button"
              class="primary"
              onClick={() => void api.post(`${base}/acknowledge`).then((r) => (r.ok ? void load() : setProblem(r.problem)))}
            >
              Acknowledge
            </button>
          )}
        </div>
      ) : null}
    </section>
  );
}

export function CasesView(props: Props) {
  return props.route.item ? <CaseView {...props} /> : <CaseList {...props} />;
}
