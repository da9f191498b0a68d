import { confusablesMap } from 'confusables';
import { EMERGENCY_KINDS, EmergencyKind, LOOKALIKE_LETTERS, containsPhrase, emergencyKinds, normalize, semanticMatch } from '@svc/clinical';
import { evaluateRedFlags } from '../../../apps/patient-pathway/src/domain/red-flags';

/**
 * Emergency words behind invisible, full-width, look-alike and decorated characters (patient
 * safety): every emergency kind, in English and Spanish, must be found however its letters are
 * dressed, and ordinary messages dressed the same way must stay ordinary.
 */

// ---- the disguises ---------------------------------------------------------------------------

type Disguise = [name: string, dress: (text: string) => string];

/** Apply `f` to every word of at least `min` letters (spaces and punctuation kept). */
const eachWord = (text: string, f: (w: string) => string, min = 4) => text.replace(/[\p{L}\p{M}]+/gu, (w) => ([...w].length >= min ? f(w) : w));
/** Insert `ch` after the second letter of every word of four letters or more. */
const inside = (ch: string) => (text: string) => eachWord(text, (w) => [...w].slice(0, 2).join('') + ch + [...w].slice(2).join(''));
/** Insert `ch` between every two letters of every word. */
const between = (ch: string) => (text: string) => eachWord(text, (w) => [...w].join(ch), 2);
const byTable = (table: Record<string, string>) => (text: string) => [...text].map((c) => table[c] ?? c).join('');

const FULL_WIDTH = (text: string) =>
  [...text].map((c) => (c === ' ' ? '\u3000' : c >= '!' && c <= '~' ? String.fromCodePoint(c.codePointAt(0)! + 0xfee0) : c)).join('');
const CYRILLIC = byTable({ a: 'а', e: 'е', o: 'о', p: 'р', c: 'с', x: 'х', y: 'у', i: 'і', s: 'ѕ', j: 'ј', h: 'һ' });
const CYRILLIC_CAPITALS = (text: string) =>
  byTable({ A: 'А', B: 'В', E: 'Е', K: 'К', M: 'М', H: 'Н', O: 'О', P: 'Р', C: 'С', T: 'Т', Y: 'У', X: 'Х', I: 'І', S: 'Ѕ', J: 'Ј' })(text.toUpperCase());
const GREEK = byTable({ o: 'ο', a: 'α', i: 'ι', v: 'ν', k: 'κ', u: 'υ', t: 'τ', p: 'ρ', e: 'ε', x: 'χ', c: 'ϲ' });
const GREEK_CAPITALS = (text: string) =>
  byTable({ A: 'Α', B: 'Β', E: 'Ε', Z: 'Ζ', I: 'Ι', K: 'Κ', M: 'Μ', O: 'Ο', P: 'Ρ', T: 'Τ', X: 'Χ' })(text.toUpperCase());
const SMALL_CAPITALS = byTable({
  a: 'ᴀ',
  b: 'ʙ',
  c: 'ᴄ',
  d: 'ᴅ',
  e: 'ᴇ',
  g: 'ɢ',
  h: 'ʜ',
  i: 'ɪ',
  j: 'ᴊ',
  k: 'ᴋ',
  l: 'ʟ',
  m: 'ᴍ',
  n: 'ɴ',
  o: 'ᴏ',
  p: 'ᴘ',
  r: 'ʀ',
  s: 'ꜱ',
  t: 'ᴛ',
  u: 'ᴜ',
  v: 'ᴠ',
  w: 'ᴡ',
  y: 'ʏ',
  z: 'ᴢ',
});
const MATH_BOLD = (text: string) =>
  [...text]
    .map((c) =>
      c >= 'a' && c <= 'z'
        ? String.fromCodePoint(0x1d41a + c.charCodeAt(0) - 97)
        : c >= 'A' && c <= 'Z'
          ? String.fromCodePoint(0x1d400 + c.charCodeAt(0) - 65)
          : c,
    )
    .join('');
const MIXED_CASE = (text: string) => [...text].map((c, i) => (i % 2 ? c.toUpperCase() : c.toLowerCase())).join('');
const ACCENTS = (text: string) => text.replace(/[aeiou]/g, (v) => `${v}\u0301`).replace(/[bcdfgklmnprst]/g, (c) => `${c}\u0308`);
const OTHER_MARKS = (text: string) => eachWord(text, (w) => [...w].map((c) => `${c}\u1dc4\u20dd\u0483`).join(''), 2);
const PUNCTUATION = (text: string) => `¡¡ ... ${text.split(' ').join(' -- ')} !!! ???`;
const SPACES = (text: string) => `\t${text.split(' ').join('\u00a0\n\u2003 ')}\r\n`;

const DISGUISES: Disguise[] = [
  ['full-width letters', FULL_WIDTH],
  ['soft hyphen inside words', inside('\u00ad')],
  ['zero-width joiner inside words', inside('\u200d')],
  ['zero-width space inside words', inside('\u200b')],
  ['zero-width non-joiner inside words', inside('\u200c')],
  ['word joiner inside words', inside('\u2060')],
  ['byte-order mark inside words', inside('\ufeff')],
  ['bidi controls inside words', inside('\u202a\u200e\u2066\u2069\u202c')],
  ['variation selectors inside words', inside('\ufe0f\u{e0100}')],
  ['tag characters inside words', inside('\u{e0061}\u{e007f}')],
  ['combining grapheme joiner and Hangul filler inside words', inside('\u034f\u3164')],
  ['a soft hyphen between every two letters', between('\u00ad')],
  ['a zero-width joiner between every two letters', between('\u200d')],
  ['Cyrillic look-alikes', CYRILLIC],
  ['Cyrillic capital look-alikes', CYRILLIC_CAPITALS],
  ['Greek look-alikes', GREEK],
  ['Greek capital look-alikes', GREEK_CAPITALS],
  ['small capitals', SMALL_CAPITALS],
  ['mathematical bold letters', MATH_BOLD],
  ['mixed case', MIXED_CASE],
  ['combining accents', ACCENTS],
  ['other combining marks', OTHER_MARKS],
  ['decomposed (NFD) text', (t) => t.normalize('NFD')],
  ['extra punctuation', PUNCTUATION],
  ['other spaces and line breaks', SPACES],
  ['everything at once', (t) => inside('\u00ad')(MIXED_CASE(FULL_WIDTH(CYRILLIC(between('\u200b')(t)))))],
  ['everything at once, the other way', (t) => PUNCTUATION(inside('\u2060')(GREEK(ACCENTS(t))))],
];

// ---- the messages ----------------------------------------------------------------------------

/** A plain sentence per kind and language: what a patient (or a teammate) types. */
const EMERGENCIES: [EmergencyKind, string, string][] = [
  ['chest_pain', 'I have crushing chest pain', 'tengo dolor de pecho'],
  ['breathing', 'I cannot breathe', 'no puedo respirar'],
  ['stroke', 'I think he had a stroke', 'creo que es un derrame cerebral'],
  ['self_harm', 'I want to kill myself', 'quiero hacerme daño'],
  ['severe_bleeding', 'the cut is bleeding heavily', 'tengo una hemorragia'],
  ['unconscious', 'she is unconscious', 'perdió el conocimiento'],
  ['allergic_reaction', 'my throat is closing', 'tengo la lengua hinchada'],
  ['overdose', 'I took an overdose', 'tomé una sobredosis'],
];

/** Ordinary messages: dressed any way, they must stay ordinary. */
const ORDINARY = [
  'where is my order',
  'refill request for strokes of luck',
  'I feel fine today, thank you',
  'I need a new dose schedule',
  'over the dose limit on the label',
  'the chest of drawers arrived broken',
  'quiero cambiar mi cita del jueves',
  'el niño tiene una pregunta sobre su factura',
  'mañana no puedo ir a la cita',
];

describe('emergency words behind disguises (every kind, English and Spanish)', () => {
  it('the table covers every emergency kind', () => {
    expect(EMERGENCIES.map(([k]) => k)).toEqual([...EMERGENCY_KINDS]);
  });

  const plainCases = EMERGENCIES.flatMap(([kind, en, es]) => [
    [kind, 'en', en],
    [kind, 'es', es],
  ]) as [EmergencyKind, string, string][];

  it.each(plainCases)('%s (%s) plain: %s', (kind, _lang, text) => {
    expect(emergencyKinds(text)).toEqual([kind]);
  });

  // Every disguise that changes the sentence (NFD leaves one without accents as it is).
  const dressed = plainCases.flatMap(([kind, lang, text]) =>
    DISGUISES.map(([name, dress]) => [kind, lang, name, dress(text)] as const).filter(([, , , d]) => d !== text),
  );
  it.each(dressed)('%s (%s), %s: %s', (kind, _lang, _name, text) => {
    expect(emergencyKinds(text)).toEqual([kind]);
  });

  it('every disguise dresses English and Spanish sentences (NFD only those with accents: Spanish)', () => {
    for (const [name] of DISGUISES) {
      for (const lang of name.startsWith('decomposed') ? ['es'] : ['en', 'es'])
        expect([name, lang, dressed.some(([, l, n]) => l === lang && n === name)]).toEqual([name, lang, true]);
    }
  });

  const ordinary = ORDINARY.flatMap((text) => [['plain', text, text] as const, ...DISGUISES.map(([name, dress]) => [name, text, dress(text)] as const)]);
  it.each(ordinary)('ordinary, %s: %s', (_name, _plain, text) => {
    expect(emergencyKinds(text)).toEqual([]);
  });

  it.each([
    ['I have crushing ｃｈｅｓｔ ｐａｉｎ', ['chest_pain']],
    ['kill my\u00adself', ['self_harm']],
    ['sui\u200dcidal', ['self_harm']],
    ['over\u200bdose', ['overdose']],
    ['I have сhest раin', ['chest_pain']], // Cyrillic с р а
    ['my thrοat is clοsing', ['allergic_reaction']], // Greek ο
    ['ᴄʜᴇꜱᴛ ᴘᴀɪɴ', ['chest_pain']],
    ['SUІCIDE', ['self_harm']], // Cyrillic І
  ])('the issue examples: %s', (text, kinds) => {
    expect(emergencyKinds(text)).toEqual(kinds);
  });
});

describe('red-flag phrases and semantic phrases see through the same disguises', () => {
  const phraseCases = DISGUISES.map(([name, dress]) => [name, dress] as const);

  it.each(phraseCases)('a clinic phrase, %s', (_name, dress) => {
    expect(containsPhrase(normalize(dress('The wound is LEAKING again')), 'wound is leaking')).toBe(true);
    expect(containsPhrase(normalize(dress('the window is leaking')), 'wound is leaking')).toBe(false);
  });

  it.each(phraseCases)('a semantic phrase, %s', (_name, dress) => {
    expect(semanticMatch(dress('my legs are swollen'), 'leg swelling')).toBe(true);
    expect(semanticMatch(dress('tengo la pierna muy hinchada'), 'leg swelling')).toBe(true);
    expect(semanticMatch(dress('my arm is swollen'), 'leg swelling')).toBe(false);
  });

  it.each(phraseCases)('a check-in red-flag evaluation, %s', (_name, dress) => {
    const redFlags = {
      phrases: [{ phrase: 'wound is leaking', tier: 'urgent' as const }],
      semanticPhrases: [{ phrase: 'leg swelling', tier: 'routine' as const }],
    };
    const texts = [dress('The wound is leaking'), dress('my ankles are swollen'), dress('tengo dolor de pecho')];
    expect(evaluateRedFlags(redFlags, {}, texts).map((m) => m.rule)).toEqual([
      'phrase:wound is leaking',
      'semantic_phrase:leg swelling',
      'emergency_terms:chest_pain',
    ]);
  });

  it('a phrase with invisible or decorated characters matches the plain text too (both sides alike)', () => {
    expect(containsPhrase(normalize('the wound is leaking'), 'wound is le\u00adaking')).toBe(true);
    expect(containsPhrase(normalize('the wound is leaking'), 'ＷＯＵＮＤ ｉｓ leaking')).toBe(true);
    expect(semanticMatch('my legs are swollen', 'lеg swеlling')).toBe(true); // Cyrillic е in the phrase
  });
});

describe('phrases written in other scripts keep matching the same words', () => {
  const rule = (phrase: string, text: string) => containsPhrase(normalize(text), phrase);
  it.each([
    ['сильная боль', 'У меня СИЛЬНАЯ БОЛЬ в спине', true],
    ['сильная боль', 'у меня сильная бо\u00adль', true],
    ['сильная боль', 'у меня сильная бо\u200dль', true],
    ['сильная боль', 'у меня ｓильная боль', false], // a full-width Latin s is not Cyrillic с's look-alike
    ['боль', 'больница рядом', false],
    ['боль', 'боль', true],
    ['пил', 'лип', false], // distinct Russian letters stay distinct
    ['вина', 'нива', false],
    ['πόνος', 'έχω πόνος στο κεφάλι', true],
    ['πόνος', 'έχω πό\u200bνος', true],
    ['頭痛', '今日は頭\u200b痛がします', true],
    ['頭痛', '今日は頭痛がします', true],
    ['ألم', 'عندي أ\u200cلم شديد', true],
  ])('%s in %s: %s', (phrase, text, expected) => {
    expect(rule(phrase, text)).toBe(expected);
  });

  it('Russian words typed with Latin look-alikes match the Russian phrase (both sides folded alike)', () => {
    expect(rule('сильная боль', 'cильнaя бoль')).toBe(true); // Latin c, a, o
  });

  it('Spanish accents and ñ are folded the same way on both sides', () => {
    for (const text of ['me hizo daño', 'me hizo DAÑO', 'me hizo dano', 'me hizo dan\u0303o', 'me hizo da\u00adño']) {
      expect([text, rule('daño', text)]).toEqual([text, true]);
      expect([text, rule('dano', text)]).toEqual([text, true]);
    }
    expect(normalize('Año NIÑO pingüino canción')).toBe('ano nino pinguino cancion');
  });
});

describe('normalize', () => {
  it.each([
    ['ｃｈｅｓｔ\u3000ｐａｉｎ', 'chest pain'],
    ['kill my\u00adself', 'kill myself'], // removed, not a space
    ['sui\u200dcidal', 'suicidal'],
    ['over\u200bdose', 'overdose'],
    ['\ufeffbom and\u2060joiner', 'bom andjoiner'],
    ['сhest раin', 'chest pain'],
    ['𝐜𝐡𝐞𝐬𝐭 𝐩𝐚𝐢𝐧', 'chest pain'],
    ['ﬁnger', 'finger'],
    ['tengo fiebre de 40º', 'tengo fiebre de 40'], // º still separates (typed for the degree sign)
    ['39ª grados', '39 grados'],
    ['I can\u02bct', 'i can t'],
    ['  ¡Dolor FUERTE!  ', 'dolor fuerte'],
    ['I 😀 can’t', 'i can t'],
    ['straße', 'straße'],
    ['', ''],
    ['\u200b\u00ad\ufeff', ''],
  ])('%j → %j', (text, expected) => {
    expect(normalize(text)).toBe(expected);
  });

  it('every look-alike letter of the table is one the confusables library also folds to that letter (or its capital is)', () => {
    const disagreements: string[] = [];
    for (const [letter, latin] of Object.entries(LOOKALIKE_LETTERS)) {
      const library = [confusablesMap.get(letter), confusablesMap.get(letter.toUpperCase())].map((v) => v?.toLowerCase());
      if (!library.includes(latin)) disagreements.push(`${letter}→${latin} (library: ${library.join('/')})`);
    }
    // The i-like letters (Greek iota, dotless i, Latin iota): the library folds them to "l" (their
    // capitals look like I and l alike); after lower-casing they are an i.
    expect(disagreements).toEqual(['ι→i (library: l/l)', 'ı→i (library: l/)', 'ɩ→i (library: l/l)']);
  });

  it('look-alike letters are folded after lower-casing, so case never changes the result', () => {
    for (const letter of Object.keys(LOOKALIKE_LETTERS)) {
      if (letter === 'ς') continue; // final sigma: its capital Σ is also the capital of σ, and lower-cases by position
      expect([letter, normalize(letter.toUpperCase())]).toEqual([letter, normalize(letter)]);
    }
  });

  it('no two Cyrillic or Greek letters of the table fold to the same Latin letter within their script', () => {
    for (const script of [/\p{Script=Cyrillic}/u, /\p{Script=Greek}/u]) {
      const letters = Object.entries(LOOKALIKE_LETTERS).filter(([l]) => script.test(l) && /[\u0430-\u044f\u03b1-\u03c9]/.test(l));
      const targets = letters.map(([, latin]) => latin);
      expect(new Set(targets).size).toBe(targets.length);
    }
  });
});
