/** Destinations: your systems that workflows call (create with secret headers, list, delete), and how those calls are signed. */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import { Go, Link, Organization, Route } from '../main';
import { EnvBadge, FieldError, ProblemBox, ScreenTitle, fieldError, invalid, when } from '../ui';

export interface Destination {
  id: string;
  stableKey: string;
  name: string;
  baseUrl: string;
  timeoutMs: number;
  headerNames: string[];
  createdAt: string;
}

interface Props {
  api: Api;
  org: Organization;
  env: Organization['environments'][number];
  route: Route;
  go: Go;
}

/** The path and query a call to `path` of this Destination signs: its own base path (and query) included. */
export function signedPathOf(baseUrl: string, path: string): string {
  try {
    const base = new URL(baseUrl);
    const [p, q] = path.split(/\?(.*)/s, 2);
    const query = [base.search.replace(/^\?/, ''), q ?? ''].filter(Boolean).join('&');
    return `${base.pathname.replace(/\/+$/, '')}${p ? (p.startsWith('/') ? p : `/${p}`) : ''}${query ? `?${query}` : ''}` || '/';
  } catch {
    return path;
  }
}

const ORDER_LOOKUP_BODY = '{"version":1,"type":"order_lookup.requested","requestId":"<run id>","patient":{"externalId":"<the patient’s id in your system>"}}';

const VERIFY_SNIPPET = `import express from 'express';
import { verifyDestinationCall, isOrderLookupRequested } from '@svc/webhooks-receiver';

const app = express();
// The raw bytes of the body: the signature covers them exactly as sent.
app.post('/api/orders/lookup', express.raw({ type: 'application/json' }), (req, res) => {
  let call;
  try {
    call = verifyDestinationCall({ method: req.method, url: req.originalUrl, rawBody: req.body, headers: req.headers }, process.env.WIDGET_SIGNING_SECRET);
  } catch {
    return res.sendStatus(401); // wrong signature, or a timestamp older than 5 minutes
  }
  if (isOrderLookupRequested(call.body)) res.json({ orders: [] /* the patient's latest orders */ });
  else res.sendStatus(404);
});`;

/** What a caller needs to check our calls: the headers, the signed text (with this Destination's own path), the key, the rules. */
function Signing({ destination, route, go }: { destination: Destination | null; route: Route; go: Go }) {
  const example = destination ? signedPathOf(destination.baseUrl, '/orders/lookup') : '/orders/lookup';
  return (
    <section aria-labelledby="signing-h" class="card">
      <h3 id="signing-h">How your system checks our calls</h3>
      <p>
        Every call a workflow makes to a Destination is signed. One attempt, no redirects followed, waiting at most the Destination's timeout (5 seconds at
        most).
      </p>
      <dl class="facts">
        <dt>
          <code>x-svc-timestamp</code>
        </dt>
        <dd>The Unix time of the call in seconds (real time).</dd>
        <dt>
          <code>x-svc-signature</code>
        </dt>
        <dd>
          <code>v1=</code> and the lower-case hex HMAC-SHA256 of the signed text below.
        </dd>
        <dt>Signed text</dt>
        <dd>
          <code>{'<timestamp>.<METHOD> <path and query>\\n<raw body>'}</code>: the path and query as requested, your Destination's own base path included.
        </dd>
        <dt>Key</dt>
        <dd>
          The environment's <strong>widget signing secret</strong>, as a UTF-8 string. It is shown once when it is rotated, on{' '}
          <Link to={{ view: 'keys' }} route={route} go={go}>
            API keys and secrets
          </Link>
          .
        </dd>
        <dt>Checks</dt>
        <dd>Compare in constant time, computed from the raw bytes of the body; refuse a timestamp older than 5 minutes.</dd>
        <dt>Your headers</dt>
        <dd>The header values you give a Destination (an authorization token, say) are sent with every call; they are stored sealed and never shown again.</dd>
        <dt>Addresses</dt>
        <dd>
          A service running in production mode calls only https at a public address, checked at creation and again at every call; a standalone service (for
          development) also calls local addresses.
        </dd>
      </dl>
      <p>
        Example{destination ? ` for ${destination.name}` : ''}: the order lookup step (<code>POST /orders/lookup</code>, the “Order status and tracking”
        template) signs
      </p>
      <pre class="code" tabIndex={0} aria-label="Signed text of an order lookup">
        <code>{`<timestamp>.POST ${example}\n${ORDER_LOOKUP_BODY}`}</code>
      </pre>
      <details class="receiver">
        <summary>Checking a call with the receiver package (@svc/webhooks-receiver, Node.js)</summary>
        <pre class="code" tabIndex={0} aria-label="Destination call check with Express">
          <code>{VERIFY_SNIPPET}</code>
        </pre>
      </details>
    </section>
  );
}

interface HeaderRow {
  name: string;
  value: string;
}

export function DestinationsView({ api, org, env, route, go }: Props) {
  const base = `/organizations/${org.id}/environments/${env.id}/destinations`;
  const [list, setList] = useState<Destination[] | null>(null);
  const [stableKey, setStableKey] = useState('');
  const [name, setName] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [timeoutMs, setTimeoutMs] = useState('');
  const [headers, setHeaders] = useState<HeaderRow[]>([]);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [listProblem, setListProblem] = useState<Problem | null>(null);
  const [said, setSaid] = useState('');
  const load = async () => {
    const r = await api.get<{ destinations: Destination[] }>(base);
    if (r.ok) setList(r.body.destinations);
    else setListProblem(r.problem);
  };
  useEffect(() => void load(), [env.id]);
  const err = (path: string, exact = false) => fieldError(problem, path, exact);
  const latest = list && list.length ? list[list.length - 1] : null;
  return (
    <section>
      <ScreenTitle>
        Destinations <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <p>
        A Destination is one of your systems that a conversation workflow calls, such as an order system. A workflow's call step names it by its stable key.
      </p>
      {list && list.length === 0 ? <p>No Destinations in this environment yet.</p> : null}
      {list && list.length > 0 ? (
        <table>
          <caption class="sr-only">Destinations</caption>
          <thead>
            <tr>
              <th scope="col">Destination</th>
              <th scope="col">Address</th>
              <th scope="col">Timeout</th>
              <th scope="col">Secret headers</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((d) => (
              <tr key={d.id} data-destination={d.stableKey}>
                <td>
                  <strong>{d.name}</strong>
                  <br />
                  <code>{d.stableKey}</code>
                  <br />
                  <span class="hint">created {when(d.createdAt)}</span>
                </td>
                <td class="mono">{d.baseUrl}</td>
                <td>{d.timeoutMs} ms</td>
                <td>{d.headerNames.length ? d.headerNames.map((h) => <code key={h}>{h} </code>) : <span class="hint">none</span>}</td>
                <td>
                  <button
                    type="button"
                    class="danger"
                    onClick={() => {
                      if (
                        !confirm(
                          `Delete the Destination ${d.name} (${d.stableKey})? Workflows that call it fail their call (and cannot be switched on) until one with this key exists again.`,
                        )
                      )
                        return;
                      void api.del(`${base}/${d.id}`).then((r) => {
                        if (!r.ok) return setListProblem(r.problem);
                        setListProblem(null);
                        setSaid(`${d.name} was deleted.`);
                        void load();
                      });
                    }}
                  >
                    Delete<span class="sr-only"> {d.name}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <p role="status">{said}</p>
      <ProblemBox problem={listProblem} />
      <form
        noValidate
        class="wide"
        onSubmit={(e) => {
          e.preventDefault();
          const body = {
            stableKey: stableKey.trim(),
            name: name.trim(),
            baseUrl: baseUrl.trim(),
            ...(timeoutMs.trim() ? { timeoutMs: Number(timeoutMs) } : {}),
            ...(headers.length ? { headers: Object.fromEntries(headers.map((h) => [h.name.trim(), h.value])) } : {}),
          };
          void api.post<Destination>(base, body).then((r) => {
            if (!r.ok) {
              setProblem(r.problem);
              setTimeout(() => (document.querySelector('form [aria-invalid="true"]') as HTMLElement | null)?.focus(), 0);
              return;
            }
            setProblem(null);
            setStableKey('');
            setName('');
            setBaseUrl('');
            setTimeoutMs('');
            setHeaders([]);
            setSaid(`${r.body.name} was added. Header values are stored sealed and never shown again.`);
            void load();
          });
        }}
      >
        <fieldset>
          <legend>Add a Destination</legend>
          <label for="d-key">Stable key</label>
          <input
            id="d-key"
            class="mono"
            value={stableKey}
            onInput={(e) => setStableKey(e.currentTarget.value)}
            placeholder="order_system"
            {...invalid('d-key-err', err('stableKey'))}
          />
          <p class="hint">Lower-case letters, digits and underscores, 2 to 80: what a workflow's call step names.</p>
          <FieldError id="d-key-err" message={err('stableKey')} />
          <label for="d-name">Name</label>
          <input id="d-name" value={name} onInput={(e) => setName(e.currentTarget.value)} {...invalid('d-name-err', err('name'))} />
          <FieldError id="d-name-err" message={err('name')} />
          <label for="d-url">Base URL</label>
          <input
            id="d-url"
            type="url"
            class="mono"
            value={baseUrl}
            onInput={(e) => setBaseUrl(e.currentTarget.value)}
            placeholder="https://shop.example/api"
            {...invalid('d-url-err', err('baseUrl'))}
          />
          <p class="hint">A step's path is added to it. No user name or password here: credentials go in a header.</p>
          <FieldError id="d-url-err" message={err('baseUrl')} />
          <label for="d-timeout">Timeout in milliseconds (optional)</label>
          <input
            id="d-timeout"
            type="number"
            min={1}
            max={5000}
            value={timeoutMs}
            onInput={(e) => setTimeoutMs(e.currentTarget.value)}
            placeholder="5000"
            {...invalid('d-timeout-err', err('timeoutMs'))}
          />
          <FieldError id="d-timeout-err" message={err('timeoutMs')} />
          <fieldset>
            <legend>Secret headers (optional)</legend>
            <p class="hint">Sent with every call, for example an authorization token. Not x-svc-*; at most 20.</p>
            {headers.map((h, i) => {
              const e = err(`headers.${h.name.trim()}`);
              return (
                <div key={i} class="row">
                  <span class="field">
                    <label for={`d-h${i}-name`}>Header {i + 1} name</label>
                    <input
                      id={`d-h${i}-name`}
                      class="mono"
                      value={h.name}
                      onInput={(ev) => setHeaders(headers.map((x, j) => (j === i ? { ...x, name: ev.currentTarget.value } : x)))}
                      {...invalid(`d-h${i}-err`, e)}
                    />
                  </span>
                  <span class="field">
                    <label for={`d-h${i}-value`}>Header {i + 1} value</label>
                    <input
                      id={`d-h${i}-value`}
                      type="password"
                      autoComplete="off"
                      value={h.value}
                      onInput={(ev) => setHeaders(headers.map((x, j) => (j === i ? { ...x, value: ev.currentTarget.value } : x)))}
                    />
                  </span>
                  <button type="button" class="danger" onClick={() => setHeaders(headers.filter((_, j) => j !== i))}>
                    Remove<span class="sr-only"> header {i + 1}</span>
                  </button>
                  <FieldError id={`d-h${i}-err`} message={e} />
                </div>
              );
            })}
            <FieldError id="d-headers-err" message={err('headers', true)} />
            <button type="button" onClick={() => setHeaders([...headers, { name: '', value: '' }])}>
              Add a header
            </button>
          </fieldset>
          <button type="submit" class="primary">
            Add Destination
          </button>
        </fieldset>
        <ProblemBox problem={problem} />
      </form>
      <Signing destination={latest} route={route} go={go} />
    </section>
  );
}
