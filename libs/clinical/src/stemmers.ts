/**
 * Small stemmers for the semantic-phrase matcher (pure, no I/O).
 * - `porterStem`: M. F. Porter's 1980 algorithm for English (steps 1a to 5b).
 * - `spanishStem`: a light suffix stripper for Spanish (plural, adverb, gerund, participle,
 *   infinitive and gender endings). Not Snowball: it only needs to make "hinchada",
 *   "hinchado", "hinchazón" and "hinchar" meet, and it must never go below 3 letters.
 */

const isConsonant = (w: string, i: number): boolean => {
  const c = w[i];
  if ('aeiou'.includes(c)) return false;
  if (c === 'y') return i === 0 ? true : !isConsonant(w, i - 1);
  return true;
};

/** m() of Porter: the number of VC sequences in the stem. */
function measure(stem: string): number {
  let n = 0;
  let i = 0;
  const len = stem.length;
  while (i < len && isConsonant(stem, i)) i++;
  while (i < len) {
    while (i < len && !isConsonant(stem, i)) i++;
    if (i >= len) break;
    n++;
    while (i < len && isConsonant(stem, i)) i++;
  }
  return n;
}

const hasVowel = (stem: string): boolean => {
  for (let i = 0; i < stem.length; i++) if (!isConsonant(stem, i)) return true;
  return false;
};

const endsDoubleConsonant = (w: string): boolean => w.length >= 2 && w[w.length - 1] === w[w.length - 2] && isConsonant(w, w.length - 1);

/** *o: the stem ends cvc, where the second c is not w, x or y. */
const endsCvc = (w: string): boolean => {
  const l = w.length;
  if (l < 3) return false;
  if (!isConsonant(w, l - 1) || isConsonant(w, l - 2) || !isConsonant(w, l - 3)) return false;
  return !'wxy'.includes(w[l - 1]);
};

function replaceSuffix(w: string, rules: [string, string][], minMeasure: number): string {
  for (const [suffix, repl] of rules) {
    if (w.endsWith(suffix)) {
      const stem = w.slice(0, -suffix.length);
      return measure(stem) > minMeasure ? stem + repl : w;
    }
  }
  return w;
}

const STEP2: [string, string][] = [
  ['ational', 'ate'], ['tional', 'tion'], ['enci', 'ence'], ['anci', 'ance'], ['izer', 'ize'], ['bli', 'ble'],
  ['alli', 'al'], ['entli', 'ent'], ['eli', 'e'], ['ousli', 'ous'], ['ization', 'ize'], ['ation', 'ate'],
  ['ator', 'ate'], ['alism', 'al'], ['iveness', 'ive'], ['fulness', 'ful'], ['ousness', 'ous'], ['aliti', 'al'],
  ['iviti', 'ive'], ['biliti', 'ble'], ['logi', 'log'],
];
const STEP3: [string, string][] = [['icate', 'ic'], ['ative', ''], ['alize', 'al'], ['iciti', 'ic'], ['ical', 'ic'], ['ful', ''], ['ness', '']];
const STEP4 = ['al', 'ance', 'ence', 'er', 'ic', 'able', 'ible', 'ant', 'ement', 'ment', 'ent', 'ion', 'ou', 'ism', 'ate', 'iti', 'ous', 'ive', 'ize'];

export function porterStem(word: string): string {
  let w = word.toLowerCase();
  if (w.length <= 2 || !/^[a-z]+$/.test(w)) return w;
  // Step 1a
  if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('ies')) w = w.slice(0, -2);
  else if (w.endsWith('ss')) {
    /* keep */
  } else if (w.endsWith('s')) w = w.slice(0, -1);
  // Step 1b
  let extra = false;
  if (w.endsWith('eed')) {
    if (measure(w.slice(0, -3)) > 0) w = w.slice(0, -1);
  } else if (w.endsWith('ed') && hasVowel(w.slice(0, -2))) {
    w = w.slice(0, -2);
    extra = true;
  } else if (w.endsWith('ing') && hasVowel(w.slice(0, -3))) {
    w = w.slice(0, -3);
    extra = true;
  }
  if (extra) {
    if (w.endsWith('at') || w.endsWith('bl') || w.endsWith('iz')) w += 'e';
    else if (endsDoubleConsonant(w) && !'lsz'.includes(w[w.length - 1])) w = w.slice(0, -1);
    else if (measure(w) === 1 && endsCvc(w)) w += 'e';
  }
  // Step 1c
  if (w.endsWith('y') && hasVowel(w.slice(0, -1))) w = w.slice(0, -1) + 'i';
  // Steps 2, 3
  w = replaceSuffix(w, STEP2, 0);
  w = replaceSuffix(w, STEP3, 0);
  // Step 4
  for (const suffix of STEP4) {
    if (w.endsWith(suffix)) {
      const stem = w.slice(0, -suffix.length);
      if (measure(stem) > 1 && (suffix !== 'ion' || /[st]$/.test(stem))) w = stem;
      break;
    }
  }
  // Step 5a
  if (w.endsWith('e')) {
    const stem = w.slice(0, -1);
    const m = measure(stem);
    if (m > 1 || (m === 1 && !endsCvc(stem))) w = stem;
  }
  // Step 5b
  if (measure(w) > 1 && endsDoubleConsonant(w) && w.endsWith('l')) w = w.slice(0, -1);
  return w;
}

const SPANISH_SUFFIXES = [
  'amientos', 'imientos', 'amiento', 'imiento', 'aciones', 'uciones', 'adoras', 'adores', 'ancias', 'encias',
  'amente', 'mente', 'acion', 'ucion', 'azones', 'azon', 'adora', 'ador', 'ancia', 'encia', 'ando', 'iendo', 'yendo',
  'ados', 'idos', 'adas', 'idas', 'ado', 'ido', 'ada', 'ida', 'aron', 'ieron', 'aba', 'ia', 'ar', 'er', 'ir',
  'es', 'os', 'as', 'o', 'a', 'e', 's',
];

/** Light Spanish stemmer: strips the longest known ending while at least 3 letters remain. */
export function spanishStem(word: string): string {
  const w = word.toLowerCase();
  if (w.length <= 3) return w;
  for (const suffix of SPANISH_SUFFIXES) {
    if (w.endsWith(suffix) && w.length - suffix.length >= 3) return w.slice(0, -suffix.length);
  }
  return w;
}
