// Over 400 lines: the protocol editor (questions, red flags, cadence) is one form with one state.
/** Check-in protocols (create with questions, red flags and cadence; list; activate, deactivate) and "send a check-in now" for a patient. */
import { useEffect, useState } from 'preact/hooks';
import type { Api, Problem } from '../api';
import type { Organization } from '../main';
import { EnvBadge, FieldError, ProblemBox, ScreenTitle, fieldError, invalid, when } from '../ui';

type Tier = 'emergency' | 'urgent' | 'routine';
const TIERS: Tier[] = ['emergency', 'urgent', 'routine'];
type QuestionType = 'scale' | 'yes_no' | 'text';

interface Question {
  key: string;
  text: string;
  type: QuestionType;
  min?: number;
  max?: number;
  higherIsBetter?: boolean;
}
interface PhraseRule {
  phrase: string;
  tier: Tier;
}
interface Protocol {
  id: string;
  programKey: string;
  name: string;
  defaultCadenceDays: number;
  questions: Question[];
  redFlags: {
    scores?: { question: string; tier: Tier; op: '>=' | '<='; value: number }[];
    phrases?: PhraseRule[];
    semanticPhrases?: PhraseRule[];
    emergencyTerms?: boolean;
  };
  active: boolean;
  createdAt: string;
}

interface Props {
  api: Api;
  org: Organization;
  env: Organization['environments'][number];
}

/** Form rows keep what was typed (numbers as text); `body()` turns them into the request. */
interface QuestionRow {
  key: string;
  text: string;
  type: QuestionType;
  min: string;
  max: string;
  higherIsBetter: boolean;
}
interface ScoreRow {
  question: string;
  op: '>=' | '<=';
  value: string;
  tier: Tier;
}

const newQuestion = (): QuestionRow => ({ key: '', text: '', type: 'scale', min: '0', max: '10', higherIsBetter: false });
const number = (v: string): number | string => (v.trim() === '' ? v : Number(v));

/** A list of form rows: change one, add one, remove one. */
function rows<T>(list: T[], set: (l: T[]) => void) {
  return {
    change: (i: number, patch: Partial<T>) => set(list.map((r, j) => (j === i ? { ...r, ...patch } : r))),
    add: (row: T) => set([...list, row]),
    remove: (i: number) => set(list.filter((_, j) => j !== i)),
  };
}

function PhraseRows({
  label,
  item,
  idBase,
  path,
  list,
  set,
  problem,
}: {
  label: string;
  item: string;
  idBase: string;
  path: string;
  list: PhraseRule[];
  set: (l: PhraseRule[]) => void;
  problem: Problem | null;
}) {
  const r = rows(list, set);
  const listErr = fieldError(problem, path, true);
  return (
    <fieldset>
      <legend>{label}</legend>
      {list.map((p, i) => {
        const err = fieldError(problem, `${path}[${i}]`);
        const id = `${idBase}-${i}`;
        return (
          <div key={i} class="row">
            <span class="field">
              <label for={`${id}-phrase`}>
                {item[0].toUpperCase() + item.slice(1)} {i + 1}
              </label>
              <input id={`${id}-phrase`} value={p.phrase} onInput={(e) => r.change(i, { phrase: e.currentTarget.value })} {...invalid(`${id}-err`, err)} />
            </span>
            <span class="field">
              <label for={`${id}-tier`}>Tier</label>
              <select id={`${id}-tier`} value={p.tier} onChange={(e) => r.change(i, { tier: e.currentTarget.value as Tier })}>
                {TIERS.map((t) => (
                  <option key={t}>{t}</option>
                ))}
              </select>
            </span>
            <button type="button" class="danger" onClick={() => r.remove(i)}>
              Remove
              <span class="sr-only">
                {' '}
                {item} {i + 1}
              </span>
            </button>
            <FieldError id={`${id}-err`} message={err} />
          </div>
        );
      })}
      <FieldError id={`${idBase}-err`} message={listErr} />
      <button type="button" onClick={() => r.add({ phrase: '', tier: 'urgent' })}>
        Add a {item}
      </button>
    </fieldset>
  );
}

function NewProtocol({ api, base, onCreated }: { api: Api; base: string; onCreated: (p: Protocol) => void }) {
  const [programKey, setProgramKey] = useState('');
  const [name, setName] = useState('');
  const [cadence, setCadence] = useState('7');
  const [questions, setQuestions] = useState<QuestionRow[]>([newQuestion()]);
  const [scores, setScores] = useState<ScoreRow[]>([]);
  const [phrases, setPhrases] = useState<PhraseRule[]>([]);
  const [semantic, setSemantic] = useState<PhraseRule[]>([]);
  const [emergencyTerms, setEmergencyTerms] = useState(true);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [busy, setBusy] = useState(false);
  const q = rows(questions, setQuestions);
  const s = rows(scores, setScores);
  const scaleKeys = questions.filter((x) => x.type === 'scale' && x.key.trim()).map((x) => x.key.trim());
  const body = () => ({
    programKey: programKey.trim(),
    name: name.trim(),
    defaultCadenceDays: number(cadence),
    questions: questions.map((x) => ({
      key: x.key.trim(),
      text: x.text.trim(),
      type: x.type,
      ...(x.type === 'scale' ? { min: number(x.min), max: number(x.max), ...(x.higherIsBetter ? { higherIsBetter: true } : {}) } : {}),
    })),
    redFlags: {
      ...(scores.length ? { scores: scores.map((x) => ({ question: x.question, op: x.op, value: number(x.value), tier: x.tier })) } : {}),
      ...(phrases.length ? { phrases: phrases.map((x) => ({ phrase: x.phrase.trim(), tier: x.tier })) } : {}),
      ...(semantic.length ? { semanticPhrases: semantic.map((x) => ({ phrase: x.phrase.trim(), tier: x.tier })) } : {}),
      emergencyTerms,
    },
  });
  const err = (path: string, exact = false) => fieldError(problem, path, exact);
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setBusy(true);
        void api.post<Protocol>(base, body()).then((r) => {
          setBusy(false);
          if (!r.ok) {
            setProblem(r.problem);
            // The first field the service named gets the focus.
            setTimeout(() => (document.querySelector('.protocol-form [aria-invalid="true"]') as HTMLElement | null)?.focus(), 0);
            return;
          }
          setProblem(null);
          setProgramKey('');
          setName('');
          setQuestions([newQuestion()]);
          setScores([]);
          setPhrases([]);
          setSemantic([]);
          onCreated(r.body);
        });
      }}
      class="protocol-form wide"
    >
      <fieldset>
        <legend>New protocol</legend>
        <label for="p-key">Program key</label>
        <input
          id="p-key"
          class="mono"
          value={programKey}
          onInput={(e) => setProgramKey(e.currentTarget.value)}
          placeholder="post-op-knee"
          {...invalid('p-key-err', err('programKey'))}
        />
        <p class="hint">Lower-case letters, digits and dashes; your system names it in patient.created (programKey).</p>
        <FieldError id="p-key-err" message={err('programKey')} />
        <label for="p-name">Name</label>
        <input id="p-name" value={name} onInput={(e) => setName(e.currentTarget.value)} {...invalid('p-name-err', err('name'))} />
        <FieldError id="p-name-err" message={err('name')} />
        <label for="p-cadence">Check-in every (days)</label>
        <input
          id="p-cadence"
          type="number"
          min={1}
          max={30}
          value={cadence}
          onInput={(e) => setCadence(e.currentTarget.value)}
          {...invalid('p-cadence-err', err('defaultCadenceDays'))}
        />
        <p class="hint">1 to 30; an enrolment may set its own (checkInCadenceDays).</p>
        <FieldError id="p-cadence-err" message={err('defaultCadenceDays')} />

        <fieldset>
          <legend>Questions</legend>
          {questions.map((x, i) => {
            const id = `p-q${i}`;
            const path = `questions[${i}]`;
            return (
              <fieldset key={i} class="item">
                <legend>Question {i + 1}</legend>
                <div class="row">
                  <span class="field">
                    <label for={`${id}-key`}>Key</label>
                    <input
                      id={`${id}-key`}
                      class="mono"
                      value={x.key}
                      onInput={(e) => q.change(i, { key: e.currentTarget.value })}
                      {...invalid(`${id}-key-err`, err(`${path}.key`))}
                    />
                  </span>
                  <span class="field">
                    <label for={`${id}-type`}>Type</label>
                    <select id={`${id}-type`} value={x.type} onChange={(e) => q.change(i, { type: e.currentTarget.value as QuestionType })}>
                      <option value="scale">scale (a number)</option>
                      <option value="yes_no">yes or no</option>
                      <option value="text">text</option>
                    </select>
                  </span>
                </div>
                <FieldError id={`${id}-key-err`} message={err(`${path}.key`)} />
                <label for={`${id}-text`}>Question text</label>
                <input
                  id={`${id}-text`}
                  value={x.text}
                  onInput={(e) => q.change(i, { text: e.currentTarget.value })}
                  {...invalid(`${id}-text-err`, err(`${path}.text`))}
                />
                <FieldError id={`${id}-text-err`} message={err(`${path}.text`)} />
                {x.type === 'scale' ? (
                  <div class="row">
                    <span class="field">
                      <label for={`${id}-min`}>From</label>
                      <input
                        id={`${id}-min`}
                        type="number"
                        value={x.min}
                        onInput={(e) => q.change(i, { min: e.currentTarget.value })}
                        {...invalid(`${id}-min-err`, err(`${path}.min`))}
                      />
                    </span>
                    <span class="field">
                      <label for={`${id}-max`}>To</label>
                      <input
                        id={`${id}-max`}
                        type="number"
                        value={x.max}
                        onInput={(e) => q.change(i, { max: e.currentTarget.value })}
                        {...invalid(`${id}-max-err`, err(`${path}.max`))}
                      />
                    </span>
                    <label class="check">
                      <input type="checkbox" checked={x.higherIsBetter} onChange={(e) => q.change(i, { higherIsBetter: e.currentTarget.checked })} /> Higher is
                      better
                    </label>
                  </div>
                ) : null}
                <FieldError id={`${id}-min-err`} message={err(`${path}.min`)} />
                <FieldError id={`${id}-max-err`} message={err(`${path}.max`)} />
                <FieldError id={`${id}-err`} message={err(`${path}.type`) ?? err(path, true)} />
                {questions.length > 1 ? (
                  <button type="button" class="danger" onClick={() => q.remove(i)}>
                    Remove question {i + 1}
                  </button>
                ) : null}
              </fieldset>
            );
          })}
          <FieldError id="p-questions-err" message={err('questions', true)} />
          <button type="button" onClick={() => q.add(newQuestion())}>
            Add a question
          </button>
        </fieldset>

        <fieldset>
          <legend>Red flags: scores</legend>
          <p class="hint">A score rule opens a case when a scale answer is at or above (or at or below) a value.</p>
          {scores.map((x, i) => {
            const id = `p-s${i}`;
            const path = `redFlags.scores[${i}]`;
            const rowErr = err(`${path}.question`) ?? err(`${path}.value`) ?? err(path);
            return (
              <div key={i} class="row">
                <span class="field">
                  <label for={`${id}-q`}>Question</label>
                  <select
                    id={`${id}-q`}
                    value={x.question}
                    onChange={(e) => s.change(i, { question: e.currentTarget.value })}
                    {...invalid(`${id}-err`, rowErr)}
                  >
                    <option value="">(choose)</option>
                    {[...new Set([...scaleKeys, ...(x.question ? [x.question] : [])])].map((k) => (
                      <option key={k} value={k}>
                        {k}
                      </option>
                    ))}
                  </select>
                </span>
                <span class="field">
                  <label for={`${id}-op`}>When</label>
                  <select id={`${id}-op`} value={x.op} onChange={(e) => s.change(i, { op: e.currentTarget.value as '>=' | '<=' })}>
                    <option value=">=">at or above (&gt;=)</option>
                    <option value="<=">at or below (&lt;=)</option>
                  </select>
                </span>
                <span class="field">
                  <label for={`${id}-v`}>Value</label>
                  <input id={`${id}-v`} type="number" value={x.value} onInput={(e) => s.change(i, { value: e.currentTarget.value })} />
                </span>
                <span class="field">
                  <label for={`${id}-t`}>Tier</label>
                  <select id={`${id}-t`} value={x.tier} onChange={(e) => s.change(i, { tier: e.currentTarget.value as Tier })}>
                    {TIERS.map((t) => (
                      <option key={t}>{t}</option>
                    ))}
                  </select>
                </span>
                <button type="button" class="danger" onClick={() => s.remove(i)}>
                  Remove<span class="sr-only"> score rule {i + 1}</span>
                </button>
                <FieldError id={`${id}-err`} message={rowErr} />
              </div>
            );
          })}
          <button type="button" onClick={() => s.add({ question: scaleKeys[0] ?? '', op: '>=', value: '7', tier: 'urgent' })}>
            Add a score rule
          </button>
        </fieldset>
        <PhraseRows label="Red flags: phrases" item="phrase" idBase="p-ph" path="redFlags.phrases" list={phrases} set={setPhrases} problem={problem} />
        <p class="hint">
          Phrases match whole words of text answers and notes; meaning phrases also match other word forms, any order and synonyms (English and Spanish).
        </p>
        <PhraseRows
          label="Red flags: meaning phrases"
          item="meaning phrase"
          idBase="p-sp"
          path="redFlags.semanticPhrases"
          list={semantic}
          set={setSemantic}
          problem={problem}
        />
        <label class="check">
          <input type="checkbox" checked={emergencyTerms} onChange={(e) => setEmergencyTerms(e.currentTarget.checked)} /> Built-in emergency terms (chest pain,
          breathing, stroke, self-harm, …; English and Spanish): emergency guidance at once
        </label>
        <button type="submit" class="primary" disabled={busy}>
          Create protocol
        </button>
      </fieldset>
      <ProblemBox problem={problem} />
    </form>
  );
}

export function ProtocolsView({ api, org, env }: Props) {
  const base = `/organizations/${org.id}/environments/${env.id}/protocols`;
  const [list, setList] = useState<Protocol[] | null>(null);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [said, setSaid] = useState('');
  const load = async () => {
    const r = await api.get<{ protocols: Protocol[] }>(base);
    if (r.ok) setList(r.body.protocols);
    else setProblem(r.problem);
  };
  useEffect(() => void load(), [env.id]);
  const toggle = (p: Protocol) =>
    void api.post<Protocol>(`${base}/${p.id}/${p.active ? 'deactivate' : 'activate'}`).then((r) => {
      if (!r.ok) return setProblem(r.problem);
      setProblem(null);
      setSaid(
        r.body.active ? `${p.name} is active: new enrolments may use it.` : `${p.name} is inactive: no new enrolments; enrolled patients keep their check-ins.`,
      );
      void load();
    });
  return (
    <section>
      <ScreenTitle>
        Protocols <EnvBadge kind={env.kind} />
      </ScreenTitle>
      <p>
        A protocol is what patients of a program are asked at each check-in, how often, and which answers open a clinical case. Your system enrols a patient
        into an active protocol (patient.created with its program key).
      </p>
      {list && list.length === 0 ? <p>No protocols in this environment yet.</p> : null}
      {list && list.length > 0 ? (
        <table>
          <caption class="sr-only">Protocols, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">Protocol</th>
              <th scope="col">Every</th>
              <th scope="col">Questions</th>
              <th scope="col">Red flags</th>
              <th scope="col">State</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((p) => (
              <tr key={p.id} data-protocol={p.programKey}>
                <td>
                  <strong>{p.name}</strong>
                  <br />
                  <code>{p.programKey}</code>
                  <br />
                  <span class="hint">created {when(p.createdAt)}</span>
                </td>
                <td>{p.defaultCadenceDays === 1 ? 'day' : `${p.defaultCadenceDays} days`}</td>
                <td>
                  <ul class="plain">
                    {p.questions.map((q) => (
                      <li key={q.key}>
                        <code>{q.key}</code> {q.text}{' '}
                        <span class="hint">({q.type === 'scale' ? `${q.min ?? 0}–${q.max ?? 10}` : q.type.replace('_', ' ')})</span>
                      </li>
                    ))}
                  </ul>
                </td>
                <td>
                  <ul class="plain">
                    {(p.redFlags.scores ?? []).map((r, i) => (
                      <li key={`s${i}`}>
                        {r.question} {r.op} {r.value}: <span class={`prio prio-${r.tier}`}>{r.tier}</span>
                      </li>
                    ))}
                    {[...(p.redFlags.phrases ?? []), ...(p.redFlags.semanticPhrases ?? [])].map((r, i) => (
                      <li key={`p${i}`}>
                        “{r.phrase}”: <span class={`prio prio-${r.tier}`}>{r.tier}</span>
                      </li>
                    ))}
                    {p.redFlags.emergencyTerms !== false ? <li>emergency terms</li> : null}
                  </ul>
                </td>
                <td>{p.active ? <strong class="ok">active</strong> : 'inactive'}</td>
                <td>
                  <button type="button" class={p.active ? 'secondary' : 'primary'} onClick={() => toggle(p)}>
                    {p.active ? 'Deactivate' : 'Activate'}
                    <span class="sr-only"> {p.name}</span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <p role="status">{said}</p>
      <ProblemBox problem={problem} />
      <NewProtocol
        api={api}
        base={base}
        onCreated={(p) => {
          setSaid(`${p.name} was created, inactive: activate it to enrol patients.`);
          void load();
        }}
      />
    </section>
  );
}

/** "Send a check-in now" (clinical work: any member of the organization): an email with a new check-in link, outside the cadence. */
export function SendCheckIn({ api, org, env, patientId: fixed }: Props & { patientId?: string }) {
  const [patientId, setPatientId] = useState(fixed ?? '');
  const [problem, setProblem] = useState<Problem | null>(null);
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const err = fieldError(problem, 'patientId');
  const send = () => {
    setBusy(true);
    setSaid('');
    void api
      .post<{ checkInId: string }>(`/organizations/${org.id}/environments/${env.id}/patients/${encodeURIComponent(patientId.trim())}/check-ins`)
      .then((r) => {
        setBusy(false);
        if (!r.ok) return setProblem(r.problem);
        setProblem(null);
        setSaid(`A check-in was sent to the patient (check-in ${r.body.checkInId}). The cadence is unchanged.`);
      });
  };
  return (
    <div class="send-checkin">
      {fixed ? (
        <button type="button" onClick={send} disabled={busy}>
          Send a check-in now
        </button>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
        >
          <label for="ci-patient">Patient id</label>
          <input
            id="ci-patient"
            class="mono"
            required
            value={patientId}
            onInput={(e) => setPatientId(e.currentTarget.value)}
            {...invalid('ci-patient-err', err)}
          />
          <p class="hint">The service’s patient id: the patientId of the 202 answer to patient.created, also shown on each of the patient’s cases.</p>
          <FieldError id="ci-patient-err" message={err} />
          <button type="submit" class="primary" disabled={busy}>
            Send a check-in now
          </button>
        </form>
      )}
      <p role="status">{said}</p>
      <ProblemBox problem={problem} />
    </div>
  );
}

export function PatientsView(props: Props) {
  return (
    <section>
      <ScreenTitle>
        Patients <EnvBadge kind={props.env.kind} />
      </ScreenTitle>
      <p>
        Send a patient a check-in now, outside the cadence: they get an email with a new single-use link to the questions of their protocol. Each one uses a
        credit.
      </p>
      <SendCheckIn {...props} />
    </section>
  );
}
