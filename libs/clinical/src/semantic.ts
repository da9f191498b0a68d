import { porterStem, spanishStem } from './stemmers';
import { normalize } from './text';

/**
 * Semantic phrase matching beyond exact words: accent folding, stemming (English and Spanish),
 * word order independence and a curated synonym table in both languages. See docs/decisions.md
 * (Patient pathway) for what it cannot do.
 */

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
  pain: [
    'pain',
    'painful',
    'ache',
    'aching',
    'aches',
    'hurt',
    'hurts',
    'hurting',
    'sore',
    'soreness',
    'dolor',
    'dolores',
    'duele',
    'duelen',
    'doliendo',
    'dolia',
    'adolorido',
    'adolorida',
    'molestia',
  ],
  chest: ['chest', 'breastbone', 'pecho', 'torax'],
  breath: ['breath', 'breathe', 'breathing', 'breathless', 'respirar', 'respiracion', 'respiro', 'aliento', 'aire'],
  difficulty: ['trouble', 'difficulty', 'difficult', 'hard', 'struggling', 'struggle', 'dificultad', 'dificil', 'cuesta', 'falta'],
  swell: [
    'swelling',
    'swollen',
    'swell',
    'swells',
    'puffy',
    'hinchazon',
    'hinchado',
    'hinchada',
    'hinchados',
    'hinchadas',
    'hinchar',
    'hincha',
    'inflamado',
    'inflamada',
    'inflamacion',
  ],
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
  sleep: ['sleep', 'sleeping', 'insomnia', 'dormir', 'duermo', 'dormia', 'sueno', 'insomnio'],
  cough: ['cough', 'coughing', 'tos', 'toser', 'tosiendo', 'tosia'],
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

/** English contractions of negation ("can't", "won't"), as normalized ("can t"): "not". */
const NEGATIVE_CONTRACTION = /\b(can|won|don|didn|doesn|isn|aren|wasn|couldn|wouldn|shouldn|haven|hasn) t\b/g;

/** The content words of normalized text: negative contractions as "not", stop words dropped. */
function contentWords(normalized: string): string[] {
  return normalized
    .replace(NEGATIVE_CONTRACTION, 'not')
    .split(' ')
    .filter((t) => t.length > 0 && !STOPWORDS.has(t));
}

/** The forms a token can take: its concept when the synonym table knows it, else its stems. */
export function tokenForms(token: string): string[] {
  const en = porterStem(token);
  const es = spanishStem(token);
  const concept = CONCEPT_INDEX.get(token) ?? CONCEPT_INDEX.get(en) ?? CONCEPT_INDEX.get(es);
  if (concept) return [`#${concept}`];
  return [...new Set([token, en, es])];
}

/**
 * Semantic phrase match: every content word of the phrase (stop words dropped) must be present in
 * the text as the same concept (synonym table, both languages) or the same stem, in any order.
 */
export function semanticMatch(text: string, phrase: string): boolean {
  return matchesForms(textForms(text), phrase);
}

/** Every form (concept or stem) of every content word of the text: compute once, match many phrases. */
export function textForms(text: string): Set<string> {
  return normalizedTextForms(normalize(text));
}

/** `textForms` of text already normalized. One pass: each distinct word is looked at (and stemmed) once. */
export function normalizedTextForms(normalized: string): Set<string> {
  const present = new Set<string>();
  const seen = new Set<string>();
  for (const t of contentWords(normalized)) {
    if (seen.has(t)) continue;
    seen.add(t);
    for (const f of tokenForms(t)) present.add(f);
  }
  return present;
}

/** Forms of each content word of a phrase, remembered (phrases come from a small, slowly changing set). */
const PHRASE_FORMS = new Map<string, string[][]>();
const MAX_PHRASES = 10_000;

/** A semantic phrase that can match some text: it has a content word (not only stop words or punctuation). */
export function matchableSemanticPhrase(phrase: string): boolean {
  return contentWords(normalize(phrase)).length > 0;
}

/** `semanticMatch` against forms from `textForms`. */
export function matchesForms(present: Set<string>, phrase: string): boolean {
  let wanted = PHRASE_FORMS.get(phrase);
  if (!wanted) {
    wanted = contentWords(normalize(phrase)).map(tokenForms);
    if (PHRASE_FORMS.size >= MAX_PHRASES) PHRASE_FORMS.clear();
    PHRASE_FORMS.set(phrase, wanted);
  }
  if (wanted.length === 0) return false;
  return wanted.every((forms) => forms.some((f) => present.has(f)));
}
