/**
 * Workflow definitions (spec "Workflow (staff-facing)"): types and the pure validator.
 * Every limit and pattern of the spec, references between steps, cycles without an ask, the two
 * ordering rules and `contract` with `select`. Details name each offending step and rule with a
 * path like `definition.steps[2].next`.
 */
import { canonicalJson } from '@svc/decider';
import { charsBetween } from './orders';

export type Category = 'support' | 'billing' | 'scheduling' | 'fulfillment';
export type HandOffCategory = Category | 'clinical';
export type AskFormat = 'text' | 'order_number' | 'email' | 'number' | 'photos';
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type Operator = 'equals' | 'not_equals' | 'contains' | 'is_empty' | 'is_not_empty';

interface StepBase {
  id: string;
  next?: string;
}
export interface AskStep extends StepBase {
  type: 'ask';
  variable: string;
  prompt: string;
  format: AskFormat;
  label?: string;
}
export interface CallApiStep extends StepBase {
  type: 'call_api';
  destinationStableKey: string;
  method: Method;
  path: string;
  body?: Record<string, unknown>;
  readOnly?: boolean;
  select?: { listPath: string; matchPath: string; equals: string };
  save: { variable: string; path: string }[];
  ownership?: { emailPath?: string; patientIdPath?: string };
  contract?: 'orders_v1';
  notFoundReply: string;
  errorReply: string;
}
export interface ConditionStep extends StepBase {
  type: 'condition';
  variable: string;
  operator: Operator;
  value?: string;
  then: string;
  else: string;
}
export interface ConfirmStep extends StepBase {
  type: 'confirm';
  prompt: string;
  declineReply: string;
}
export interface ReplyStep extends StepBase {
  type: 'reply';
  message: string;
}
export interface HandOffStep extends StepBase {
  type: 'hand_off';
  message: string;
  summary?: string;
  teamAsk?: string;
  category?: HandOffCategory;
}
export type Step = AskStep | CallApiStep | ConditionStep | ConfirmStep | ReplyStep | HandOffStep;

export interface Definition {
  schema?: 2;
  category: Category;
  description: string;
  triggerPhrases?: string[];
  excludePhrases?: string[];
  steps: Step[];
}

export interface Detail {
  path: string;
  message: string;
}

export const STABLE_KEY = /^[a-z][a-z0-9_]{1,79}$/;
const STEP_ID = /^[a-z][a-z0-9_]{0,39}$/;
const VARIABLE = /^[a-zA-Z][a-zA-Z0-9_]{0,39}$/;
const DOT_PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;
const CATEGORIES = ['support', 'billing', 'scheduling', 'fulfillment'];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const FORMATS = ['text', 'order_number', 'email', 'number', 'photos'];
const OPERATORS = ['equals', 'not_equals', 'contains', 'is_empty', 'is_not_empty'];
export const END = 'end';

/** The body a `contract: orders_v1` step may carry (it must be the order_lookup.requested payload). */
export const ORDERS_V1_BODY = { version: 1, type: 'order_lookup.requested', requestId: '{{run.id}}', patient: { externalId: '{{patient.externalId}}' } };

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === 'string';

/** `{{name}}` references of a text. */
export function templateVars(text: string): string[] {
  return [...text.matchAll(/\{\{\s*([a-zA-Z][a-zA-Z0-9_.]*)\s*\}\}/g)].map((m) => m[1]);
}

/** Every string in a JSON value. */
function strings(v: unknown, out: string[] = []): string[] {
  if (isStr(v)) out.push(v);
  else if (Array.isArray(v)) v.forEach((x) => strings(x, out));
  else if (isObj(v)) Object.values(v).forEach((x) => strings(x, out));
  return out;
}

/** Where a step can go: `end` or step ids. */
export function successors(def: Definition, index: number): string[] {
  const s = def.steps[index];
  const fallthrough = s.next ?? (index + 1 < def.steps.length ? def.steps[index + 1].id : END);
  switch (s.type) {
    case 'condition':
      return [s.then, s.else];
    case 'hand_off':
      return [END];
    case 'confirm':
    case 'call_api':
      return [fallthrough, END]; // decline / not found / error end the run
    default:
      return [fallthrough];
  }
}

/** True when the call changes an account (a non-GET call not marked readOnly). */
export const changesAccount = (s: CallApiStep) => s.method !== 'GET' && !s.readOnly;
/** True when the call checks that its record is the patient's (ownership, or the orders contract scoped by the signed patient id). */
export const checksOwnership = (s: CallApiStep) => !!s.ownership || s.contract === 'orders_v1';

/** Ask variables a call uses in its path, body or select.equals (what the patient typed). */
export function typedVariablesUsed(def: Definition, s: CallApiStep): string[] {
  const asked = new Set(def.steps.filter((x): x is AskStep => x.type === 'ask').map((x) => x.variable));
  const texts = [s.path, ...strings(s.body ?? {}), ...(s.select ? [s.select.equals] : [])];
  return [...new Set(texts.flatMap(templateVars).filter((v) => asked.has(v)))];
}

/** Which of the signed-in patient's identifiers a call names in its path, body or select.equals. */
export function patientFieldsUsed(s: CallApiStep): { externalId: boolean; email: boolean } {
  const used = new Set([s.path, ...strings(s.body ?? {}), ...(s.select ? [s.select.equals] : [])].flatMap(templateVars));
  return { externalId: used.has('patient.externalId'), email: used.has('patient.email') };
}

type Check = (cond: boolean, path: string, message: string) => void;

function text(check: Check, v: unknown, path: string, min: number, max: number, required = true): void {
  if (v === undefined && !required) return;
  if (!isStr(v)) return check(false, path, `must be a string of ${min}-${max} characters`);
  check(charsBetween(v, min, max), path, `must be ${min}-${max} characters`);
}

function dotPath(check: Check, v: unknown, path: string, required = true): void {
  if (v === undefined && !required) return;
  if (!isStr(v)) return check(false, path, 'must be a dot path string');
  check(charsBetween(v, 1, 160) && DOT_PATH.test(v), path, 'must be a dot path of up to 160 characters');
}

function onlyKeys(check: Check, o: Record<string, unknown>, allowed: string[], path: string): void {
  for (const k of Object.keys(o)) check(allowed.includes(k), `${path}.${k}`, 'unknown field');
}

/** Validates a definition; [] when valid. Paths start with `prefix` (default `definition`). */
export function validateDefinition(def: unknown, prefix = 'definition'): Detail[] {
  const details: Detail[] = [];
  const check: Check = (cond, path, message) => {
    if (!cond) details.push({ path, message });
  };
  if (!isObj(def)) return [{ path: prefix, message: 'must be an object' }];
  onlyKeys(check, def, ['schema', 'category', 'description', 'triggerPhrases', 'excludePhrases', 'steps'], prefix);
  if (def.schema !== undefined) check(def.schema === 2, `${prefix}.schema`, 'must be 2');
  check(CATEGORIES.includes(def.category as string), `${prefix}.category`, `must be one of ${CATEGORIES.join(', ')}`);
  text(check, def.description, `${prefix}.description`, 1, 300);
  for (const f of ['triggerPhrases', 'excludePhrases'] as const) {
    const v = def[f];
    if (v === undefined) continue;
    if (!Array.isArray(v)) {
      check(false, `${prefix}.${f}`, 'must be an array of strings');
      continue;
    }
    check(v.length <= 20, `${prefix}.${f}`, 'must have at most 20 items');
    // The spec sets no length for a phrase; an empty one would match every message.
    v.forEach((p, i) => check(isStr(p) && p.trim().length >= 1, `${prefix}.${f}[${i}]`, 'must be a non-empty string'));
  }
  if (!Array.isArray(def.steps)) {
    check(false, `${prefix}.steps`, 'must be an array of 1 to 30 steps');
    return details;
  }
  const steps = def.steps as unknown[];
  check(steps.length >= 1 && steps.length <= 30, `${prefix}.steps`, 'must have 1 to 30 steps');
  const ids = new Map<string, number>();
  steps.forEach((raw, i) => {
    const p = `${prefix}.steps[${i}]`;
    if (!isObj(raw)) return check(false, p, 'must be a step object');
    if (!isStr(raw.id) || !STEP_ID.test(raw.id)) check(false, `${p}.id`, 'must match ^[a-z][a-z0-9_]{0,39}$');
    else if (raw.id === END) check(false, `${p}.id`, '`end` is reserved');
    else if (ids.has(raw.id)) check(false, `${p}.id`, `duplicate step id (also steps[${ids.get(raw.id)}])`);
    else ids.set(raw.id, i);
  });
  const ref = (v: unknown, path: string, required: boolean) => {
    if (v === undefined && !required) return;
    if (!isStr(v) || v.length < 1 || v.length > 40) return check(false, path, 'must be a step id or `end` of up to 40 characters');
    check(v === END || ids.has(v), path, `unknown step \`${v}\`: must name an existing step or \`end\``);
  };
  steps.forEach((raw, i) => {
    const p = `${prefix}.steps[${i}]`;
    if (!isObj(raw)) return;
    ref(raw.next, `${p}.next`, false);
    const common = ['id', 'type', 'next'];
    switch (raw.type) {
      case 'ask':
        onlyKeys(check, raw, [...common, 'variable', 'prompt', 'format', 'label'], p);
        check(isStr(raw.variable) && VARIABLE.test(raw.variable), `${p}.variable`, 'must match ^[a-zA-Z][a-zA-Z0-9_]{0,39}$');
        text(check, raw.prompt, `${p}.prompt`, 1, 500);
        check(FORMATS.includes(raw.format as string), `${p}.format`, `must be one of ${FORMATS.join(', ')}`);
        text(check, raw.label, `${p}.label`, 1, 40, false);
        break;
      case 'call_api': {
        onlyKeys(
          check,
          raw,
          [...common, 'destinationStableKey', 'method', 'path', 'body', 'readOnly', 'select', 'save', 'ownership', 'contract', 'notFoundReply', 'errorReply'],
          p,
        );
        check(isStr(raw.destinationStableKey) && STABLE_KEY.test(raw.destinationStableKey), `${p}.destinationStableKey`, 'must match ^[a-z][a-z0-9_]{1,79}$');
        check(METHODS.includes(raw.method as string), `${p}.method`, `must be one of ${METHODS.join(', ')}`);
        check(isStr(raw.path) && charsBetween(raw.path, 0, 500), `${p}.path`, 'must be a string of up to 500 characters');
        if (raw.body !== undefined) {
          if (!isObj(raw.body)) check(false, `${p}.body`, 'must be a JSON object');
          else {
            check(charsBetween(JSON.stringify(raw.body), 0, 8000), `${p}.body`, 'must be up to 8,000 characters of JSON');
            check(raw.method !== 'GET', `${p}.body`, 'a GET call has no body');
          }
        }
        if (raw.readOnly !== undefined) check(typeof raw.readOnly === 'boolean', `${p}.readOnly`, 'must be a boolean');
        if (raw.select !== undefined) {
          if (!isObj(raw.select)) check(false, `${p}.select`, 'must be an object');
          else {
            onlyKeys(check, raw.select, ['listPath', 'matchPath', 'equals'], `${p}.select`);
            dotPath(check, raw.select.listPath, `${p}.select.listPath`);
            dotPath(check, raw.select.matchPath, `${p}.select.matchPath`);
            text(check, raw.select.equals, `${p}.select.equals`, 1, 200);
          }
        }
        if (!Array.isArray(raw.save)) check(false, `${p}.save`, 'must be an array of up to 20 items');
        else {
          check(raw.save.length <= 20, `${p}.save`, 'must have at most 20 items');
          raw.save.forEach((sv, j) => {
            const sp = `${p}.save[${j}]`;
            if (!isObj(sv)) return check(false, sp, 'must be an object');
            onlyKeys(check, sv, ['variable', 'path'], sp);
            check(isStr(sv.variable) && VARIABLE.test(sv.variable), `${sp}.variable`, 'must match ^[a-zA-Z][a-zA-Z0-9_]{0,39}$');
            dotPath(check, sv.path, `${sp}.path`);
          });
        }
        if (raw.ownership !== undefined) {
          if (!isObj(raw.ownership)) check(false, `${p}.ownership`, 'must be an object');
          else {
            onlyKeys(check, raw.ownership, ['emailPath', 'patientIdPath'], `${p}.ownership`);
            check(raw.ownership.emailPath !== undefined || raw.ownership.patientIdPath !== undefined, `${p}.ownership`, 'must name emailPath or patientIdPath');
            dotPath(check, raw.ownership.emailPath, `${p}.ownership.emailPath`, false);
            dotPath(check, raw.ownership.patientIdPath, `${p}.ownership.patientIdPath`, false);
          }
        }
        if (raw.contract !== undefined) {
          check(raw.contract === 'orders_v1', `${p}.contract`, 'must be orders_v1');
          check(raw.select === undefined, `${p}.contract`, 'contract cannot be combined with select');
          // The order_lookup.requested payload is a JSON body, and a GET carries none (spec: body is for non-GET calls).
          check(raw.method !== 'GET', `${p}.method`, 'an orders_v1 call sends the order_lookup.requested body: it cannot be a GET');
          if (raw.body !== undefined)
            check(
              canonicalJson(raw.body) === canonicalJson(ORDERS_V1_BODY),
              `${p}.body`,
              'with contract orders_v1 the body must be the order_lookup.requested payload (or left out)',
            );
        }
        text(check, raw.notFoundReply, `${p}.notFoundReply`, 1, 500);
        text(check, raw.errorReply, `${p}.errorReply`, 1, 500);
        break;
      }
      case 'condition':
        onlyKeys(check, raw, [...common, 'variable', 'operator', 'value', 'then', 'else'], p);
        check(isStr(raw.variable) && VARIABLE.test(raw.variable), `${p}.variable`, 'must match ^[a-zA-Z][a-zA-Z0-9_]{0,39}$');
        check(OPERATORS.includes(raw.operator as string), `${p}.operator`, `must be one of ${OPERATORS.join(', ')}`);
        if (raw.value !== undefined) check(isStr(raw.value) && charsBetween(raw.value, 0, 200), `${p}.value`, 'must be a string of up to 200 characters');
        ref(raw.then, `${p}.then`, true);
        ref(raw.else, `${p}.else`, true);
        break;
      case 'confirm':
        onlyKeys(check, raw, [...common, 'prompt', 'declineReply'], p);
        text(check, raw.prompt, `${p}.prompt`, 1, 500);
        text(check, raw.declineReply, `${p}.declineReply`, 1, 500);
        break;
      case 'reply':
        onlyKeys(check, raw, [...common, 'message'], p);
        text(check, raw.message, `${p}.message`, 1, 1000);
        break;
      case 'hand_off':
        onlyKeys(check, raw, [...common, 'message', 'summary', 'teamAsk', 'category'], p);
        text(check, raw.message, `${p}.message`, 1, 500);
        text(check, raw.summary, `${p}.summary`, 1, 500, false);
        text(check, raw.teamAsk, `${p}.teamAsk`, 1, 300, false);
        if (raw.category !== undefined)
          check(
            [...CATEGORIES, 'clinical'].includes(raw.category as string),
            `${p}.category`,
            'must be one of support, billing, scheduling, fulfillment, clinical',
          );
        break;
      default:
        check(false, `${p}.type`, 'must be one of ask, call_api, condition, confirm, reply, hand_off');
    }
  });
  if (details.length) return details;
  // Graph rules need a structurally valid definition.
  details.push(...graphRules(def as unknown as Definition, prefix));
  return details;
}

/** No cycle without an ask; the two ordering rules (must hold on every path from the first step). */
function graphRules(def: Definition, prefix: string): Detail[] {
  const details: Detail[] = [];
  const index = new Map(def.steps.map((s, i) => [s.id, i]));
  const succ = def.steps.map((_, i) =>
    successors(def, i)
      .filter((t) => t !== END)
      .map((t) => index.get(t)!),
  );
  // Cycles among non-ask steps (an ask waits for the patient, so it breaks a loop).
  const color = new Array(def.steps.length).fill(0);
  const reported = new Set<number>();
  const visit = (i: number) => {
    color[i] = 1;
    for (const j of succ[i]) {
      if (def.steps[j].type === 'ask') continue;
      if (color[j] === 1 && !reported.has(j)) {
        reported.add(j);
        details.push({ path: `${prefix}.steps[${j}]`, message: `step \`${def.steps[j].id}\` is in a cycle without an ask step` });
      } else if (color[j] === 0) visit(j);
    }
    color[i] = 2;
  };
  def.steps.forEach((s, i) => {
    if (s.type !== 'ask' && color[i] === 0) visit(i);
  });
  // Must-facts along every path: ownership checked, confirmed (AND over predecessors, fixed point).
  const own: (boolean | null)[] = def.steps.map(() => null);
  const conf: (boolean | null)[] = def.steps.map(() => null);
  own[0] = false;
  conf[0] = false;
  for (let changed = true, guard = 0; changed && guard < 1000; guard++) {
    changed = false;
    def.steps.forEach((s, i) => {
      if (own[i] === null) return;
      const outOwn = own[i]! || (s.type === 'call_api' && checksOwnership(s));
      const outConf = conf[i]! || s.type === 'confirm';
      for (const j of succ[i]) {
        const no = own[j] === null ? outOwn : own[j]! && outOwn;
        const nc = conf[j] === null ? outConf : conf[j]! && outConf;
        if (j === 0) continue; // the first step is entered with nothing done
        if (no !== own[j] || nc !== conf[j]) {
          own[j] = no;
          conf[j] = nc;
          changed = true;
        }
      }
    });
  }
  def.steps.forEach((s, i) => {
    if (s.type !== 'call_api') return;
    const p = `${prefix}.steps[${i}]`;
    if (changesAccount(s)) {
      if (!own[i])
        details.push({ path: p, message: `step \`${s.id}\` changes an account (non-GET, not readOnly) and must come after a call that checks ownership` });
      if (!conf[i]) details.push({ path: p, message: `step \`${s.id}\` changes an account (non-GET, not readOnly) and must come after a confirm step` });
    }
    const typed = typedVariablesUsed(def, s);
    if (typed.length && s.contract === 'orders_v1')
      details.push({
        path: `${p}.path`,
        message: `step \`${s.id}\` is an order lookup and uses what the patient typed (${typed.join(', ')}); an order lookup never contains what the patient typed`,
      });
    else if (typed.length && !s.ownership)
      details.push({ path: `${p}.ownership`, message: `step \`${s.id}\` uses what the patient typed (${typed.join(', ')}) and must check ownership` });
  });
  return details;
}
