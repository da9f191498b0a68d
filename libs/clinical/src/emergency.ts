import { normalize } from './text';
import { matchesForms, normalizedTextForms } from './semantic';

/**
 * The service's emergency words (docs/decisions.md, "Text analysis and emergency words"): built-in terms by kind, English and Spanish,
 * one list for every place that looks for them (check-in answers, the patient agent, staff chat
 * requests), so the same words raise the same emergency everywhere.
 */
export const EMERGENCY_KINDS = ['chest_pain', 'breathing', 'stroke', 'self_harm', 'severe_bleeding', 'unconscious', 'allergic_reaction', 'overdose'] as const;
export type EmergencyKind = (typeof EMERGENCY_KINDS)[number];

/** Built-in emergency terms by kind, English then Spanish (normalized when loaded). */
const EMERGENCY_TERMS: Record<EmergencyKind, string[]> = {
  chest_pain: [
    'chest pain',
    'pain in my chest',
    'pain in his chest',
    'pain in her chest',
    'pain in the chest',
    'chest pressure',
    'pressure in my chest',
    'chest tightness',
    'tight chest',
    'tightness in my chest',
    'crushing chest',
    'heart attack',
    'dolor de pecho',
    'dolor en el pecho',
    'dolor toracico',
    'presión en el pecho',
    'opresión en el pecho',
    'ataque al corazón',
    'ataque cardiaco',
    'infarto',
  ],
  breathing: [
    "can't breathe",
    'cannot breathe',
    'can not breathe',
    'unable to breathe',
    'difficulty breathing',
    'trouble breathing',
    'struggling to breathe',
    'hard to breathe',
    'short of breath',
    'shortness of breath',
    'not breathing',
    'choking',
    'no puedo respirar',
    'dificultad para respirar',
    'falta de aire',
    'me falta el aire',
    'me ahogo',
    'me estoy ahogando',
    'no respira',
    'ahogándome',
    'no puede respirar',
    'cant breathe',
  ],
  stroke: [
    'stroke',
    'face drooping',
    'face is drooping',
    'drooping face',
    'slurred speech',
    'slurring my words',
    'numb on one side',
    'weak on one side',
    'sudden weakness',
    'sudden numbness',
    'derrame cerebral',
    'accidente cerebrovascular',
    'ictus',
    'cara caída',
    'habla arrastrada',
    'no puedo hablar bien',
    'entumecimiento de un lado',
    'debilidad repentina',
    'one side numb',
    'slurring his words',
    'slurring her words',
    'slurring their words',
  ],
  self_harm: [
    'kill myself',
    'killing myself',
    'suicide',
    'suicidal',
    'end my life',
    'hurt myself',
    'harm myself',
    'self harm',
    'want to die',
    'better off dead',
    'suicidarme',
    'suicidio',
    'suicida',
    'matarme',
    'quitarme la vida',
    'hacerme daño',
    'quiero morir',
    'quiero morirme',
    'lastimarme',
    'self-harm',
    // Told by someone else (a teammate's staff chat request, a relative): third person and infinitive.
    'kill himself',
    'kill herself',
    'kill themselves',
    'killing himself',
    'killing herself',
    'killing themselves',
    'end his life',
    'end her life',
    'end their life',
    'hurt himself',
    'hurt herself',
    'hurt themselves',
    'harm himself',
    'harm herself',
    'harm themselves',
    'wants to die',
    'suicidarse',
    'matarse',
    'quitarse la vida',
    'hacerse daño',
    'quiere morir',
    'quiere morirse',
    'lastimarse',
  ],
  severe_bleeding: [
    'bleeding heavily',
    'heavy bleeding',
    'severe bleeding',
    "won't stop bleeding",
    "bleeding won't stop",
    'bleeding that will not stop',
    'lots of blood',
    'coughing up blood',
    'vomiting blood',
    'bleeding a lot',
    'sangrado abundante',
    'sangrado fuerte',
    'hemorragia',
    'sangra mucho',
    'sangro mucho',
    'no para de sangrar',
    'no deja de sangrar',
    'vomitando sangre',
    'mucha sangre',
    'tosiendo sangre',
    'bleeding will not stop',
    'sangrado grave',
    'bleeding wont stop',
  ],
  unconscious: [
    'unconscious',
    'passed out',
    'fainted',
    'unresponsive',
    "won't wake up",
    'lost consciousness',
    'blacked out',
    'inconsciente',
    'me desmayé',
    'se desmayó',
    'desmayo',
    'perdió el conocimiento',
    'perdí el conocimiento',
    'no responde',
    'no despierta',
    'desmayado',
    'not responding',
    'me desmaye',
  ],
  allergic_reaction: [
    'anaphylaxis',
    'anaphylactic',
    'throat is closing',
    'throat closing',
    'tongue swelling',
    'swollen tongue',
    'lips swelling',
    'swollen lips',
    'severe allergic reaction',
    'face swelling',
    'anafilaxia',
    'reacción alérgica grave',
    'reacción alérgica fuerte',
    'se me cierra la garganta',
    'garganta cerrada',
    'lengua hinchada',
    'labios hinchados',
    'cara hinchada',
    'throat swelling',
    'garganta hinchada',
  ],
  overdose: [
    'overdose',
    'overdosed',
    'took too many pills',
    'too many pills',
    'took too much medication',
    'took too much of my medication',
    'sobredosis',
    'demasiadas pastillas',
    'tomé demasiadas',
    'me tomé todas las pastillas',
    'demasiado medicamento',
  ],
};

/** The terms, normalized, as word sequences indexed by their first word. */
const TERMS_BY_FIRST_WORD = new Map<string, { kind: EmergencyKind; words: string[] }[]>();
for (const kind of EMERGENCY_KINDS) {
  for (const term of new Set(EMERGENCY_TERMS[kind].map(normalize))) {
    const words = term.split(' ');
    const list = TERMS_BY_FIRST_WORD.get(words[0]) ?? [];
    list.push({ kind, words });
    TERMS_BY_FIRST_WORD.set(words[0], list);
  }
}

/**
 * Concept combinations that also count as a kind, in any word order and either language (through
 * the semantic matcher below): "dolor fuerte en el pecho", "my chest really hurts".
 */
const EMERGENCY_CONCEPTS: Partial<Record<EmergencyKind, string[]>> = {
  chest_pain: ['chest pain'],
  breathing: ['difficulty breathing', 'cannot breathe'],
  severe_bleeding: ['severe bleeding'],
  allergic_reaction: ['throat swelling', 'tongue swelling'],
};

/**
 * Which built-in emergency kinds the text mentions: a term as whole words, or a concept
 * combination. One pass over the text's words (each compared with the few terms that start with
 * it), then, only if a kind is still missing, one pass for the word forms.
 */
export function emergencyKinds(text: string): EmergencyKind[] {
  const normalized = normalize(text);
  const words = normalized.split(' ');
  const found = new Set<EmergencyKind>();
  for (let i = 0; i < words.length; i++) {
    for (const term of TERMS_BY_FIRST_WORD.get(words[i]) ?? []) {
      if (!found.has(term.kind) && term.words.every((w, j) => words[i + j] === w)) found.add(term.kind);
    }
  }
  let forms: Set<string> | null = null; // the text's word forms, computed once and only if needed
  return EMERGENCY_KINDS.filter((k) => found.has(k) || (EMERGENCY_CONCEPTS[k] ?? []).some((p) => matchesForms((forms ??= normalizedTextForms(normalized)), p)));
}
