// Over 400 lines: the workflow builder is one screen whose steps, fields and preview share one state.
/**
 * The workflow builder: a draft's definition as an ordered list of steps, each with its type's form,
 * beside the same definition as JSON (edit either; the other follows). Every change is checked at
 * once with the service's own validator (definition.ts), and each problem is shown next to the field
 * or step it names. Saving sends the revision the builder loaded; when someone saved meanwhile
 * (409 STALE_REVISION) it says what each side changed and offers to merge or to reload.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { canonicalJson } from '@svc/decider';
import type { Api, Problem } from '../api';
import { Definition, Detail, END, changesAccount, checksOwnership, typedVariablesUsed, validateDefinition } from '../definition';
import { Go, Link, Route } from '../main';
import { ProblemBox } from '../ui';
import { Comparison, Draft, VersionRecord, Workflow, compare, describe, isObj, merge, same, stepsOf } from '../workflow-model';
import type { Destination } from './destinations';

const STEP_TYPES = [
  { type: 'ask', label: 'Ask the patient' },
  { type: 'call_api', label: 'Call a Destination' },
  { type: 'condition', label: 'Condition' },
  { type: 'confirm', label: 'Confirm (yes or no)' },
  { type: 'reply', label: 'Reply' },
  { type: 'hand_off', label: 'Hand off to the team' },
];
const CATEGORIES = ['support', 'billing', 'scheduling', 'fulfillment'];
const FORMATS = ['text', 'order_number', 'email', 'number', 'photos'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const OPERATORS = ['equals', 'not_equals', 'contains', 'is_empty', 'is_not_empty'];

type Step = Record<string, unknown>;
const str = (v: unknown) => (typeof v === 'string' ? v : '');
const pretty = (d: unknown) => JSON.stringify(d, null, 2);
const key = (v: unknown) => (v === undefined ? '' : canonicalJson(v));

/** A new step of a type, keeping its id and `next`. */
function freshStep(type: string, id: string, next: unknown, destination: string): Step {
  const base: Step = { id, type, ...(typeof next === 'string' && type !== 'condition' && type !== 'hand_off' ? { next } : {}) };
  switch (type) {
    case 'ask':
      return { ...base, variable: 'answer', prompt: '', format: 'text' };
    case 'call_api':
      return { ...base, destinationStableKey: destination, method: 'GET', path: '/', save: [], notFoundReply: '', errorReply: '' };
    case 'condition':
      return { ...base, variable: '', operator: 'equals', value: '', then: END, else: END };
    case 'confirm':
      return { ...base, prompt: '', declineReply: '' };
    default: // reply, hand_off
      return { ...base, message: '' };
  }
}

/** A text edited in its own box (JSON, one phrase a line) that follows the definition when it changes elsewhere. */
function useSyncedText<T>(value: T, format: (v: T) => string, parse: (text: string) => { ok: true; value: T } | { ok: false; error: string }) {
  const [text, setText] = useState(() => format(value));
  const [error, setError] = useState<string | null>(null);
  const k = key(value);
  useEffect(() => {
    const p = parse(text);
    if (!p.ok || key(p.value) !== k) {
      setText(format(value));
      setError(null);
    }
  }, [k]);
  return {
    text,
    error,
    input(t: string, commit: (v: T) => void) {
      setText(t);
      const p = parse(t);
      if (p.ok) {
        setError(null);
        if (key(p.value) !== k) commit(p.value);
      } else setError(p.error);
    },
  };
}

const parseJson = (t: string): { ok: true; value: unknown } | { ok: false; error: string } => {
  try {
    return { ok: true, value: JSON.parse(t) };
  } catch (e) {
    return { ok: false, error: `Not JSON: ${(e as Error).message}` };
  }
};

/** Problems by path: `at(path)` the message at exactly that path (and notes it as shown); `rest(prefix)` those not shown yet. */
function problemsOf(details: Detail[]) {
  const shown = new Set<string>();
  return {
    at(path: string): string | null {
      const found = details.filter((d) => d.path === path);
      if (!found.length) return null;
      shown.add(path);
      return found.map((d) => d.message).join('; ');
    },
    rest(prefix: string, exact: boolean): Detail[] {
      return details.filter(
        (d) => !shown.has(d.path) && (d.path === prefix || (!exact && (d.path.startsWith(`${prefix}.`) || d.path.startsWith(`${prefix}[`)))),
      );
    },
  };
}

interface FieldProps {
  id: string;
  label: string;
  path: string;
  value: string;
  error: string | null;
  onInput: (v: string) => void;
  multiline?: boolean;
  mono?: boolean;
  hint?: string;
}

/** A text field of the builder with its problem under it (`data-path` lets the summary move the focus to it). */
function Field({ id, label, path, value, error, onInput, multiline, mono, hint }: FieldProps) {
  const described = [hint ? `${id}-hint` : '', error ? `${id}-err` : ''].filter(Boolean).join(' ') || undefined;
  const common = {
    id,
    'data-path': path,
    value,
    class: mono ? 'mono' : undefined,
    'aria-invalid': error ? (true as const) : undefined,
    'aria-describedby': described,
  };
  return (
    <span class="field">
      <label for={id}>{label}</label>
      {multiline ? (
        <textarea rows={2} {...common} onInput={(e) => onInput(e.currentTarget.value)} />
      ) : (
        <input {...common} onInput={(e) => onInput(e.currentTarget.value)} />
      )}
      {hint ? (
        <span id={`${id}-hint`} class="hint">
          {hint}
        </span>
      ) : null}
      {error ? (
        <span id={`${id}-err`} class="field-error">
          {error}
        </span>
      ) : null}
    </span>
  );
}

function Choice({
  id,
  label,
  path,
  value,
  options,
  error,
  onChange,
}: {
  id: string;
  label: string;
  path: string;
  value: string;
  options: { value: string; label: string }[];
  error: string | null;
  onChange: (v: string) => void;
}) {
  const known = options.some((o) => o.value === value);
  return (
    <span class="field">
      <label for={id}>{label}</label>
      <select
        id={id}
        data-path={path}
        value={value}
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? `${id}-err` : undefined}
        onChange={(e) => onChange(e.currentTarget.value)}
      >
        {known ? null : <option value={value}>{value ? `${value} (not known)` : '(choose)'}</option>}
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
      {error ? (
        <span id={`${id}-err`} class="field-error">
          {error}
        </span>
      ) : null}
    </span>
  );
}

function Check({ label, checked, onChange }: { label: string; checked: boolean; onChange: (v: boolean) => void }) {
  return (
    <label class="check">
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.currentTarget.checked)} /> {label}
    </label>
  );
}

/** A JSON object edited as text (a call's body). */
function JsonField({
  id,
  label,
  path,
  value,
  error,
  onChange,
}: {
  id: string;
  label: string;
  path: string;
  value: unknown;
  error: string | null;
  onChange: (v: unknown) => void;
}) {
  const t = useSyncedText<unknown>(
    value,
    (v) => (v === undefined ? '' : pretty(v)),
    (s) => (s.trim() === '' ? { ok: true, value: undefined } : parseJson(s)),
  );
  const shown = t.error ?? error;
  return (
    <span class="field">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        data-path={path}
        class="mono"
        rows={4}
        value={t.text}
        aria-invalid={shown ? true : undefined}
        aria-describedby={shown ? `${id}-err` : undefined}
        onInput={(e) => t.input(e.currentTarget.value, onChange)}
      />
      {shown ? (
        <span id={`${id}-err`} class="field-error">
          {shown}
        </span>
      ) : null}
    </span>
  );
}

/** Phrases, one a line. */
function LinesField({
  id,
  label,
  path,
  value,
  error,
  onChange,
  hint,
}: {
  id: string;
  label: string;
  path: string;
  value: unknown;
  error: string | null;
  onChange: (v: unknown) => void;
  hint: string;
}) {
  const t = useSyncedText<unknown>(
    value,
    (v) => (Array.isArray(v) ? v.join('\n') : v === undefined ? '' : pretty(v)),
    (s) => {
      const lines = s.split('\n').filter((l) => l.trim() !== '');
      return { ok: true, value: lines.length ? lines : undefined };
    },
  );
  return (
    <span class="field">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        data-path={path}
        rows={3}
        value={t.text}
        aria-invalid={error ? true : undefined}
        aria-describedby={`${id}-hint${error ? ` ${id}-err` : ''}`}
        onInput={(e) => t.input(e.currentTarget.value, onChange)}
      />
      <span id={`${id}-hint`} class="hint">
        {hint}
      </span>
      {error ? (
        <span id={`${id}-err`} class="field-error">
          {error}
        </span>
      ) : null}
    </span>
  );
}

interface StepCardProps {
  index: number;
  step: unknown;
  count: number;
  ids: string[];
  def: Draft;
  /** Every field is valid (the rules across steps may still fail): the call facts below can be worked out. */
  valid: boolean;
  destinations: Destination[] | null;
  problems: ReturnType<typeof problemsOf>;
  set: (patch: Step | null) => void;
  replace: (s: Step) => void;
  move: (to: number) => void;
  route: Route;
  go: Go;
}

function StepCard({ index: i, step, count, ids, def, valid, destinations, problems, set, replace, move, route, go }: StepCardProps) {
  const p = `definition.steps[${i}]`;
  const fid = (f: string) => `s${i}-${f}`;
  if (!isObj(step)) {
    const rest = problems.rest(p, false);
    return (
      <li class="step card">
        <h4 tabIndex={-1} data-path={p}>
          Step {i + 1}: not a step object
        </h4>
        <ul class="rule-errors">
          {rest.map((d) => (
            <li key={d.path + d.message}>{d.message}</li>
          ))}
        </ul>
      </li>
    );
  }
  const s = step;
  const type = str(s.type);
  const text = (f: string, label: string, opts: { multiline?: boolean; mono?: boolean; hint?: string; optional?: boolean } = {}) => (
    <Field
      id={fid(f)}
      label={label}
      path={`${p}.${f}`}
      value={str(s[f])}
      error={problems.at(`${p}.${f}`)}
      multiline={opts.multiline}
      mono={opts.mono}
      hint={opts.hint}
      onInput={(v) => set({ [f]: opts.optional && v === '' ? undefined : v })}
    />
  );
  const stepRef = (f: string, label: string, allowFollowing: boolean) => {
    const value = s[f] === undefined ? '' : str(s[f]);
    const options = [
      ...(allowFollowing ? [{ value: '', label: i + 1 < count ? `the next step (${ids[i + 1] ?? i + 2})` : 'end (the last step)' }] : []),
      ...ids.filter((x, j) => j !== i && x).map((x) => ({ value: x, label: x })),
      { value: END, label: 'end the conversation' },
    ];
    return (
      <Choice
        id={fid(f)}
        label={label}
        path={`${p}.${f}`}
        value={value}
        options={options}
        error={problems.at(`${p}.${f}`)}
        onChange={(v) => set({ [f]: allowFollowing && v === '' ? undefined : v })}
      />
    );
  };
  const header = (
    <div class="row">
      <Field id={fid('id')} label="Step id" path={`${p}.id`} value={str(s.id)} error={problems.at(`${p}.id`)} mono onInput={(v) => set({ id: v })} />
      <Choice
        id={fid('type')}
        label="Type"
        path={`${p}.type`}
        value={type}
        options={STEP_TYPES.map((t) => ({ value: t.type, label: t.label }))}
        error={problems.at(`${p}.type`)}
        onChange={(v) => replace(freshStep(v, str(s.id), s.next, destinations?.[0]?.stableKey ?? ''))}
      />
      {type !== 'condition' && type !== 'hand_off' ? stepRef('next', 'Then go to', true) : null}
    </div>
  );
  let body: preact.ComponentChildren = null;
  const facts: string[] = [];
  if (type === 'ask') {
    body = (
      <>
        <div class="row">
          {text('variable', 'Save the answer as', { mono: true })}
          <Choice
            id={fid('format')}
            label="Answer format"
            path={`${p}.format`}
            value={str(s.format)}
            options={FORMATS.map((f) => ({ value: f, label: f.replace('_', ' ') }))}
            error={problems.at(`${p}.format`)}
            onChange={(v) => set({ format: v })}
          />
          {text('label', 'Label in the hand-off summary (optional)', { optional: true })}
        </div>
        {text('prompt', 'Question to the patient', {
          multiline: true,
          hint: 'Templated: {{variable}}, {{patient.email}}, {{patient.externalId}}, {{run.id}}.',
        })}
      </>
    );
  } else if (type === 'call_api') {
    const known = (destinations ?? []).map((d) => ({ value: d.stableKey, label: `${d.name} (${d.stableKey})` }));
    const destKey = str(s.destinationStableKey);
    const missing = destinations !== null && destKey !== '' && !destinations.some((d) => d.stableKey === destKey);
    const sel = isObj(s.select) ? s.select : null;
    const own = isObj(s.ownership) ? s.ownership : null;
    const save = Array.isArray(s.save) ? s.save : [];
    if (valid) {
      const call = s as unknown as Parameters<typeof changesAccount>[0];
      if (changesAccount(call)) facts.push('Changes an account: on every path it must come after a call that checks ownership and after a confirm step.');
      if (checksOwnership(call))
        facts.push(
          s.contract === 'orders_v1'
            ? 'Checks ownership: the order lookup is scoped to the signed-in patient.'
            : 'Checks ownership: a record that is not the patient’s reads as not found.',
        );
      const typed = typedVariablesUsed(def as unknown as Definition, call);
      if (typed.length) facts.push(`Uses what the patient typed (${typed.join(', ')}): it must check ownership.`);
    }
    body = (
      <>
        <div class="row">
          <Choice
            id={fid('dest')}
            label="Destination"
            path={`${p}.destinationStableKey`}
            value={destKey}
            options={known}
            error={problems.at(`${p}.destinationStableKey`)}
            onChange={(v) => set({ destinationStableKey: v })}
          />
          <Choice
            id={fid('method')}
            label="Method"
            path={`${p}.method`}
            value={str(s.method)}
            options={METHODS.map((m) => ({ value: m, label: m }))}
            error={problems.at(`${p}.method`)}
            onChange={(v) => set({ method: v, ...(v === 'GET' ? { readOnly: undefined } : {}) })}
          />
          {text('path', 'Path', { mono: true, hint: 'Added to the Destination’s address; {{variable}} values are URL-encoded.' })}
        </div>
        {missing ? (
          <p class="warning">
            No Destination with the key <code>{destKey}</code> in this environment: switching on is blocked until there is one (
            <Link to={{ view: 'destinations' }} route={route} go={go}>
              Destinations
            </Link>
            ).
          </p>
        ) : null}
        <div class="row">
          <Check
            label="Order lookup contract (orders_v1)"
            checked={s.contract === 'orders_v1'}
            onChange={(v) => set(v ? { contract: 'orders_v1', select: undefined } : { contract: undefined })}
          />
          {str(s.method) !== 'GET' ? (
            <Check label="Only looks something up (read-only)" checked={s.readOnly === true} onChange={(v) => set({ readOnly: v ? true : undefined })} />
          ) : null}
          <Check
            label="Pick one record from a list"
            checked={!!sel}
            onChange={(v) => set({ select: v ? { listPath: '', matchPath: '', equals: '' } : undefined })}
          />
          <Check label="Check that the record is the patient’s" checked={!!own} onChange={(v) => set({ ownership: v ? { patientIdPath: '' } : undefined })} />
        </div>
        {(() => {
          const e = problems.at(`${p}.contract`);
          return e ? <p class="field-error">{e}</p> : null;
        })()}
        {str(s.method) !== 'GET' ? (
          <JsonField
            id={fid('body')}
            label="Body (JSON, optional)"
            path={`${p}.body`}
            value={s.body}
            error={problems.at(`${p}.body`)}
            onChange={(v) => set({ body: v })}
          />
        ) : null}
        {sel ? (
          <div class="row">
            {(['listPath', 'matchPath', 'equals'] as const).map((f) => (
              <Field
                key={f}
                id={fid(`select-${f}`)}
                label={f === 'listPath' ? 'List at' : f === 'matchPath' ? 'Match field' : 'Equal to'}
                path={`${p}.select.${f}`}
                value={str(sel[f])}
                mono
                error={problems.at(`${p}.select.${f}`)}
                onInput={(v) => set({ select: { ...sel, [f]: v } })}
              />
            ))}
          </div>
        ) : null}
        {own ? (
          <div class="row">
            {(['patientIdPath', 'emailPath'] as const).map((f) => (
              <Field
                key={f}
                id={fid(`own-${f}`)}
                label={f === 'patientIdPath' ? 'Patient id at (optional)' : 'Patient email at (optional)'}
                path={`${p}.ownership.${f}`}
                value={str(own[f])}
                mono
                error={problems.at(`${p}.ownership.${f}`)}
                onInput={(v) => set({ ownership: { ...own, [f]: v === '' ? undefined : v } })}
              />
            ))}
          </div>
        ) : null}
        <fieldset class="saves">
          <legend>Save from the answer</legend>
          {save.map((sv, j) => {
            const o = isObj(sv) ? sv : {};
            const change = (f: string, v: string) => set({ save: save.map((x, k) => (k === j ? { ...(isObj(x) ? x : {}), [f]: v } : x)) });
            return (
              <div class="row" key={j}>
                <Field
                  id={fid(`save${j}-var`)}
                  label={`Variable ${j + 1}`}
                  path={`${p}.save[${j}].variable`}
                  value={str(o.variable)}
                  mono
                  error={problems.at(`${p}.save[${j}].variable`)}
                  onInput={(v) => change('variable', v)}
                />
                <Field
                  id={fid(`save${j}-path`)}
                  label={`From ${j + 1}`}
                  path={`${p}.save[${j}].path`}
                  value={str(o.path)}
                  mono
                  error={problems.at(`${p}.save[${j}].path`)}
                  onInput={(v) => change('path', v)}
                />
                <button type="button" class="danger" onClick={() => set({ save: save.filter((_, k) => k !== j) })}>
                  Remove
                  <span class="sr-only">
                    {' '}
                    saved variable {j + 1} of step {i + 1}
                  </span>
                </button>
              </div>
            );
          })}
          <button type="button" onClick={() => set({ save: [...save, { variable: '', path: '' }] })}>
            Add a variable<span class="sr-only"> to step {i + 1}</span>
          </button>
        </fieldset>
        {text('notFoundReply', 'Reply when not found', { multiline: true })}
        {text('errorReply', 'Reply when the call fails', { multiline: true })}
      </>
    );
  } else if (type === 'condition') {
    const op = str(s.operator);
    body = (
      <div class="row">
        {text('variable', 'Variable', { mono: true })}
        <Choice
          id={fid('operator')}
          label="Operator"
          path={`${p}.operator`}
          value={op}
          options={OPERATORS.map((o) => ({ value: o, label: o.replace(/_/g, ' ') }))}
          error={problems.at(`${p}.operator`)}
          onChange={(v) => set({ operator: v, ...(v.startsWith('is_') ? { value: undefined } : {}) })}
        />
        {op.startsWith('is_') ? null : text('value', 'Value')}
        {stepRef('then', 'When true, go to', false)}
        {stepRef('else', 'Otherwise, go to', false)}
      </div>
    );
  } else if (type === 'confirm') {
    body = (
      <>
        {text('prompt', 'Question (answered yes or no)', { multiline: true })}
        {text('declineReply', 'Reply on no (the run ends)', { multiline: true })}
      </>
    );
  } else if (type === 'reply') {
    body = text('message', 'Message', { multiline: true });
  } else if (type === 'hand_off') {
    body = (
      <>
        {text('message', 'Message to the patient', { multiline: true })}
        {text('summary', 'Summary for the team (optional)', { multiline: true, optional: true })}
        {text('teamAsk', 'What the team should do (optional)', { optional: true })}
        <Choice
          id={fid('category')}
          label="Team"
          path={`${p}.category`}
          value={str(s.category)}
          options={[
            { value: '', label: 'the workflow’s category' },
            ...[...CATEGORIES, 'clinical'].map((c) => ({ value: c, label: c === 'clinical' ? 'clinical (the care team: a case)' : c })),
          ]}
          error={problems.at(`${p}.category`)}
          onChange={(v) => set({ category: v === '' ? undefined : v })}
        />
      </>
    );
  }
  // What is left for this step: the rules across steps (at the step itself) and anything no field shows.
  const rest = problems.rest(p, false);
  const label = STEP_TYPES.find((t) => t.type === type)?.label ?? type;
  return (
    <li class={`step card${rest.length ? ' has-problems' : ''}`} data-step={str(s.id)}>
      <h4 id={fid('h')} tabIndex={-1} data-path={p}>
        Step {i + 1}: <code>{str(s.id) || '(no id)'}</code> <span class="hint">{label}</span>
      </h4>
      {rest.length ? (
        <ul class="rule-errors" aria-label={`Problems of step ${i + 1}`}>
          {rest.map((d) => (
            <li key={d.path + d.message}>
              {d.path === p ? '' : <code>{d.path.slice(p.length + 1)}: </code>}
              {d.message}
            </li>
          ))}
        </ul>
      ) : null}
      {header}
      {body}
      {facts.length ? (
        <ul class="facts-list">
          {facts.map((f) => (
            <li key={f}>{f}</li>
          ))}
        </ul>
      ) : null}
      <div class="actions">
        <button type="button" id={fid('up')} disabled={i === 0} onClick={() => move(i - 1)}>
          Move up<span class="sr-only"> step {i + 1}</span>
        </button>
        <button type="button" id={fid('down')} disabled={i === count - 1} onClick={() => move(i + 1)}>
          Move down<span class="sr-only"> step {i + 1}</span>
        </button>
        <button type="button" class="danger" onClick={() => set(null)}>
          Remove step<span class="sr-only"> {i + 1}</span>
        </button>
      </div>
    </li>
  );
}

/** The conflict after a 409 STALE_REVISION: what each side changed, choices where both changed the same thing, merge or reload. */
function Conflict({
  base,
  mine,
  theirs,
  onMerge,
  onReload,
}: {
  base: VersionRecord;
  mine: Draft;
  theirs: VersionRecord;
  onMerge: (d: Draft) => void;
  onReload: () => void;
}) {
  const c: Comparison = useMemo(() => compare(base.definition, mine, theirs.definition), [base, mine, theirs]);
  const [choose, setChoose] = useState<Record<string, 'mine' | 'theirs'>>({});
  const h = useRef<HTMLHeadingElement>(null);
  useEffect(() => h.current?.focus(), []);
  return (
    <section class="conflict" aria-labelledby="conflict-h">
      <h3 id="conflict-h" ref={h} tabIndex={-1}>
        Someone saved this draft after you opened it
      </h3>
      <p>
        You edited revision {base.revision}; the draft is now at revision {theirs.revision}. Your changes are not saved yet.
      </p>
      <dl class="facts">
        <dt>They changed</dt>
        <dd>{c.theirs.length ? describe(c.theirs) : 'nothing you can see (the same definition was saved again)'}</dd>
        <dt>You changed</dt>
        <dd>{c.mine.length ? describe(c.mine) : 'nothing'}</dd>
      </dl>
      {c.conflicts.length ? (
        <fieldset>
          <legend>Changed on both sides: keep which?</legend>
          {c.conflicts.map((it) => (
            <div key={it.key} role="radiogroup" aria-label={it.label} class="row">
              <strong>{it.label}</strong>
              {(['mine', 'theirs'] as const).map((side) => (
                <label key={side} class="check">
                  <input
                    type="radio"
                    name={`choose-${it.key}`}
                    checked={(choose[it.key] ?? 'mine') === side}
                    onChange={() => setChoose({ ...choose, [it.key]: side })}
                  />{' '}
                  {side === 'mine' ? 'mine' : `revision ${theirs.revision}`}
                </label>
              ))}
            </div>
          ))}
        </fieldset>
      ) : (
        <p>No part was changed on both sides: merging keeps both sets of changes.</p>
      )}
      <div class="actions">
        <button type="button" class="primary" onClick={() => onMerge(merge(base.definition, mine, theirs.definition, choose))}>
          Merge onto revision {theirs.revision}
        </button>
        <button type="button" class="secondary" onClick={onReload}>
          Reload revision {theirs.revision} (drop my changes)
        </button>
      </div>
    </section>
  );
}

interface BuilderProps {
  api: Api;
  base: string;
  workflow: Workflow;
  version: VersionRecord;
  destinations: Destination[] | null;
  /** Reads the workflow again (after a save elsewhere); answers it. */
  reload: () => Promise<Workflow | null>;
  onSaved: (w: Workflow) => void;
  /** Tells the page whether the builder holds unsaved changes. */
  onDirty: (dirty: boolean) => void;
  route: Route;
  go: Go;
}

export function Builder({ api, base, workflow, version, destinations, reload, onSaved, onDirty, route, go }: BuilderProps) {
  const [loaded, setLoaded] = useState<VersionRecord>(version);
  const [def, setDef] = useState<Draft>(version.definition);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [said, setSaid] = useState('');
  const [conflict, setConflict] = useState<VersionRecord | null>(null);
  const [busy, setBusy] = useState(false);
  const focusNext = useRef<string | null>(null);
  const details = useMemo(() => validateDefinition(def), [def]);
  // The validator checks the rules across steps only once every field is valid; those messages name their step ("step `x` …").
  const acrossSteps = details.some((d) => d.message.startsWith('step `'));
  const fieldsValid = details.every((d) => d.message.startsWith('step `'));
  const problems = problemsOf(details);
  const dirty = !same(def, loaded.definition);
  useEffect(() => onDirty(dirty), [dirty]);
  // A newer revision of this draft arrived from the page (after a test or a reload), and nothing here is unsaved: show it.
  useEffect(() => {
    if (version.id === loaded.id && version.revision > loaded.revision && !dirty) {
      setLoaded(version);
      setDef(version.definition);
    }
  }, [version.revision]);
  useEffect(() => {
    if (!focusNext.current) return;
    (document.getElementById(focusNext.current) as HTMLElement | null)?.focus();
    focusNext.current = null;
  });
  const json = useSyncedText<unknown>(def, pretty, parseJson);
  const steps = stepsOf(def);
  const ids = steps.map((s) => (isObj(s) ? str(s.id) : ''));
  const setSteps = (next: unknown[]) => setDef({ ...def, steps: next });
  const setTop = (f: string, v: unknown) => {
    const d = { ...def };
    if (v === undefined) delete d[f];
    else d[f] = v;
    setDef(d);
  };

  const save = async () => {
    setBusy(true);
    const r = await api.put<Workflow>(`${base}/versions/${loaded.id}`, { expectedRevision: loaded.revision, definition: def });
    setBusy(false);
    if (r.ok) {
      const v = r.body.versions.find((x) => x.id === loaded.id)!;
      setLoaded(v);
      setDef(v.definition);
      setProblem(null);
      setConflict(null);
      setSaid(`Saved: revision ${v.revision}.`);
      onSaved(r.body);
      return;
    }
    setProblem(r.problem);
    if (r.problem.code === 'STALE_REVISION') {
      const w = await reload();
      const theirs = w?.versions.find((x) => x.id === loaded.id);
      if (theirs && theirs.state === 'draft') setConflict(theirs);
    }
  };

  const top = {
    category: problems.at('definition.category'),
    description: problems.at('definition.description'),
    trigger: problems.at('definition.triggerPhrases') ?? problems.rest('definition.triggerPhrases', false)[0]?.message ?? null,
    exclude: problems.at('definition.excludePhrases') ?? problems.rest('definition.excludePhrases', false)[0]?.message ?? null,
  };
  const cards = steps.map((s, i) => (
    <StepCard
      key={i}
      index={i}
      step={s}
      count={steps.length}
      ids={ids}
      def={def}
      valid={fieldsValid}
      destinations={destinations}
      problems={problems}
      set={(patch) => {
        if (patch === null) {
          focusNext.current = steps.length > 1 ? `s${Math.min(i, steps.length - 2)}-h` : 'add-step-type';
          return setSteps(steps.filter((_, j) => j !== i));
        }
        const o: Step = { ...(isObj(s) ? s : {}) };
        for (const [k, v] of Object.entries(patch)) {
          if (v === undefined) delete o[k];
          else o[k] = v;
        }
        setSteps(steps.map((x, j) => (j === i ? o : x)));
      }}
      replace={(o) => setSteps(steps.map((x, j) => (j === i ? o : x)))}
      move={(to) => {
        const next = [...steps];
        const [m] = next.splice(i, 1);
        next.splice(to, 0, m);
        focusNext.current = `s${to}-${to < i ? 'up' : 'down'}`;
        if (to === 0 || to === steps.length - 1) focusNext.current = `s${to}-h`;
        setSteps(next);
      }}
      route={route}
      go={go}
    />
  ));
  // Problems of the definition that no field above shows (the steps show their own once they render).
  const left = problems.rest('definition', false).filter((d) => !d.path.startsWith('definition.steps['));
  const [newType, setNewType] = useState('reply');
  return (
    <section aria-labelledby="builder-h" class="builder">
      <h3 id="builder-h">
        Draft: version {loaded.number}, revision {loaded.revision}
        {dirty ? <span class="unsaved"> (unsaved changes)</span> : null}
      </h3>
      {conflict ? (
        <Conflict
          base={loaded}
          mine={def}
          theirs={conflict}
          onMerge={(d) => {
            setLoaded(conflict);
            setDef(d);
            setConflict(null);
            setProblem(null);
            setSaid(`Merged onto revision ${conflict.revision}: review the draft and save it.`);
          }}
          onReload={() => {
            setLoaded(conflict);
            setDef(conflict.definition);
            setConflict(null);
            setProblem(null);
            setSaid(`Revision ${conflict.revision} is loaded; your changes were dropped.`);
          }}
        />
      ) : null}
      <div class="builder-panes">
        <div class="pane-form">
          <fieldset>
            <legend>When the workflow runs</legend>
            <div class="row">
              <Choice
                id="wf-category"
                label="Category"
                path="definition.category"
                value={str(def.category)}
                options={CATEGORIES.map((c) => ({ value: c, label: c }))}
                error={top.category}
                onChange={(v) => setTop('category', v)}
              />
            </div>
            <Field
              id="wf-description"
              label="Description"
              path="definition.description"
              value={str(def.description)}
              error={top.description}
              onInput={(v) => setTop('description', v)}
            />
            <LinesField
              id="wf-trigger"
              label="Trigger phrases"
              path="definition.triggerPhrases"
              value={def.triggerPhrases}
              error={top.trigger}
              hint="One a line (up to 20): a patient message with one of them starts the workflow (English or Spanish; case and accents ignored)."
              onChange={(v) => setTop('triggerPhrases', v)}
            />
            <LinesField
              id="wf-exclude"
              label="Exclude phrases"
              path="definition.excludePhrases"
              value={def.excludePhrases}
              error={top.exclude}
              hint="One a line (up to 20): a message with one of them never starts it."
              onChange={(v) => setTop('excludePhrases', v)}
            />
          </fieldset>
          <h4 class="steps-h">Steps, in order</h4>
          <ol class="steps">{cards}</ol>
          <div class="row add-step">
            <span class="field">
              <label for="add-step-type">New step</label>
              <select id="add-step-type" value={newType} onChange={(e) => setNewType(e.currentTarget.value)}>
                {STEP_TYPES.map((t) => (
                  <option key={t.type} value={t.type}>
                    {t.label}
                  </option>
                ))}
              </select>
            </span>
            <button
              type="button"
              onClick={() => {
                let n = steps.length + 1;
                while (ids.includes(`step_${n}`)) n++;
                focusNext.current = `s${steps.length}-id`;
                setSteps([...steps, freshStep(newType, `step_${n}`, undefined, destinations?.[0]?.stableKey ?? '')]);
              }}
            >
              Add the step
            </button>
          </div>
        </div>
        <div class="pane-json">
          <label for="wf-json">Definition as JSON (edit here or in the form)</label>
          <textarea
            id="wf-json"
            class="mono json"
            spellcheck={false}
            value={json.text}
            aria-invalid={json.error ? true : undefined}
            aria-describedby={json.error ? 'wf-json-err' : undefined}
            onInput={(e) =>
              json.input(e.currentTarget.value, (v) => {
                if (isObj(v)) setDef(v);
              })
            }
          />
          {json.error ? (
            <p id="wf-json-err" class="field-error">
              {json.error}. The form shows the last valid JSON.
            </p>
          ) : null}
        </div>
      </div>
      <div class="check-summary">
        <p role="status">
          {details.length === 0
            ? 'The service’s checks pass: saving would be accepted.'
            : `${details.length} ${details.length === 1 ? 'problem' : 'problems'}: saving would be refused. Each is shown next to its field or step.`}
          {!acrossSteps && details.length > 0 ? ' The rules across steps (ownership, confirm, cycles) are checked once every field is valid.' : ''}
        </p>
        {details.length ? (
          <ul class="plain">
            {details.slice(0, 30).map((d) => (
              <li key={d.path + d.message}>
                <button
                  type="button"
                  class="link"
                  onClick={() => {
                    const el = (document.querySelector(`[data-path="${d.path}"]`) ??
                      document.querySelector(`[data-path="${d.path.replace(/\.[^.[]+$|\[\d+\]$/, '')}"]`)) as HTMLElement | null;
                    el?.focus();
                  }}
                >
                  <code>{d.path}</code>
                </button>{' '}
                {d.message}
              </li>
            ))}
          </ul>
        ) : null}
        {left.length ? <p class="field-error">{left.map((d) => `${d.path}: ${d.message}`).join('; ')}</p> : null}
      </div>
      <div class="actions">
        <button type="button" class="primary" disabled={!dirty || busy} onClick={() => void save()}>
          Save draft
        </button>
        <button
          type="button"
          class="secondary"
          disabled={!dirty}
          onClick={() => {
            if (confirm('Drop the unsaved changes?')) setDef(loaded.definition);
          }}
        >
          Undo unsaved changes
        </button>
      </div>
      <p role="status">{said}</p>
      <ProblemBox problem={problem} />
      <p class="hint">
        {workflow.name} · <code>{workflow.stableKey}</code>
      </p>
    </section>
  );
}
