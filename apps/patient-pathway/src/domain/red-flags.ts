import { porterStem, spanishStem } from './stemmers';

/**
 * The red-flag evaluator (decisions 6): pure, no I/O. Given a protocol's red flags, the answers
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

export const EMERGENCY_KINDS = ['chest_pain', 'breathing', 'stroke', 'self_harm', 'severe_bleeding', 'unconscious', 'allergic_reaction', 'overdose'] as const;
export type EmergencyKind = (typeof EMERGENCY_KINDS)[number];

/** Built-in emergency terms by kind, English then Spanish (normalized when loaded). */
const EMERGENCY_TERMS: Record<EmergencyKind, string[]> = {
  chest_pain: [
    'chest pain', 'pain in my chest', 'pain in the chest', 'chest pressure', 'pressure in my chest', 'chest tightness', 'tight chest', 'tightness in my chest', 'crushing chest', 'heart attack',
    'dolor de pecho', 'dolor en el pecho', 'dolor toracico', 'presión en el pecho', 'opresión en el pecho', 'ataque al corazón', 'ataque cardiaco', 'infarto',
  ],
  breathing: [
    "can't breathe", 'cannot breathe', 'can not breathe', 'unable to breathe', 'difficulty breathing', 'trouble breathing', 'struggling to breathe', 'hard to breathe', 'short of breath', 'shortness of breath', 'not breathing', 'choking',
    'no puedo respirar', 'dificultad para respirar', 'falta de aire', 'me falta el aire', 'me ahogo', 'me estoy ahogando', 'no respira', 'ahogándome',
  ],
  stroke: [
    'stroke', 'face drooping', 'face is drooping', 'drooping face', 'slurred speech', 'slurring my words', 'numb on one side', 'weak on one side', 'sudden weakness', 'sudden numbness',
    'derrame cerebral', 'accidente cerebrovascular', 'ictus', 'cara caída', 'habla arrastrada', 'no puedo hablar bien', 'entumecimiento de un lado', 'debilidad repentina',
  ],
  self_harm: [
    'kill myself', 'killing myself', 'suicide', 'suicidal', 'end my life', 'hurt myself', 'harm myself', 'self harm', 'want to die', 'better off dead',
    'suicidarme', 'suicidio', 'suicida', 'matarme', 'quitarme la vida', 'hacerme daño', 'quiero morir', 'quiero morirme', 'lastimarme',
  ],
  severe_bleeding: [
    'bleeding heavily', 'heavy bleeding', 'severe bleeding', "won't stop bleeding", "bleeding won't stop", 'bleeding that will not stop', 'lots of blood', 'coughing up blood', 'vomiting blood', 'bleeding a lot',
    'sangrado abundante', 'sangrado fuerte', 'hemorragia', 'sangra mucho', 'sangro mucho', 'no para de sangrar', 'no deja de sangrar', 'vomitando sangre', 'mucha sangre', 'tosiendo sangre',
  ],
  unconscious: [
    'unconscious', 'passed out', 'fainted', 'unresponsive', "won't wake up", 'lost consciousness', 'blacked out',
    'inconsciente', 'me desmayé', 'se desmayó', 'desmayo', 'perdió el conocimiento', 'perdí el conocimiento', 'no responde', 'no despierta',
  ],
  allergic_reaction: [
    'anaphylaxis', 'anaphylactic', 'throat is closing', 'throat closing', 'tongue swelling', 'swollen tongue', 'lips swelling', 'swollen lips', 'severe allergic reaction', 'face swelling',
    'anafilaxia', 'reacción alérgica grave', 'reacción alérgica fuerte', 'se me cierra la garganta', 'garganta cerrada', 'lengua hinchada', 'labios hinchados', 'cara hinchada',
  ],
  overdose: [
    'overdose', 'overdosed', 'took too many pills', 'too many pills', 'took too much medication', 'took too much of my medication',
    'sobredosis', 'demasiadas pastillas', 'tomé demasiadas', 'me tomé todas las pastillas', 'demasiado medicamento',
  ],
};

/** Lowercase, accents folded (NFD without combining marks), punctuation to spaces, single spaces. */
export function normalize(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim();
}

const NORMALIZED_TERMS: [EmergencyKind, string[]][] = EMERGENCY_KINDS.map((k) => [k, EMERGENCY_TERMS[k].map(normalize)]);

/** Whole-word phrase containment on normalized text. */
export function containsPhrase(normalizedText: string, phrase: string): boolean {
  const p = normalize(phrase);
  if (!p) return false;
  return ` ${normalizedText} `.includes(` ${p} `);
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

/** Which built-in emergency kinds the text mentions. */
export function emergencyKinds(text: string): EmergencyKind[] {
  const n = normalize(text);
  return EMERGENCY_KINDS.filter((k) => {
    const terms = NORMALIZED_TERMS.find(([kind]) => kind === k)![1];
    if (terms.some((t) => ` ${n} `.includes(` ${t} `))) return true;
    return (EMERGENCY_CONCEPTS[k] ?? []).some((p) => semanticMatch(text, p));
  });
}

// ---- semantic phrases -------------------------------------------------------------------

const STOPWORDS = new Set(
  (
    'a an the and or of in on at to my me i im is am are was were be been it its this that with for from have has had very really so some up just ' +
    'feel feeling feels felt get got getting bit little lot much more still since about there when do does did can could would will t s ' +
    'el la los las un una unos unas de del en y o al mi mis yo es esta estoy estan tengo tiene con por para que se lo le muy mucho mucha poco ' +
    'siento sentir hay su sus como mas'
  ).split(' '),
);

/** Curated synonym groups (English and Spanish words, accent-free) mapped to one concept. */
const CONCEPTS: Record<string, string[]> = {
  pain: ['pain', 'painful', 'ache', 'aching', 'aches', 'hurt', 'hurts', 'hurting', 'sore', 'soreness', 'dolor', 'dolores', 'duele', 'duelen', 'doliendo', 'adolorido', 'adolorida', 'molestia'],
  chest: ['chest', 'breastbone', 'pecho', 'torax'],
  breath: ['breath', 'breathe', 'breathing', 'breathless', 'respirar', 'respiracion', 'respiro', 'aliento', 'aire'],
  difficulty: ['trouble', 'difficulty', 'difficult', 'hard', 'struggling', 'struggle', 'dificultad', 'dificil', 'cuesta', 'falta'],
  swell: ['swelling', 'swollen', 'swell', 'swells', 'puffy', 'hinchazon', 'hinchado', 'hinchada', 'hinchados', 'hinchadas', 'hinchar', 'hincha', 'inflamado', 'inflamada', 'inflamacion'],
  leg: ['leg', 'legs', 'ankle', 'ankles', 'pierna', 'piernas', 'tobillo', 'tobillos'],
  head: ['head', 'cabeza'],
  headache: ['headache', 'headaches', 'migraine', 'migraines', 'jaqueca', 'migrana', 'cefalea'],
  dizzy: ['dizzy', 'dizziness', 'lightheaded', 'vertigo', 'mareo', 'mareado', 'mareada', 'mareos'],
  nausea: ['nausea', 'nauseous', 'queasy', 'nauseas'],
  vomit: ['vomit', 'vomiting', 'vomited', 'throwing', 'vomito', 'vomitar', 'vomitando', 'vomite'],
  fever: ['fever', 'feverish', 'temperature', 'fiebre', 'calentura'],
  bleed: ['bleed', 'bleeding', 'bled', 'blood', 'sangre', 'sangrado', 'sangrar', 'sangrando', 'sangra', 'hemorragia'],
  tired: ['tired', 'fatigue', 'fatigued', 'exhausted', 'weary', 'cansado', 'cansada', 'cansancio', 'agotado', 'agotada', 'fatiga'],
  sad: ['sad', 'depressed', 'down', 'hopeless', 'triste', 'deprimido', 'deprimida', 'tristeza'],
  anxious: ['anxious', 'anxiety', 'worried', 'nervous', 'ansioso', 'ansiosa', 'ansiedad', 'nervioso', 'nerviosa', 'preocupado', 'preocupada'],
  sleep: ['sleep', 'sleeping', 'insomnia', 'dormir', 'duermo', 'sueno', 'insomnio'],
  cough: ['cough', 'coughing', 'tos', 'toser', 'tosiendo'],
  rash: ['rash', 'hives', 'sarpullido', 'erupcion', 'ronchas'],
  worse: ['worse', 'worsening', 'worst', 'peor', 'empeorado', 'empeorando', 'empeora'],
  severe: ['severe', 'bad', 'terrible', 'intense', 'strong', 'awful', 'fuerte', 'intenso', 'intensa', 'severo', 'severa', 'grave', 'horrible'],
  stomach: ['stomach', 'belly', 'abdomen', 'tummy', 'abdominal', 'estomago', 'barriga', 'panza', 'vientre'],
  wound: ['wound', 'incision', 'cut', 'herida', 'corte'],
  red: ['red', 'redness', 'rojo', 'roja', 'enrojecido', 'enrojecida', 'enrojecimiento'],
  infection: ['infection', 'infected', 'pus', 'infeccion', 'infectado', 'infectada'],
  weak: ['weak', 'weakness', 'debil', 'debilidad'],
  numb: ['numb', 'numbness', 'tingling', 'entumecido', 'entumecida', 'hormigueo', 'adormecido', 'adormecida'],
  medication: ['medication', 'medications', 'medicine', 'meds', 'pills', 'pill', 'medicamento', 'medicamentos', 'medicina', 'pastillas', 'pastilla'],
  miss: ['missed', 'miss', 'skip', 'skipped', 'forgot', 'forget', 'olvide', 'olvido', 'omiti', 'salte'],
  heart: ['heart', 'corazon'],
  palpitation: ['palpitations', 'palpitation', 'racing', 'pounding', 'palpitaciones', 'acelerado'],
  arm: ['arm', 'arms', 'brazo', 'brazos'],
  back: ['back', 'espalda'],
  throat: ['throat', 'garganta'],
  tongue: ['tongue', 'lengua'],
  lips: ['lip', 'lips', 'labio', 'labios'],
  appetite: ['appetite', 'eat', 'eating', 'apetito', 'comer'],
  not: ['no', 'not', 'never', 'cannot', 'without', 'nunca', 'ni', 'sin'],
};

const CONCEPT_INDEX = new Map<string, string>();
for (const [concept, words] of Object.entries(CONCEPTS)) {
  for (const w of words) if (!CONCEPT_INDEX.has(w)) CONCEPT_INDEX.set(w, concept);
}
for (const [concept, words] of Object.entries(CONCEPTS)) {
  for (const w of words) {
    for (const s of [porterStem(w), spanishStem(w)]) if (!CONCEPT_INDEX.has(s)) CONCEPT_INDEX.set(s, concept);
  }
}

/** Normalized text with English contractions of negation ("can't", "won't") turned into "not". */
function semanticText(text: string): string {
  return normalize(text).replace(/\b(can|won|don|didn|doesn|isn|aren|wasn|couldn|wouldn|shouldn|haven|hasn) t\b/g, 'not');
}

/** The forms a token can take: its concept when the synonym table knows it, else its stems. */
export function tokenForms(token: string): string[] {
  const en = porterStem(token);
  const es = spanishStem(token);
  const concept = CONCEPT_INDEX.get(token) ?? CONCEPT_INDEX.get(en) ?? CONCEPT_INDEX.get(es);
  if (concept) return [`#${concept}`];
  return [...new Set([token, en, es])];
}

function contentTokens(text: string): string[] {
  return semanticText(text)
    .split(' ')
    .filter((t) => t.length > 0 && !STOPWORDS.has(t));
}

/**
 * Semantic phrase match: every content word of the phrase (stop words dropped) must be present in
 * the text as the same concept (synonym table, both languages) or the same stem, in any order.
 */
export function semanticMatch(text: string, phrase: string): boolean {
  const wanted = contentTokens(phrase);
  if (wanted.length === 0) return false;
  const present = new Set<string>();
  for (const t of contentTokens(text)) for (const f of tokenForms(t)) present.add(f);
  return wanted.every((w) => tokenForms(w).some((f) => present.has(f)));
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
  for (const p of redFlags.semanticPhrases ?? []) {
    if (joined.some((t) => semanticMatch(t, p.phrase))) add(`semantic_phrase:${p.phrase}`, p.tier);
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
