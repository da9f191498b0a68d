// Over 400 lines: the patient widget's screens share one state machine.
/**
 * The widget's interface: a launcher and a chat panel. The chat talks with the environment's
 * patient agent (its live workflows, such as the order-status one); a signed-in patient also sees
 * their messages with the care team (their cases' threads) and replies there. Emergency guidance
 * is shown as soon as the answer says so, with the number to call.
 */
import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { LANG_NAMES, type Lang } from '../shared/lang';
import { newKey, type Attachment, type CaseItem, type OrderCard, type Reply, type ThreadMessage, type WidgetClient } from './client';
import { STRINGS, type Strings } from './strings';

type ChatItem =
  | { id: string; from: 'me'; text: string; state: 'sending' | 'sent' | 'failed'; key: string; attachments?: Attachment[] }
  | { id: string; from: 'bot'; reply: Reply }
  | { id: string; from: 'emergency'; alerted: boolean; reference: string | null }
  | { id: string; from: 'note'; text: string; reference?: string | null };

type View = { kind: 'chat' } | { kind: 'cases' } | { kind: 'thread'; item: CaseItem };

const dateOf = (iso: string, lang: Lang) => {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleDateString(lang === 'es' ? 'es' : 'en', { year: 'numeric', month: 'short', day: 'numeric' });
};

function Orders({ orders, t, lang }: { orders: OrderCard[]; t: Strings; lang: Lang }) {
  return (
    <ul class="orders">
      {orders.map((o) => (
        <li class="order">
          <p class="order-head">
            <strong>
              {t.order} {o.id}
            </strong>
            <span class={`badge ${o.status}`}>{o.statusLabel ?? t.status[o.status] ?? o.status}</span>
          </p>
          {o.carrier && (
            <p>
              {t.carrier}: {o.carrier}
            </p>
          )}
          {o.estimatedDelivery && (
            <p>
              {t.estimatedDelivery}: {dateOf(o.estimatedDelivery, lang)}
            </p>
          )}
          {o.items && o.items.length > 0 && (
            <ul class="items">
              {o.items.map((i) => (
                <li>
                  {i.quantity} × {i.name}
                </li>
              ))}
            </ul>
          )}
          {o.trackingUrl && (
            <a href={o.trackingUrl} target="_blank" rel="noopener noreferrer">
              {t.track}
            </a>
          )}
        </li>
      ))}
    </ul>
  );
}

async function sha256Hex(file: File): Promise<string | null> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const digest = await subtle.digest('SHA-256', await file.arrayBuffer());
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

function Emergency({ t, alerted, reference }: { t: Strings; alerted: boolean; reference: string | null }) {
  return (
    <div class="emergency" role="alert">
      <p class="emergency-title">{t.emergencyTitle}</p>
      <p>{t.emergencyText}</p>
      <a class="call" href="tel:911">
        {t.call911}
      </a>
      {alerted && <p>{t.emergencyAlerted}</p>}
      {reference && (
        <p>
          {t.reference}: <strong>{reference}</strong>
        </p>
      )}
    </div>
  );
}

export interface WidgetProps {
  client: WidgetClient;
  initialLang: Lang;
  startOpen: boolean;
}

export function Widget({ client, initialLang, startOpen }: WidgetProps) {
  const [lang, setLang] = useState<Lang>(initialLang);
  const t: Strings = STRINGS[lang];
  const [open, setOpen] = useState(startOpen);
  const [view, setView] = useState<View>({ kind: 'chat' });
  const [items, setItems] = useState<ChatItem[]>([]);
  const [draft, setDraft] = useState('');
  const [busy, setBusy] = useState(false);
  const [signedIn, setSignedIn] = useState(client.patientId !== null);
  const [notice, setNotice] = useState<'unavailable' | 'identityRefused' | null>(null);
  const launcher = useRef<HTMLButtonElement>(null);
  const input = useRef<HTMLTextAreaElement>(null);
  const log = useRef<HTMLDivElement>(null);
  const itemsRef = useRef(items);
  itemsRef.current = items;

  const refreshSession = async () => {
    await client.ensureSession();
    setSignedIn(client.patientId !== null);
    setNotice(client.unavailable ? 'unavailable' : client.signInProblem === 'identity_refused' ? 'identityRefused' : null);
  };

  useEffect(() => {
    if (open) {
      void refreshSession();
      input.current?.focus();
    }
  }, [open]);

  useEffect(() => {
    log.current?.lastElementChild?.scrollIntoView?.({ block: 'end' });
  }, [items, view]);

  const close = () => {
    setOpen(false);
    setTimeout(() => launcher.current?.focus(), 0);
  };

  const deliver = async (item: Extract<ChatItem, { from: 'me' }>) => {
    setBusy(true);
    const a = await client.send(item.text, item.key, item.attachments);
    setBusy(false);
    setSignedIn(client.patientId !== null);
    if (a.status !== 201 || !a.body) {
      if (client.unavailable) setNotice('unavailable');
      setItems((list) => list.map((x) => (x.id === item.id ? { ...item, state: 'failed' } : x)));
      return;
    }
    const answer = a.body;
    const added: ChatItem[] = [];
    if (answer.emergency) {
      added.push({ id: newKey(), from: 'emergency', alerted: answer.handedOff, reference: answer.caseReference ?? null });
    } else {
      for (const reply of answer.replies) added.push({ id: newKey(), from: 'bot', reply });
      if (answer.handedOff) added.push({ id: newKey(), from: 'note', text: 'handedOff', reference: answer.caseReference ?? null });
    }
    setItems((list) => [...list.map((x) => (x.id === item.id ? { ...item, state: 'sent' as const } : x)), ...added]);
  };

  const send = (text: string, attachments?: Attachment[]) => {
    const message = text.trim();
    if (!message || busy) return;
    const item: Extract<ChatItem, { from: 'me' }> = {
      id: newKey(),
      from: 'me',
      text: message,
      state: 'sending',
      key: newKey(),
      ...(attachments ? { attachments } : {}),
    };
    setItems((list) => [...list, item]);
    setDraft('');
    void deliver(item);
  };

  const upload = async (file: File) => {
    const sha256 = await sha256Hex(file);
    if (!sha256) {
      setItems((list) => [...list, { id: newKey(), from: 'note', text: 'uploadUnsupported' }]);
      return;
    }
    send(file.name, [{ id: newKey(), fileName: file.name.slice(0, 200), contentType: (file.type || 'application/octet-stream').slice(0, 160), sha256 }]);
  };

  const panel = (
    <section class="panel" role="dialog" aria-modal="false" aria-labelledby="pcw-title" id="pcw-panel" onKeyDown={(e) => e.key === 'Escape' && close()}>
      <header class="head">
        <h2 id="pcw-title">{t.title}</h2>
        <div class="lang" role="group" aria-label={t.language}>
          {(['en', 'es'] as Lang[]).map((l) => (
            <button type="button" lang={l} aria-pressed={lang === l} onClick={() => setLang(l)}>
              {l.toUpperCase()}
              <span class="sr">{` ${LANG_NAMES[l]}`}</span>
            </button>
          ))}
        </div>
        <button type="button" class="x" aria-label={t.close} onClick={close}>
          <span aria-hidden="true">×</span>
        </button>
      </header>
      {signedIn && (
        <nav class="tabs" aria-label={t.title}>
          <button type="button" aria-current={view.kind === 'chat' ? 'page' : undefined} onClick={() => setView({ kind: 'chat' })}>
            {t.chat}
          </button>
          <button type="button" aria-current={view.kind !== 'chat' ? 'page' : undefined} onClick={() => setView({ kind: 'cases' })}>
            {t.myCases}
          </button>
        </nav>
      )}
      {notice && (
        <p class="notice" role="status">
          {t[notice]}
        </p>
      )}
      {view.kind === 'chat' ? (
        <Fragment>
          <div class="log" role="log" aria-live="polite" aria-relevant="additions" ref={log}>
            <div class="bubble bot">
              <span class="sr">{t.assistant}: </span>
              {t.greeting}
            </div>
            {items.map((item) => {
              switch (item.from) {
                case 'me':
                  return (
                    <div class={`bubble me ${item.state}`}>
                      <span class="sr">{t.you}: </span>
                      {item.text}
                      {item.state === 'failed' && (
                        <span class="failed-line">
                          {t.notSent}{' '}
                          <button
                            type="button"
                            class="link"
                            onClick={() => {
                              setItems((list) => list.map((x) => (x.id === item.id ? { ...item, state: 'sending' } : x)));
                              void deliver({ ...item, state: 'sending' });
                            }}
                          >
                            {t.tryAgain}
                          </button>
                        </span>
                      )}
                    </div>
                  );
                case 'bot':
                  return (
                    <div class="bubble bot">
                      <span class="sr">{t.assistant}: </span>
                      {item.reply.type === 'text' ? (
                        item.reply.text
                      ) : item.reply.type === 'orders' ? (
                        <Orders orders={item.reply.orders} t={t} lang={lang} />
                      ) : (
                        <span class="upload">
                          {t.uploadPrompt}
                          <label class="file">
                            {t.chooseFile}
                            <input
                              type="file"
                              onChange={(e) => {
                                const f = (e.currentTarget as HTMLInputElement).files?.[0];
                                if (f) void upload(f);
                              }}
                            />
                          </label>
                        </span>
                      )}
                    </div>
                  );
                case 'emergency':
                  return <Emergency t={t} alerted={item.alerted} reference={item.reference} />;
                case 'note':
                  return (
                    <p class="note">
                      {item.text === 'handedOff' ? t.handedOff : t.uploadUnsupported}
                      {item.reference && (
                        <Fragment>
                          {' '}
                          {t.reference}: <strong>{item.reference}</strong>
                        </Fragment>
                      )}
                    </p>
                  );
              }
            })}
          </div>
          <form
            class="compose"
            onSubmit={(e) => {
              e.preventDefault();
              send(draft);
            }}
          >
            <label for="pcw-input" class="sr">
              {t.messageLabel}
            </label>
            <textarea
              id="pcw-input"
              ref={input}
              rows={2}
              maxLength={4000}
              placeholder={t.placeholder}
              value={draft}
              onInput={(e) => setDraft((e.currentTarget as HTMLTextAreaElement).value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && !e.shiftKey) {
                  e.preventDefault();
                  send(draft);
                }
              }}
            />
            <button type="submit" class="primary" disabled={busy || !draft.trim()}>
              {busy ? t.sending : t.send}
            </button>
          </form>
        </Fragment>
      ) : view.kind === 'cases' ? (
        <CaseList client={client} t={t} lang={lang} onOpen={(item) => setView({ kind: 'thread', item })} />
      ) : (
        <Thread client={client} t={t} lang={lang} item={view.item} onBack={() => setView({ kind: 'cases' })} />
      )}
    </section>
  );

  return (
    <div class="root">
      {open && panel}
      <button
        type="button"
        class="launcher"
        ref={launcher}
        aria-expanded={open}
        aria-controls={open ? 'pcw-panel' : undefined}
        aria-label={open ? t.close : t.open}
        onClick={() => (open ? close() : setOpen(true))}
      >
        <svg viewBox="0 0 24 24" width="28" height="28" aria-hidden="true" focusable="false">
          <path fill="currentColor" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4H4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z" />
        </svg>
      </button>
    </div>
  );
}

function CaseList({ client, t, lang, onOpen }: { client: WidgetClient; t: Strings; lang: Lang; onOpen: (item: CaseItem) => void }) {
  const [state, setState] = useState<{ kind: 'loading' } | { kind: 'failed' } | { kind: 'ready'; cases: CaseItem[]; hasMore: boolean }>({ kind: 'loading' });
  const heading = useRef<HTMLHeadingElement>(null);
  const load = async () => {
    setState({ kind: 'loading' });
    const a = await client.cases();
    setState(a.status === 200 && a.body ? { kind: 'ready', cases: a.body.clinicalCases, hasMore: a.body.hasMore } : { kind: 'failed' });
  };
  useEffect(() => {
    void load();
    heading.current?.focus();
  }, []);
  return (
    <div class="cases">
      <h3 tabIndex={-1} ref={heading}>
        {t.casesTitle}
      </h3>
      {state.kind === 'loading' && <p role="status">{t.loading}</p>}
      {state.kind === 'failed' && (
        <p role="alert">
          {t.loadFailed}{' '}
          <button type="button" class="link" onClick={() => void load()}>
            {t.tryAgain}
          </button>
        </p>
      )}
      {state.kind === 'ready' && state.cases.length === 0 && <p>{t.noCases}</p>}
      {state.kind === 'ready' && state.cases.length > 0 && (
        <ul class="case-list">
          {state.cases.map((c) => (
            <li>
              <button type="button" class="case" onClick={() => onOpen(c)}>
                <strong>{c.reference}</strong>
                <span>
                  {t.caseStatus[c.status] ?? c.status} · {t.opened} {dateOf(c.openedAt, lang)}
                </span>
              </button>
            </li>
          ))}
        </ul>
      )}
      {state.kind === 'ready' && state.hasMore && <p class="note">{t.olderCases}</p>}
    </div>
  );
}

function Thread({ client, t, lang, item, onBack }: { client: WidgetClient; t: Strings; lang: Lang; item: CaseItem; onBack: () => void }) {
  const [state, setState] = useState<{ kind: 'loading' } | { kind: 'failed' } | { kind: 'ready'; messages: ThreadMessage[]; closed: boolean }>({
    kind: 'loading',
  });
  const [draft, setDraft] = useState('');
  const [pending, setPending] = useState<{ text: string; key: string; failed: boolean } | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const load = async (quiet = false) => {
    if (!quiet) setState({ kind: 'loading' });
    const a = await client.thread(item.caseId);
    if (a.status === 200 && a.body) setState({ kind: 'ready', messages: a.body.messages, closed: a.body.closed });
    else if (!quiet) setState({ kind: 'failed' });
  };
  useEffect(() => {
    void load();
    heading.current?.focus();
    // New messages from the care team while the thread is open.
    const timer = setInterval(() => void load(true), 15_000);
    return () => clearInterval(timer);
  }, [item.caseId]);

  const sendReply = async (text: string, key: string) => {
    setPending({ text, key, failed: false });
    const a = await client.reply(item.caseId, text, key);
    if (a.status !== 201) {
      setPending({ text, key, failed: true });
      if (a.code === 'CASE_RESOLVED') void load(true);
      return;
    }
    setPending(null);
    setDraft('');
    await load(true);
  };

  const who = (m: ThreadMessage) => (m.sender === 'patient' ? t.you : m.sender === 'agent' ? t.assistant : t.careTeam);
  return (
    <div class="thread">
      <button type="button" class="link back" onClick={onBack}>
        ← {t.back}
      </button>
      <h3 tabIndex={-1} ref={heading}>
        {item.reference}
      </h3>
      {state.kind === 'loading' && <p role="status">{t.loading}</p>}
      {state.kind === 'failed' && (
        <p role="alert">
          {t.loadFailed}{' '}
          <button type="button" class="link" onClick={() => void load()}>
            {t.tryAgain}
          </button>
        </p>
      )}
      {state.kind === 'ready' && (
        <Fragment>
          <div class="log" role="log" aria-live="polite" aria-relevant="additions">
            {state.messages.length === 0 && <p class="note">{t.noThreadMessages}</p>}
            {state.messages.map((m) => (
              <div class={`bubble ${m.sender === 'patient' ? 'me' : 'bot'}`}>
                <span class="who">{who(m)}</span>
                {m.message}
                <span class="when">{dateOf(m.createdAt, lang)}</span>
              </div>
            ))}
            {pending && (
              <div class={`bubble me ${pending.failed ? 'failed' : 'sending'}`}>
                <span class="who">{t.you}</span>
                {pending.text}
                {pending.failed && (
                  <span class="failed-line">
                    {t.notSent}{' '}
                    <button type="button" class="link" onClick={() => void sendReply(pending.text, pending.key)}>
                      {t.tryAgain}
                    </button>
                  </span>
                )}
              </div>
            )}
          </div>
          {state.closed ? (
            <p class="note">{t.closedThread}</p>
          ) : (
            <form
              class="compose"
              onSubmit={(e) => {
                e.preventDefault();
                const text = draft.trim();
                if (text && !pending) void sendReply(text, newKey());
              }}
            >
              <label for="pcw-reply" class="sr">
                {t.replyLabel}
              </label>
              <textarea id="pcw-reply" rows={2} maxLength={4000} value={draft} onInput={(e) => setDraft((e.currentTarget as HTMLTextAreaElement).value)} />
              <button type="submit" class="primary" disabled={!!pending || !draft.trim()}>
                {t.reply}
              </button>
            </form>
          )}
          <button type="button" class="link" onClick={() => void load(true)}>
            {t.refresh}
          </button>
        </Fragment>
      )}
    </div>
  );
}
