/** Webhook endpoints (create, rotate, delete; secret shown once), each one's delivery log, and the receiver snippet. */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import { Go, Link, Organization, Route } from '../main';
import { EnvBadge, FieldError, Pager, ProblemBox, ScreenTitle, SecretOnce, fieldError, invalid, when } from '../ui';

/** The event catalog (the contract's WebhookEventType). */
export const EVENT_TYPES = [
  { type: 'clinical_case.opened', label: 'A clinical case was opened' },
  { type: 'clinical_case.patient_message_created', label: 'The patient wrote in a case thread' },
  { type: 'clinical_case.acknowledged', label: 'A case was acknowledged' },
  { type: 'clinical_case.resolved', label: 'A case was resolved' },
  { type: 'billing.usage_threshold_reached', label: 'Usage crossed 80, 95 or 100% of the month’s credits' },
  { type: 'subscription.updated', label: 'The subscription status changed' },
];

interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  createdAt: string;
}
interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  status: 'pending' | 'held' | 'delivered' | 'failed';
  attempts: { at: string; statusCode: number | null; durationMs: number; error: string | null }[];
  nextAttemptAt: string | null;
}

interface Props {
  api: Api;
  org: Organization;
  env: Organization['environments'][number];
  route: Route;
  go: Go;
}

function Receiver({ secret }: { secret: string | null }) {
  return (
    <details class="receiver">
      <summary>Receiver snippet (Node.js, no dependencies)</summary>
      <p>
        Save it as <code>webhook-receiver.js</code> and run it where your endpoint's URL points. It checks the signature and the timestamp before reading the
        body, answers 2xx at once, and ignores an event id it has seen (retries carry the same id).
      </p>
      <pre class="code" tabIndex={0} aria-label="Command">
        <code>{`WEBHOOK_SECRET=${secret ?? 'whsec_…'} PORT=8080 node webhook-receiver.js`}</code>
      </pre>
      <pre class="code" tabIndex={0} aria-label="webhook-receiver.js">
        <code>{__WEBHOOK_RECEIVER__}</code>
      </pre>
    </details>
  );
}

function Endpoints({ api, org, env, route, go }: Props) {
  const base = `/organizations/${org.id}/environments/${env.id}/webhook-endpoints`;
  const [list, setList] = useState<Endpoint[] | null>(null);
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>(['clinical_case.opened']);
  const [shown, setShown] = useState<{ label: string; value: string } | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const load = async () => {
    const r = await api.get<{ webhookEndpoints: Endpoint[] }>(base);
    if (r.ok) setList(r.body.webhookEndpoints);
    else setProblem(r.problem);
  };
  useEffect(() => void load(), [env.id]);
  const urlErr = fieldError(problem, 'url');
  const eventsErr = fieldError(problem, 'events');
  return (
    <section>
      <ScreenTitle>
        Webhook endpoints <EnvBadge kind={env.kind} />
      </ScreenTitle>
      {list && list.length === 0 ? <p>No endpoints in this environment yet.</p> : null}
      {list && list.length > 0 ? (
        <ul class="list endpoints">
          {list.map((e) => (
            <li key={e.id}>
              <span>
                <strong class="mono">{e.url}</strong>
                {e.description ? <span> — {e.description}</span> : null}
                <br />
                <span class="hint">{e.events.join(', ')}</span>
              </span>
              <span class="actions">
                <Link to={{ view: 'webhooks', item: e.id }} route={route} go={go}>
                  Delivery log<span class="sr-only"> of {e.url}</span>
                </Link>
                <button
                  type="button"
                  onClick={() => {
                    if (!confirm(`Rotate the signing secret of ${e.url}? Deliveries are signed with the new one at once.`)) return;
                    void api.post<{ secret: string }>(`${base}/${e.id}/rotate-secret`).then((r) => {
                      if (!r.ok) return setProblem(r.problem);
                      setShown({ label: `Signing secret of ${e.url}`, value: r.body.secret });
                    });
                  }}
                >
                  Rotate secret<span class="sr-only"> of {e.url}</span>
                </button>
                <button
                  type="button"
                  class="danger"
                  onClick={() => {
                    if (!confirm(`Delete the endpoint ${e.url}? Nothing more is sent to it.`)) return;
                    void api.del(`${base}/${e.id}`).then((r) => (r.ok ? void load() : setProblem(r.problem)));
                  }}
                >
                  Delete<span class="sr-only"> {e.url}</span>
                </button>
              </span>
            </li>
          ))}
        </ul>
      ) : null}
      {shown ? <SecretOnce label={shown.label} value={shown.value} onDone={() => setShown(null)} /> : null}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void api
            .post<Endpoint & { secret: string }>(base, { url: url.trim(), events, ...(description.trim() ? { description: description.trim() } : {}) })
            .then((r) => {
              if (!r.ok) return setProblem(r.problem);
              setProblem(null);
              setUrl('');
              setDescription('');
              setShown({ label: `Signing secret of ${r.body.url}`, value: r.body.secret });
              void load();
            });
        }}
      >
        <fieldset>
          <legend>Add an endpoint</legend>
          <label for="wh-url">URL</label>
          <input
            id="wh-url"
            type="url"
            required
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
            placeholder="https://example.com/webhooks"
            {...invalid('wh-url-err', urlErr)}
          />
          <FieldError id="wh-url-err" message={urlErr} />
          <label for="wh-desc">Description (optional)</label>
          <input id="wh-desc" maxLength={300} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
          <fieldset class="events" aria-describedby={eventsErr ? 'wh-events-err' : undefined}>
            <legend>Events to send</legend>
            {EVENT_TYPES.map((t) => (
              <label key={t.type} class="check">
                <input
                  type="checkbox"
                  value={t.type}
                  checked={events.includes(t.type)}
                  onChange={(ev) => setEvents(ev.currentTarget.checked ? [...events, t.type] : events.filter((x) => x !== t.type))}
                />{' '}
                <code>{t.type}</code> <span class="hint">{t.label}</span>
              </label>
            ))}
            <FieldError id="wh-events-err" message={eventsErr} />
          </fieldset>
          <button type="submit" class="primary">
            Add endpoint
          </button>
        </fieldset>
      </form>
      <ProblemBox problem={problem} />
      <Receiver secret={null} />
    </section>
  );
}

const STATUSES = ['', 'pending', 'held', 'delivered', 'failed'] as const;

function Deliveries({ api, org, env, route, go }: Props) {
  const endpointId = route.item!;
  const base = `/organizations/${org.id}/environments/${env.id}/webhook-endpoints`;
  const [endpoint, setEndpoint] = useState<Endpoint | null>(null);
  const [status, setStatus] = useState<(typeof STATUSES)[number]>('');
  const [page, setPage] = useState<{ cursors: (string | null)[]; deliveries: Delivery[]; nextCursor: string | null } | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [said, setSaid] = useState('');
  const load = async (cursors: (string | null)[]) => {
    const q = new URLSearchParams({ limit: '20' });
    if (status) q.set('status', status);
    const cursor = cursors[cursors.length - 1];
    if (cursor) q.set('cursor', cursor);
    const r = await api.get<{ deliveries: Delivery[]; nextCursor: string | null }>(`${base}/${endpointId}/deliveries?${q}`);
    if (!r.ok) return setProblem(r.problem);
    setProblem(null);
    setPage({ cursors, deliveries: r.body.deliveries, nextCursor: r.body.nextCursor });
  };
  useEffect(() => {
    void api.get<{ webhookEndpoints: Endpoint[] }>(base).then((r) => r.ok && setEndpoint(r.body.webhookEndpoints.find((e) => e.id === endpointId) ?? null));
  }, [endpointId]);
  useEffect(() => void load([null]), [endpointId, status]);
  return (
    <section>
      <ScreenTitle>
        Delivery log <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <p>
        <Link to={{ view: 'webhooks' }} route={route} go={go}>
          All endpoints
        </Link>
        {endpoint ? (
          <span>
            {' '}
            · <span class="mono">{endpoint.url}</span>
          </span>
        ) : null}
      </p>
      <p class="hint">Each attempt's time, status code and latency. Bodies are never shown or stored for display.</p>
      <div class="toolbar">
        <label for="d-status">Status</label>
        <select id="d-status" value={status} onChange={(e) => setStatus(e.currentTarget.value as (typeof STATUSES)[number])}>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s || 'any'}
            </option>
          ))}
        </select>
        <button type="button" onClick={() => page && void load(page.cursors)}>
          Refresh
        </button>
      </div>
      <ProblemBox problem={problem} />
      {page && page.deliveries.length === 0 ? <p>No deliveries{status ? ` with status ${status}` : ''}.</p> : null}
      {page && page.deliveries.length > 0 ? (
        <table class="deliveries">
          <caption class="sr-only">Deliveries, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts (time, status code, latency)</th>
              <th scope="col">Next attempt</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {page.deliveries.map((d) => (
              <tr key={d.id} data-delivery={d.id}>
                <td>
                  <code>{d.eventType}</code>
                  <br />
                  <span class="hint mono">{d.eventId}</span>
                </td>
                <td>
                  <span class={`status status-${d.status}`}>{d.status}</span>
                </td>
                <td>
                  {d.attempts.length === 0 ? (
                    <span class="hint">none yet</span>
                  ) : (
                    <ol class="attempts">
                      {d.attempts.map((a, i) => (
                        <li key={i}>
                          {when(a.at)} · <span class={a.statusCode && a.statusCode < 300 ? 'ok' : 'bad'}>{a.statusCode ?? a.error ?? 'no answer'}</span> ·{' '}
                          {a.durationMs} ms
                          {a.error && a.statusCode !== null ? <span class="hint"> ({a.error})</span> : null}
                        </li>
                      ))}
                    </ol>
                  )}
                </td>
                <td>{d.nextAttemptAt ? when(d.nextAttemptAt) : '—'}</td>
                <td>
                  {d.status === 'delivered' || d.status === 'held' ? null : (
                    <button
                      type="button"
                      onClick={() =>
                        void api.post(`${base}/${endpointId}/deliveries/${d.id}/retry`).then((r) => {
                          if (!r.ok) return setProblem(r.problem);
                          setSaid(`A new attempt of ${d.eventType} was queued.`);
                          void load(page.cursors);
                        })
                      }
                    >
                      Retry now
                      <span class="sr-only">
                        {' '}
                        {d.eventType} {d.eventId}
                      </span>
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <p role="status">{said}</p>
      <Pager page={page} load={(c) => void load(c)} />
      <Receiver secret={null} />
    </section>
  );
}

export function WebhooksView(props: Props) {
  return props.route.item ? <Deliveries {...props} /> : <Endpoints {...props} />;
}
