// Over 400 lines: the check-in page's screens share one state.
/**
 * The check-in page behind the email link (docs/decisions.md, "Pages for people"): one question at a time, answers saved
 * as given through the widget routes of the check-in (docs/decisions.md, "Patient pathway"), emergency guidance at once,
 * the outcome at the end; English and Spanish.
 *
 * The link's token is the only credential. It is read from the address once, kept in this tab's
 * sessionStorage (so a reload still works), and taken out of the address bar and the history
 * entry at once; it goes nowhere but to this origin's API (the page's policy allows no other
 * connection, and no referrer is sent).
 */
import { render } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { call, type Answer } from '../shared/http';
import { LANG_NAMES, browserLang, type Lang } from '../shared/lang';
import { STRINGS, type Strings } from './strings';
import './checkin.css';

interface Question {
  key: string;
  text: string;
  type: 'scale' | 'yes_no' | 'text';
  min?: number;
  max?: number;
}
type Value = number | boolean | string;
type LinkError = 'used' | 'unknown' | 'missing' | 'busy' | 'unavailable';
type Phase =
  | { kind: 'loading' }
  | { kind: 'question'; index: number }
  | { kind: 'notes' }
  | { kind: 'done'; outcome: 'no_action' | 'case_opened'; reference: string | null }
  | { kind: 'emergency'; reference: string | null }
  | { kind: 'error'; error: LinkError };

interface Link {
  /** The API base (the path before /check-ins/). */
  base: string;
  checkInId: string;
  token: string | null;
}

const MAX_TEXT = 2000;

function readLink(): Link {
  const m = /^(.*)\/check-ins\/([^/]+)\/?$/.exec(location.pathname);
  const base = m ? m[1] : '';
  const checkInId = m ? decodeURIComponent(m[2]) : '';
  const key = `checkin-token:${checkInId}`;
  const url = new URL(location.href);
  let token = url.searchParams.get('token');
  if (token !== null) {
    try {
      sessionStorage.setItem(key, token);
    } catch {
      /* storage off: the token lives in memory only */
    }
    // Out of the address bar and of this history entry (the back button, a shared screen).
    url.searchParams.delete('token');
    history.replaceState(null, '', url.pathname + (url.search === '?' ? '' : url.search) + url.hash);
  } else {
    try {
      token = sessionStorage.getItem(key);
    } catch {
      token = null;
    }
  }
  return { base, checkInId, token: token || null };
}

function forgetToken(link: Link): void {
  try {
    sessionStorage.removeItem(`checkin-token:${link.checkInId}`);
  } catch {
    /* nothing kept */
  }
}

/** What a failed answer means for the patient. */
function linkError(a: Answer): LinkError {
  if (a.status === 401) return 'used';
  if (a.status === 404 || a.status === 400) return 'unknown';
  if (a.status === 429) return 'busy';
  return 'unavailable';
}

const bounds = (q: Question) => ({ min: q.min ?? 0, max: q.max ?? 10 });

function LanguageSwitch({ lang, t, onChange }: { lang: Lang; t: Strings; onChange: (l: Lang) => void }) {
  return (
    <nav class="lang" aria-label={t.language}>
      {(['en', 'es'] as Lang[]).map((l) => (
        <button type="button" lang={l} aria-pressed={lang === l} onClick={() => onChange(l)}>
          {LANG_NAMES[l]}
        </button>
      ))}
    </nav>
  );
}

function App({ link, serverState }: { link: Link; serverState: string }) {
  const [lang, setLang] = useState<Lang>(browserLang());
  const t = STRINGS[lang];
  const initial: Phase =
    serverState === 'used' || serverState === 'unknown' || serverState === 'busy' || serverState === 'missing'
      ? { kind: 'error', error: serverState }
      : link.token === null
        ? { kind: 'error', error: 'missing' }
        : { kind: 'loading' };
  const [phase, setPhase] = useState<Phase>(initial);
  const [questions, setQuestions] = useState<Question[]>([]);
  /** The answers the service has. */
  const [saved, setSaved] = useState<Record<string, Value>>({});
  /** What the patient has chosen or typed, per question. */
  const [draft, setDraft] = useState<Record<string, Value>>({});
  const [notes, setNotes] = useState('');
  const [busy, setBusy] = useState<'saving' | 'sending' | null>(null);
  const [problem, setProblem] = useState<keyof Strings | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const rendered = useRef(false);

  // Before the browser paints: the page's language changes with its words (a screen reader
  // never reads the new text under the old lang).
  useLayoutEffect(() => {
    document.documentElement.lang = lang;
    document.title = t.title;
  }, [lang]);

  // Each new step moves the focus to its heading (screen readers announce it; Tab goes on from there).
  useEffect(() => {
    if (rendered.current) heading.current?.focus();
    rendered.current = true;
  }, [phase]);

  useEffect(() => {
    if (phase.kind === 'error' && phase.error === 'used') forgetToken(link);
  }, [phase]);

  const fail = (a: Answer) => {
    const error = linkError(a);
    if (error === 'used') forgetToken(link);
    setPhase({ kind: 'error', error });
  };

  const load = async () => {
    if (!link.token) return setPhase({ kind: 'error', error: 'missing' });
    setPhase({ kind: 'loading' });
    const a = await call<{ questions: Question[]; answered: Record<string, Value> }>(
      `${link.base}/widget/v1/check-ins/${encodeURIComponent(link.checkInId)}?token=${encodeURIComponent(link.token)}`,
    );
    if (a.status !== 200 || !a.body) return fail(a);
    const qs = a.body.questions;
    setQuestions(qs);
    setSaved(a.body.answered);
    setDraft(a.body.answered);
    const first = qs.findIndex((q) => a.body!.answered[q.key] === undefined);
    setPhase(first === -1 ? { kind: 'notes' } : { kind: 'question', index: first });
  };

  useEffect(() => {
    if (phase.kind === 'loading') void load();
  }, []);

  const goTo = (index: number) => {
    setProblem(null);
    setPhase(index >= questions.length ? { kind: 'notes' } : { kind: 'question', index });
  };

  const answer = async (index: number) => {
    const q = questions[index];
    let value = draft[q.key];
    if (q.type === 'text') {
      const text = typeof value === 'string' ? value.trim() : '';
      // A text question may be skipped; an answer already given stays as it was.
      if (text === '') return goTo(index + 1);
      if ([...text].length > MAX_TEXT) return setProblem('tooLong');
      value = text;
    } else if (value === undefined) {
      return setProblem('chooseOne');
    }
    if (saved[q.key] === value) return goTo(index + 1);
    setBusy('saving');
    setProblem(null);
    const a = await call<{ next: Question | null; emergency: boolean; caseReference?: string }>(
      `${link.base}/widget/v1/check-ins/${encodeURIComponent(link.checkInId)}/answers`,
      {
        body: { token: link.token, questionKey: q.key, value },
      },
    );
    setBusy(null);
    if (a.status === 400) return setProblem('notSaved');
    if (a.status !== 200 || !a.body) return fail(a);
    setSaved({ ...saved, [q.key]: value });
    if (a.body.emergency) {
      forgetToken(link);
      return setPhase({ kind: 'emergency', reference: a.body.caseReference ?? null });
    }
    goTo(index + 1);
  };

  const complete = async () => {
    const text = notes.trim();
    if ([...text].length > MAX_TEXT) return setProblem('tooLong');
    setBusy('sending');
    setProblem(null);
    const a = await call<{ outcome: 'no_action' | 'case_opened'; caseReference?: string }>(
      `${link.base}/widget/v1/check-ins/${encodeURIComponent(link.checkInId)}/complete`,
      {
        body: { token: link.token, ...(text ? { notes: text } : {}) },
      },
    );
    setBusy(null);
    if (a.status === 400) return setProblem('notSaved');
    if (a.status !== 200 || !a.body) return fail(a);
    forgetToken(link);
    setPhase({ kind: 'done', outcome: a.body.outcome, reference: a.body.caseReference ?? null });
  };

  const problemText = problem ? (t[problem] as string) : null;
  let content;
  switch (phase.kind) {
    case 'loading':
      content = (
        <p class="status" role="status">
          {t.loading}
        </p>
      );
      break;
    case 'question': {
      const q = questions[phase.index];
      const value = draft[q.key];
      const set = (v: Value) => {
        setDraft({ ...draft, [q.key]: v });
        setProblem(null);
      };
      const hint = q.type === 'scale' ? t.scaleHint(bounds(q).min, bounds(q).max) : q.type === 'text' ? t.textHint : null;
      const describedBy = [hint ? 'hint' : '', problemText ? 'problem' : ''].filter(Boolean).join(' ') || undefined;
      content = (
        <form
          key={q.key}
          class="step"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            if (!busy) void answer(phase.index);
          }}
        >
          <p class="progress-text">{t.questionOf(phase.index + 1, questions.length)}</p>
          <progress aria-hidden="true" value={phase.index + 1} max={questions.length} />
          <h2 id="question" tabIndex={-1} ref={heading}>
            {q.text}
          </h2>
          {hint && (
            <p id="hint" class="hint">
              {hint}
            </p>
          )}
          {q.type === 'text' ? (
            <textarea
              id="answer"
              aria-labelledby="question"
              aria-describedby={describedBy}
              aria-invalid={problemText ? true : undefined}
              rows={5}
              maxLength={MAX_TEXT}
              value={typeof value === 'string' ? value : ''}
              onInput={(e) => set((e.currentTarget as HTMLTextAreaElement).value)}
            />
          ) : (
            <div role="radiogroup" aria-labelledby="question" aria-describedby={describedBy} class={q.type === 'scale' ? 'choices scale' : 'choices'}>
              {(q.type === 'scale'
                ? Array.from({ length: bounds(q).max - bounds(q).min + 1 }, (_, i) => ({ v: bounds(q).min + i, label: String(bounds(q).min + i) }))
                : [
                    { v: true, label: t.yes },
                    { v: false, label: t.no },
                  ]
              ).map((c) => (
                <label class="choice">
                  <input type="radio" name={q.key} checked={value === c.v} onChange={() => set(c.v)} />
                  <span>{c.label}</span>
                </label>
              ))}
            </div>
          )}
          {problemText && (
            <p id="problem" class="problem" role="alert">
              {problemText}
            </p>
          )}
          <div class="actions">
            <button type="button" class="secondary" disabled={phase.index === 0 || !!busy} onClick={() => goTo(phase.index - 1)}>
              {t.back}
            </button>
            <button type="submit" class="primary" disabled={!!busy}>
              {t.next}
            </button>
          </div>
          <p class="status" role="status">
            {busy ? t.saving : ''}
          </p>
        </form>
      );
      break;
    }
    case 'notes':
      content = (
        <form
          class="step"
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            if (!busy) void complete();
          }}
        >
          <p class="progress-text">{t.questionOf(questions.length, questions.length)}</p>
          <progress aria-hidden="true" value={1} max={1} />
          <h2 tabIndex={-1} ref={heading}>
            {t.notesTitle}
          </h2>
          <label for="notes">{t.notesLabel}</label>
          <p id="notes-hint" class="hint">
            {t.notesHint}
          </p>
          <textarea
            id="notes"
            rows={5}
            maxLength={MAX_TEXT}
            aria-describedby={problemText ? 'notes-hint problem' : 'notes-hint'}
            value={notes}
            onInput={(e) => setNotes((e.currentTarget as HTMLTextAreaElement).value)}
          />
          {problemText && (
            <p id="problem" class="problem" role="alert">
              {problemText}
            </p>
          )}
          <div class="actions">
            <button type="button" class="secondary" disabled={questions.length === 0 || !!busy} onClick={() => goTo(questions.length - 1)}>
              {t.back}
            </button>
            <button type="submit" class="primary" disabled={!!busy}>
              {t.send}
            </button>
          </div>
          <p class="status" role="status">
            {busy ? t.sending : ''}
          </p>
        </form>
      );
      break;
    case 'done':
      content = (
        <section class="step" aria-labelledby="done">
          <h2 id="done" tabIndex={-1} ref={heading}>
            {t.thanks}
          </h2>
          <p>{phase.outcome === 'case_opened' ? t.caseOpened : t.noAction}</p>
          {phase.reference && (
            <>
              <p class="reference">
                {t.reference}: <strong>{phase.reference}</strong>
              </p>
              <p class="hint">{t.referenceHint}</p>
            </>
          )}
          <p>{t.closeHint}</p>
        </section>
      );
      break;
    case 'emergency':
      content = (
        <section class="emergency" role="alert" aria-labelledby="emergency">
          <h2 id="emergency" tabIndex={-1} ref={heading}>
            {t.emergencyTitle}
          </h2>
          <p>{t.emergencyText}</p>
          <a class="call" href="tel:911">
            {t.call911}
          </a>
          <p>{t.emergencyNotified}</p>
          {phase.reference && (
            <p class="reference">
              {t.reference}: <strong>{phase.reference}</strong>
            </p>
          )}
        </section>
      );
      break;
    case 'error': {
      const [title, text] = {
        used: [t.linkUsedTitle, t.linkUsed],
        unknown: [t.linkUnknownTitle, t.linkUnknown],
        missing: [t.linkMissingTitle, t.linkMissing],
        busy: [t.busyTitle, t.busy],
        unavailable: [t.unavailableTitle, t.unavailable],
      }[phase.error];
      const retry = phase.error === 'busy' || phase.error === 'unavailable';
      content = (
        <section class="step" aria-labelledby="problem-title">
          <h2 id="problem-title" tabIndex={-1} ref={heading}>
            {title}
          </h2>
          <p>{text}</p>
          {retry && link.token && (
            <div class="actions">
              <button type="button" class="primary" onClick={() => void load()}>
                {t.tryAgain}
              </button>
            </div>
          )}
        </section>
      );
      break;
    }
  }

  return (
    <>
      <header class="top">
        <h1>{t.title}</h1>
        <LanguageSwitch lang={lang} t={t} onChange={setLang} />
      </header>
      <main class="page">{content}</main>
      <footer class="foot">
        <p>{t.urgentHelp}</p>
      </footer>
    </>
  );
}

const root = document.getElementById('root')!;
root.textContent = '';
render(<App link={readLink()} serverState={document.body.dataset.link ?? ''} />, root);
