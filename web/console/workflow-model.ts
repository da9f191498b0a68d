/**
 * Conversation workflows as the console holds them: the records of docs/decisions.md, "Definitions, versions and runs", and what two saves
 * of one draft changed (a three-way comparison: the revision the builder loaded, the builder's
 * edits, the revision saved meanwhile) with the merge of both.
 */
import { canonicalJson } from '@svc/decider';

export interface VersionRecord {
  id: string;
  workflowId: string;
  number: number;
  state: 'draft' | 'live' | 'retired' | 'discarded';
  revision: number;
  definition: Draft;
  lastTest: { passed: boolean; at: string; revision: number } | null;
  createdAt: string;
  activatedAt: string | null;
}

export interface Workflow {
  id: string;
  stableKey: string;
  name: string;
  category: string;
  active: boolean;
  archivedAt: string | null;
  everLive: boolean;
  liveVersionId: string | null;
  draftVersionId: string | null;
  createdAt: string;
  updatedAt: string;
  versions: VersionRecord[];
}

/** A definition being edited: any JSON object (the raw JSON view may hold anything); the validator says what is wrong. */
export type Draft = Record<string, unknown>;

export const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const stepsOf = (d: Draft): unknown[] => (Array.isArray(d.steps) ? d.steps : []);
/** Equal as JSON (key order aside); an absent value equals only an absent one. */
export const same = (a: unknown, b: unknown) => (a === undefined || b === undefined ? a === b : canonicalJson(a) === canonicalJson(b));

const FIELDS: { key: string; label: string }[] = [
  { key: 'schema', label: 'Schema' },
  { key: 'category', label: 'Category' },
  { key: 'description', label: 'Description' },
  { key: 'triggerPhrases', label: 'Trigger phrases' },
  { key: 'excludePhrases', label: 'Exclude phrases' },
];

/** Steps by id (steps without a usable id are left to the side: the validator names them). */
function byId(d: Draft): Map<string, Record<string, unknown>> {
  const m = new Map<string, Record<string, unknown>>();
  for (const s of stepsOf(d)) if (isObj(s) && typeof s.id === 'string' && !m.has(s.id)) m.set(s.id, s);
  return m;
}
const order = (d: Draft) => [...byId(d).keys()];
/** The order of the ids both hold. */
const commonOrder = (a: string[], b: string[]) => a.filter((x) => b.includes(x));

export interface Item {
  /** `field:<name>`, `step:<id>` or `order`. */
  key: string;
  label: string;
  base: unknown;
  mine: unknown;
  theirs: unknown;
}
export interface Change {
  key: string;
  label: string;
  kind: 'added' | 'removed' | 'changed';
}
export interface Comparison {
  theirs: Change[];
  mine: Change[];
  /** Changed on both sides, differently: the merge needs a choice. */
  conflicts: Item[];
  items: Item[];
}

function itemsOf(base: Draft, mine: Draft, theirs: Draft): Item[] {
  const items: Item[] = FIELDS.map((f) => ({ key: `field:${f.key}`, label: f.label, base: base[f.key], mine: mine[f.key], theirs: theirs[f.key] }));
  const [b, m, t] = [byId(base), byId(mine), byId(theirs)];
  for (const id of new Set([...b.keys(), ...t.keys(), ...m.keys()]))
    items.push({ key: `step:${id}`, label: `Step ${id}`, base: b.get(id), mine: m.get(id), theirs: t.get(id) });
  const [ob, om, ot] = [order(base), order(mine), order(theirs)];
  // The order of the steps each side kept: a change only where both sides still have the steps.
  const orderChanged = (side: string[]) => !same(commonOrder(ob, side), commonOrder(side, ob));
  items.push({ key: 'order', label: 'Order of the steps', base: ob, mine: orderChanged(om) ? om : ob, theirs: orderChanged(ot) ? ot : ob });
  return items;
}

const kindOf = (base: unknown, side: unknown): Change['kind'] => (base === undefined ? 'added' : side === undefined ? 'removed' : 'changed');

/** What the revision saved meanwhile changed, what the builder changed, and where both changed the same thing differently. */
export function compare(base: Draft, mine: Draft, theirs: Draft): Comparison {
  const items = itemsOf(base, mine, theirs);
  const out: Comparison = { theirs: [], mine: [], conflicts: [], items };
  for (const it of items) {
    const theirsChanged = !same(it.base, it.theirs);
    const mineChanged = !same(it.base, it.mine);
    if (theirsChanged) out.theirs.push({ key: it.key, label: it.label, kind: kindOf(it.base, it.theirs) });
    if (mineChanged) out.mine.push({ key: it.key, label: it.label, kind: kindOf(it.base, it.mine) });
    if (theirsChanged && mineChanged && !same(it.mine, it.theirs)) out.conflicts.push(it);
  }
  return out;
}

/**
 * Both sets of changes on top of the revision saved meanwhile: a field or step changed on one side
 * takes that side's value; one changed on both takes the side `choose` names (default: mine).
 * Steps keep the order of the side that reordered them; a step one side added goes after the step
 * it followed there.
 */
export function merge(base: Draft, mine: Draft, theirs: Draft, choose: Record<string, 'mine' | 'theirs'> = {}): Draft {
  const c = compare(base, mine, theirs);
  const pick = (it: Item): unknown => {
    const mineChanged = !same(it.base, it.mine);
    const theirsChanged = !same(it.base, it.theirs);
    if (mineChanged && theirsChanged && !same(it.mine, it.theirs)) return (choose[it.key] ?? 'mine') === 'mine' ? it.mine : it.theirs;
    return mineChanged ? it.mine : it.theirs;
  };
  const out: Draft = { ...theirs };
  for (const it of c.items) {
    if (!it.key.startsWith('field:')) continue;
    const v = pick(it);
    const name = it.key.slice('field:'.length);
    if (v === undefined) delete out[name];
    else out[name] = v;
  }
  const steps = new Map<string, unknown>();
  for (const it of c.items) if (it.key.startsWith('step:')) steps.set(it.key.slice('step:'.length), pick(it));
  const sequence = (pick(c.items.find((i) => i.key === 'order')!) as string[]).filter((id) => steps.get(id) !== undefined);
  // Steps kept by the merge but missing from the chosen order: after the step they follow on the side that has them.
  for (const side of [order(mine), order(theirs)]) {
    side.forEach((id, i) => {
      if (steps.get(id) === undefined || sequence.includes(id)) return;
      const before = side
        .slice(0, i)
        .reverse()
        .find((x) => sequence.includes(x));
      sequence.splice(before === undefined ? 0 : sequence.indexOf(before) + 1, 0, id);
    });
  }
  const loose = stepsOf(mine).filter((s) => !(isObj(s) && typeof s.id === 'string'));
  out.steps = [...sequence.map((id) => steps.get(id)), ...loose];
  return out;
}

/** "changed", "added", "removed" in a sentence. */
export const describe = (changes: Change[]) => changes.map((ch) => `${ch.label} (${ch.kind})`).join('; ');
