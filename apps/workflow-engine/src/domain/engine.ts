// Over 400 lines: the workflow engine's pure step evaluation, one decider.
/**
 * The pure step machine of a workflow run. No I/O: a `call_api` step stops the machine with the
 * request to make; the application runner does the call and feeds the result back.
 */
import {
  AskStep,
  CallApiStep,
  Definition,
  END,
  HandOffCategory,
  Step,
  changesAccount,
  checksOwnership,
  patientFieldsUsed,
  typedVariablesUsed,
} from './definition';
import { OrderCard, ordersToShow, parseOrdersResponse } from './orders';

export interface Patient {
  email: string | null;
  externalId: string | null;
}

export type Reply = { type: 'text'; text: string } | { type: 'orders'; orders: OrderCard[] } | { type: 'upload'; variable: string };

export type StepOutcome =
  | 'asked'
  | 'answered'
  | 'invalid_answer'
  | 'confirm_asked'
  | 'confirmed'
  | 'declined'
  | 'call_ok'
  | 'not_found'
  | 'call_failed'
  | 'contract_broken'
  | 'sign_in_required'
  | 'patient_email_missing'
  | 'rule_violation'
  | 'then'
  | 'else'
  | 'replied'
  | 'handed_off';

export interface StepTrace {
  stepId: string;
  type: Step['type'];
  outcome: StepOutcome;
}

export type RunOutcome = 'completed' | 'handed_off' | 'declined' | 'not_found' | 'call_failed' | 'sign_in_required' | 'error' | 'switched_off';

export interface HandOff {
  category: HandOffCategory;
  message: string;
  summary: string | null;
  teamAsk: string | null;
  /** `Label: value` lines of the patient's labelled answers, in the order asked. */
  answers: string[];
}

export interface RunState {
  pc: string;
  vars: Record<string, string>;
  status: 'running' | 'waiting' | 'calling' | 'ended';
  outcome: RunOutcome | null;
  /** True once a step errored (a failed call, a broken contract, a rule violation). */
  stepError: boolean;
  confirmed: boolean;
  ownershipChecked: boolean;
  asked: { variable: string; label: string }[];
  steps: StepTrace[];
  executed: number;
  handOff: HandOff | null;
}

export interface RunContext {
  runId: string;
  patient: Patient;
}

export interface CallRequest {
  stepId: string;
  destinationStableKey: string;
  method: string;
  /** Step path, substituted values URL-encoded (appended to the destination's address). */
  path: string;
  /** Raw JSON body, or undefined. */
  body: string | undefined;
}

export type CallResult =
  | { kind: 'response'; status: number; body: unknown }
  | { kind: 'failed'; reason: 'timeout' | 'network' | 'refused_address' | 'destination_missing' | 'invalid_response' | 'invalid_request' };

export type Next = { kind: 'await' } | { kind: 'call'; request: CallRequest } | { kind: 'ended' };

export interface Advance {
  state: RunState;
  replies: Reply[];
  next: Next;
}

export const SIGN_IN_REPLY = 'Please sign in so I can look that up for you. If you prefer, I can connect you with our team.';
const MAX_STEPS_PER_TURN = 100;

export function startRun(def: Definition): RunState {
  return {
    pc: def.steps[0].id,
    vars: {},
    status: 'running',
    outcome: null,
    stepError: false,
    confirmed: false,
    ownershipChecked: false,
    asked: [],
    steps: [],
    executed: 0,
    handOff: null,
  };
}

// ---------- templating and paths ----------

/**
 * A run variable's value, or '' when unset. Own members only: a variable may be named like an
 * Object.prototype member (`constructor`, `valueOf`, `toString` match the name pattern), and a
 * plain lookup would hand out the inherited function (shown to patients, sent to Destinations,
 * or a 500 on `.trim()`).
 */
export function varValue(vars: Record<string, string>, name: string): string {
  return Object.prototype.hasOwnProperty.call(vars, name) ? (vars[name] ?? '') : '';
}

function lookupVar(name: string, vars: Record<string, string>, ctx: RunContext): string {
  if (name === 'patient.email') return ctx.patient.email ?? '';
  if (name === 'patient.externalId') return ctx.patient.externalId ?? '';
  if (name === 'run.id') return ctx.runId;
  return varValue(vars, name);
}

/** `{{variable}}`, `{{patient.email}}`, `{{patient.externalId}}`, `{{run.id}}`; `encode` escapes each substituted value. */
export function render(text: string, vars: Record<string, string>, ctx: RunContext, encode: (v: string) => string = (v) => v): string {
  return text.replace(/\{\{\s*([a-zA-Z][a-zA-Z0-9_.]*)\s*\}\}/g, (_, name: string) => encode(lookupVar(name, vars, ctx)));
}

/** String values of a JSON template rendered; JSON.stringify escapes what was substituted. */
function renderJson(v: unknown, vars: Record<string, string>, ctx: RunContext): unknown {
  if (typeof v === 'string') return render(v, vars, ctx);
  if (Array.isArray(v)) return v.map((x) => renderJson(x, vars, ctx));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, renderJson(x, vars, ctx)]));
  return v;
}

export function getPath(value: unknown, path: string): unknown {
  let cur = value;
  for (const part of path.split('.')) {
    if (cur === null || cur === undefined) return undefined;
    if (Array.isArray(cur) && /^\d+$/.test(part)) cur = cur[Number(part)];
    else if (typeof cur === 'object' && !Array.isArray(cur))
      cur = Object.prototype.hasOwnProperty.call(cur, part) ? (cur as Record<string, unknown>)[part] : undefined;
    else return undefined;
  }
  return cur;
}

const asText = (v: unknown): string => (v === undefined || v === null ? '' : typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v));

export function buildRequest(step: CallApiStep, vars: Record<string, string>, ctx: RunContext): CallRequest {
  const path = render(step.path, vars, ctx, encodeURIComponent);
  let body: string | undefined;
  if (step.contract === 'orders_v1' && step.body === undefined) {
    body = JSON.stringify({ version: 1, type: 'order_lookup.requested', requestId: ctx.runId, patient: { externalId: ctx.patient.externalId ?? '' } });
  } else if (step.body !== undefined) {
    body = JSON.stringify(renderJson(step.body, vars, ctx));
  }
  return { stepId: step.id, destinationStableKey: step.destinationStableKey, method: step.method, path, body };
}

// ---------- answers ----------

const YES = ['yes', 'y', 'yeah', 'yep', 'sure', 'ok', 'okay', 'confirm', 'correct', 'si', 'claro', 'de acuerdo', 'vale', 'confirmo', 'correcto'];
const NO = ['no', 'n', 'nope', 'cancel', 'stop', 'cancelar', 'no gracias', 'no thanks'];

export function normalize(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}@._#-]+/gu, ' ')
    .trim();
}

function parseAnswer(step: AskStep, text: string, attachments: number): string | null {
  const t = text.trim();
  switch (step.format) {
    case 'photos':
      return String(attachments);
    case 'text':
      return t.length ? t : null;
    case 'order_number': {
      const m = /^#?\s*([A-Za-z0-9][A-Za-z0-9-]{0,63})$/.exec(t);
      return m ? m[1] : null;
    }
    case 'email':
      return /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(t) && t.length <= 254 ? t : null;
    case 'number':
      return /^-?\d+(\.\d+)?$/.test(t) ? t : null;
    default: {
      const never: never = step.format;
      return never;
    }
  }
}

const INVALID: Record<AskStep['format'], string> = {
  text: 'Please type your answer.',
  order_number: 'That does not look like an order number (letters, digits and dashes).',
  email: 'That does not look like an email address.',
  number: 'Please answer with a number.',
  photos: 'Please add your photos.',
};

function labelOf(step: AskStep): string {
  if (step.label) return step.label;
  const words = step.variable
    .replace(/_/g, ' ')
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// ---------- the machine ----------

function indexOf(def: Definition, id: string): number {
  return def.steps.findIndex((s) => s.id === id);
}

function fallthrough(def: Definition, i: number): string {
  return def.steps[i].next ?? (i + 1 < def.steps.length ? def.steps[i + 1].id : END);
}

function end(state: RunState, outcome: RunOutcome): RunState {
  return { ...state, status: 'ended', pc: END, outcome };
}

/** A waiting run whose workflow was switched off or archived: ended where it stood (the patient's message is then handled as a new one). */
export function switchedOff(state: RunState): RunState {
  return end(state, 'switched_off');
}

const trace = (state: RunState, step: Step, outcome: StepOutcome): RunState => ({
  ...state,
  steps: [...state.steps, { stepId: step.id, type: step.type, outcome }],
});

/** Runs steps until the machine needs the patient, a call, or ends. */
export function advance(def: Definition, input: RunState, ctx: RunContext): Advance {
  let state: RunState = { ...input, status: 'running' };
  const replies: Reply[] = [];
  for (let n = 0; ; n++) {
    if (state.pc === END) {
      if (state.status !== 'ended') state = end(state, 'completed');
      return { state, replies, next: { kind: 'ended' } };
    }
    if (n >= MAX_STEPS_PER_TURN) {
      state = end({ ...state, stepError: true }, 'error');
      return { state, replies, next: { kind: 'ended' } };
    }
    const i = indexOf(def, state.pc);
    if (i < 0) {
      state = end({ ...state, stepError: true }, 'error');
      return { state, replies, next: { kind: 'ended' } };
    }
    const step = def.steps[i];
    state = { ...state, executed: state.executed + 1 };
    switch (step.type) {
      case 'ask':
        replies.push({ type: 'text', text: render(step.prompt, state.vars, ctx) });
        if (step.format === 'photos') replies.push({ type: 'upload', variable: step.variable });
        state = { ...trace(state, step, 'asked'), status: 'waiting' };
        return { state, replies, next: { kind: 'await' } };
      case 'confirm':
        replies.push({ type: 'text', text: render(step.prompt, state.vars, ctx) });
        state = { ...trace(state, step, 'confirm_asked'), status: 'waiting' };
        return { state, replies, next: { kind: 'await' } };
      case 'reply':
        replies.push({ type: 'text', text: render(step.message, state.vars, ctx) });
        state = { ...trace(state, step, 'replied'), pc: fallthrough(def, i) };
        break;
      case 'condition': {
        const v = varValue(state.vars, step.variable).trim();
        const target = (step.value ?? '').trim();
        let ok: boolean;
        switch (step.operator) {
          case 'equals':
            ok = v.toLowerCase() === target.toLowerCase();
            break;
          case 'not_equals':
            ok = v.toLowerCase() !== target.toLowerCase();
            break;
          case 'contains':
            ok = v.toLowerCase().includes(target.toLowerCase());
            break;
          case 'is_empty':
            ok = v === '';
            break;
          case 'is_not_empty':
            ok = v !== '';
            break;
          default: {
            const never: never = step.operator;
            ok = never;
          }
        }
        state = { ...trace(state, step, ok ? 'then' : 'else'), pc: ok ? step.then : step.else };
        break;
      }
      case 'hand_off': {
        replies.push({ type: 'text', text: render(step.message, state.vars, ctx) });
        const handOff: HandOff = {
          category: step.category ?? def.category,
          message: render(step.message, state.vars, ctx),
          summary: step.summary ? render(step.summary, state.vars, ctx) : null,
          teamAsk: step.teamAsk ? render(step.teamAsk, state.vars, ctx) : null,
          answers: state.asked.map((a) => `${a.label}: ${varValue(state.vars, a.variable)}`),
        };
        state = end({ ...trace(state, step, 'handed_off'), handOff }, 'handed_off');
        return { state, replies, next: { kind: 'ended' } };
      }
      case 'call_api': {
        // The definition rules, again at run time.
        const typed = typedVariablesUsed(def, step).length > 0;
        // An order lookup never contains what the patient typed, ownership or not (spec order_lookup.requested).
        const violates =
          (changesAccount(step) && !(state.confirmed && state.ownershipChecked)) || (typed && (!step.ownership || step.contract === 'orders_v1'));
        if (violates) {
          replies.push({ type: 'text', text: render(step.errorReply, state.vars, ctx) });
          state = end({ ...trace(state, step, 'rule_violation'), stepError: true }, 'error');
          return { state, replies, next: { kind: 'ended' } };
        }
        // A call that identifies the patient (the orders contract, an ownership check, or a
        // template naming {{patient.externalId}} or {{patient.email}}) is never sent for an
        // anonymous visitor, nor with an identifier left blank.
        const named = patientFieldsUsed(step);
        const needsId = step.contract === 'orders_v1' || !!step.ownership?.patientIdPath || named.externalId;
        const needsEmail = !!step.ownership?.emailPath || named.email;
        if ((needsId || needsEmail) && !ctx.patient.externalId) {
          replies.push({ type: 'text', text: SIGN_IN_REPLY });
          state = end(trace(state, step, 'sign_in_required'), 'sign_in_required');
          return { state, replies, next: { kind: 'ended' } };
        }
        if (needsEmail && !ctx.patient.email) {
          // Signed in, but the identity token carried no email (it is optional): signing in again
          // would not help, so the step cannot be done; the patient gets its errorReply.
          replies.push({ type: 'text', text: render(step.errorReply, state.vars, ctx) });
          state = end({ ...trace(state, step, 'patient_email_missing'), stepError: true }, 'error');
          return { state, replies, next: { kind: 'ended' } };
        }
        state = { ...state, status: 'calling' };
        return { state, replies, next: { kind: 'call', request: buildRequest(step, state.vars, ctx) } };
      }
      default: {
        const never: never = step;
        return never;
      }
    }
  }
}

/** The patient's answer to the ask or confirm the machine waits on. */
export function giveInput(def: Definition, input: RunState, ctx: RunContext, text: string, attachments = 0): Advance {
  const i = indexOf(def, input.pc);
  const step = def.steps[i];
  if (input.status !== 'waiting' || !step) return { state: input, replies: [], next: { kind: input.status === 'ended' ? 'ended' : 'await' } };
  if (step.type === 'ask') {
    const value = parseAnswer(step, text, attachments);
    if (value === null) {
      const state = trace(input, step, 'invalid_answer');
      const replies: Reply[] = [{ type: 'text', text: `${INVALID[step.format]} ${render(step.prompt, input.vars, ctx)}` }];
      return { state, replies, next: { kind: 'await' } };
    }
    const asked = [...input.asked.filter((a) => a.variable !== step.variable), { variable: step.variable, label: labelOf(step) }];
    const state: RunState = { ...trace(input, step, 'answered'), vars: { ...input.vars, [step.variable]: value }, asked, pc: fallthrough(def, i) };
    return advance(def, state, ctx);
  }
  if (step.type === 'confirm') {
    // "Yes." and "Sí." are yes: the full stop normalize keeps (for order numbers and emails) is
    // only punctuation here.
    const t = normalize(text)
      .replace(/^[._#-]+|[._#-]+$/g, '')
      .trim();
    if (YES.includes(t)) return advance(def, { ...trace(input, step, 'confirmed'), confirmed: true, pc: fallthrough(def, i) }, ctx);
    if (NO.includes(t)) {
      const state = end(trace(input, step, 'declined'), 'declined');
      return { state, replies: [{ type: 'text', text: render(step.declineReply, input.vars, ctx) }], next: { kind: 'ended' } };
    }
    return { state: input, replies: [{ type: 'text', text: `Please answer yes or no. ${render(step.prompt, input.vars, ctx)}` }], next: { kind: 'await' } };
  }
  return { state: input, replies: [], next: { kind: 'await' } };
}

/** The result of the call the machine asked for. */
export function giveCallResult(def: Definition, input: RunState, ctx: RunContext, result: CallResult): Advance {
  const i = indexOf(def, input.pc);
  const step = def.steps[i];
  if (input.status !== 'calling' || !step || step.type !== 'call_api') return { state: input, replies: [], next: { kind: 'ended' } };
  const fail = (outcome: StepOutcome): Advance => {
    const state = end({ ...trace(input, step, outcome), stepError: true }, 'call_failed');
    return { state, replies: [{ type: 'text', text: render(step.errorReply, input.vars, ctx) }], next: { kind: 'ended' } };
  };
  const notFound = (): Advance => {
    const state = end(trace(input, step, 'not_found'), 'not_found');
    return { state, replies: [{ type: 'text', text: render(step.notFoundReply, input.vars, ctx) }], next: { kind: 'ended' } };
  };
  if (result.kind === 'failed') return fail('call_failed');
  const replies: Reply[] = [];
  const vars = { ...input.vars };
  /** A record that is not the patient's reads as not found. */
  const notThePatients = (record: unknown): boolean => {
    if (!step.ownership) return false;
    const { emailPath, patientIdPath } = step.ownership;
    if (emailPath && asText(getPath(record, emailPath)).trim().toLowerCase() !== (ctx.patient.email ?? '').trim().toLowerCase()) return true;
    return !!patientIdPath && asText(getPath(record, patientIdPath)) !== (ctx.patient.externalId ?? '');
  };
  if (step.contract === 'orders_v1') {
    if (result.status !== 200) return fail('call_failed');
    const orders = parseOrdersResponse(result.body);
    if (!orders) return fail('contract_broken');
    if (orders.length === 0 || notThePatients(result.body)) return notFound();
    const shown = ordersToShow(orders);
    replies.push({ type: 'orders', orders: shown });
    vars.orderCount = String(orders.length);
    vars.latestOrderStatus = shown[0].status;
    for (const s of step.save) vars[s.variable] = asText(getPath(result.body, s.path));
  } else {
    if (result.status === 404) return notFound();
    if (result.status < 200 || result.status > 299) return fail('call_failed');
    let record: unknown = result.body;
    if (step.select) {
      const list = getPath(result.body, step.select.listPath);
      if (!Array.isArray(list)) return notFound();
      const want = render(step.select.equals, input.vars, ctx).trim();
      record = list.find((item) => asText(getPath(item, step.select!.matchPath)).trim() === want);
      if (record === undefined) return notFound();
    }
    if (notThePatients(record)) return notFound();
    for (const s of step.save) vars[s.variable] = asText(getPath(record, s.path));
  }
  const state: RunState = {
    ...trace(input, step, 'call_ok'),
    vars,
    ownershipChecked: input.ownershipChecked || checksOwnership(step),
    pc: fallthrough(def, i),
    status: 'running',
  };
  const r = advance(def, state, ctx);
  return { ...r, replies: [...replies, ...r.replies] };
}
