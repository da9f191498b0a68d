import { EMERGENCY_KINDS, containsPhrase, emergencyKinds, matchesForms, normalize, textForms } from '@svc/clinical';

/**
 * The red-flag evaluator (docs/decisions.md, "Patient pathway"): pure, no I/O. Given a protocol's red flags, the answers
 * by question key and the free texts (text answers and completion notes), it returns every rule
 * that matched, with its exact matched-rule string and tier.
 */
export type Tier = 'emergency' | 'urgent' | 'routine';
export const TIERS: Tier[] = ['emergency', 'urgent', 'routine'];
export type AnswerValue = number | boolean | string;

export interface ScoreRule {
  question: string;
  tier: Tier;
  op: '>=' | '<=';
  value: number;
}
export interface PhraseRule {
  phrase: string;
  tier: Tier;
}
export interface RedFlags {
  scores?: ScoreRule[];
  phrases?: PhraseRule[];
  semanticPhrases?: PhraseRule[];
  /** Built-in emergency terms (English and Spanish). Omitted means on (see docs/decisions.md). */
  emergencyTerms?: boolean;
}

export interface RuleMatch {
  rule: string;
  tier: Tier;
}

// ---- evaluation -------------------------------------------------------------------------

/** Every rule that matches the answers and the texts, in rule order, each once. */
export function evaluateRedFlags(redFlags: RedFlags, answers: Record<string, AnswerValue>, texts: string[]): RuleMatch[] {
  const out: RuleMatch[] = [];
  const seen = new Set<string>();
  const add = (rule: string, tier: Tier) => {
    if (seen.has(rule)) {
      // Same rule string from two entries: keep the higher tier.
      const existing = out.find((m) => m.rule === rule)!;
      if (TIERS.indexOf(tier) < TIERS.indexOf(existing.tier)) existing.tier = tier;
      return;
    }
    seen.add(rule);
    out.push({ rule, tier });
  };
  for (const s of redFlags.scores ?? []) {
    const v = answers[s.question];
    if (typeof v !== 'number') continue;
    if (s.op === '>=' ? v >= s.value : v <= s.value) add(`score:${s.tier}:${s.question}${s.op}${s.value}`, s.tier);
  }
  const joined = texts.filter((t) => t.length > 0);
  const normalized = joined.map(normalize);
  for (const p of redFlags.phrases ?? []) {
    if (normalized.some((n) => containsPhrase(n, p.phrase))) add(`phrase:${p.phrase}`, p.tier);
  }
  const forms = redFlags.semanticPhrases?.length ? joined.map(textForms) : [];
  for (const p of redFlags.semanticPhrases ?? []) {
    if (forms.some((f) => matchesForms(f, p.phrase))) add(`semantic_phrase:${p.phrase}`, p.tier);
  }
  if (redFlags.emergencyTerms !== false) {
    const kinds = new Set(joined.flatMap(emergencyKinds));
    for (const k of EMERGENCY_KINDS) if (kinds.has(k)) add(`emergency_terms:${k}`, 'emergency');
  }
  return out;
}

/** Highest tier among the matches; routine only when every match is routine; null when none. */
export function priorityOf(matches: RuleMatch[]): Tier | null {
  if (matches.length === 0) return null;
  for (const t of TIERS) if (matches.some((m) => m.tier === t)) return t;
  return null;
}
