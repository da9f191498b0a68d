import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { MAX_ANALYSED_LENGTH, MAX_STEMMED_WORD, containsPhrase, emergencyKinds, normalize, semanticMatch, textForms } from '@svc/clinical';
import { StaffCaseDto } from '../../../apps/case-ledger/src/adapters/http/dto';
import { CheckInCompleteDto } from '../../../apps/patient-pathway/src/adapters/http/dto';
import { checkAnswer } from '../../../apps/patient-pathway/src/domain/check-in';
import { WidgetMessageDto } from '../../../apps/workflow-engine/src/adapters/http/dto';

/**
 * Text analysis costs time linear in the text's length (decisions: "Text analysis and emergency
 * words"). Nothing here is timed: the work is counted. The stemmers are the real library, wrapped
 * so that every call and every character handed to it is counted.
 */
jest.mock('snowball-stemmers', () => {
  const real = jest.requireActual('snowball-stemmers');
  const work = { calls: 0, chars: 0, longest: 0 };
  return {
    ...real,
    work,
    newStemmer: (language: string) => {
      const stemmer = real.newStemmer(language);
      return {
        stem: (word: string) => {
          work.calls++;
          work.chars += word.length;
          work.longest = Math.max(work.longest, word.length);
          return stemmer.stem(word);
        },
      };
    },
  };
});
const work: { calls: number; chars: number; longest: number } = jest.requireMock('snowball-stemmers').work;
const resetWork = () => Object.assign(work, { calls: 0, chars: 0, longest: 0 });

/** A small deterministic generator (mulberry32): the same adversarial texts on every run. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SUFFIXES = [
  'ational',
  'tional',
  'ization',
  'iveness',
  'fulness',
  'ing',
  'ed',
  'ies',
  'sses',
  'ness',
  'ful',
  'mente',
  'amiento',
  'aciones',
  'ando',
  'idos',
];
const OTHER = [
  'сильная',
  'боль',
  'πόνος',
  '頭痛がします',
  'ألم',
  '😀\u200d😀',
  'e\u0301\u0301\u0301',
  '\u200b\u00ad\u2060',
  'ｃｈｅｓｔ',
  '\ufdfa',
  'can\u02bct',
  '—',
  '!!!',
  'ᴄʜᴇꜱᴛ',
];

/** Adversarial text of about `length` characters: y-runs with Porter suffixes, fresh Latin words, long words, other scripts. */
function adversarial(length: number, seed: number): string {
  const next = random(seed);
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const parts: string[] = [];
  let size = 0;
  while (size < length) {
    const r = next();
    let word: string;
    if (r < 0.3) word = 'y'.repeat(1 + Math.floor(next() * 60)) + SUFFIXES[Math.floor(next() * SUFFIXES.length)];
    else if (r < 0.8)
      word =
        Array.from({ length: 3 + Math.floor(next() * 12) }, () => letters[Math.floor(next() * 26)]).join('') + SUFFIXES[Math.floor(next() * SUFFIXES.length)];
    else if (r < 0.85) word = 'y'.repeat(41 + Math.floor(next() * 400));
    else word = OTHER[Math.floor(next() * OTHER.length)];
    parts.push(word);
    size += word.length + 1;
  }
  return parts.join(' ').slice(0, length);
}

const wordsOf = (text: string) =>
  normalize(text)
    .split(' ')
    .filter((w) => w.length > 0).length;

describe('text analysis work is linear in the text', () => {
  // The emergency concept phrases and the semantic phrase are stemmed once, when first matched (and remembered).
  beforeAll(() => {
    emergencyKinds('');
    semanticMatch('', 'leg swelling');
  });

  it('the word that froze the service is kept as it is: no stemming of words past the limit', () => {
    resetWork();
    const word = `${'y'.repeat(3993)}ational`;
    expect(textForms(word)).toEqual(new Set([word]));
    expect(emergencyKinds(word)).toEqual([]);
    expect(work.calls).toBe(0);
    expect(MAX_STEMMED_WORD).toBe(40);
    const justUnder = `${'y'.repeat(MAX_STEMMED_WORD - 7)}ational`;
    textForms(justUnder);
    expect(work.longest).toBe(MAX_STEMMED_WORD);
  });

  it('stem calls and characters stemmed grow with the number of words, never faster (1k to 64k characters)', () => {
    const perCharacter: number[] = [];
    const analyses: [string, (text: string) => unknown][] = [
      ['textForms', textForms],
      ['semanticMatch', (text) => semanticMatch(text, 'leg swelling')],
      ['emergencyKinds', emergencyKinds],
    ];
    for (const [i, length] of [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000].entries()) {
      const text = adversarial(Math.min(length, MAX_ANALYSED_LENGTH), 1000 + i); // fresh words
      const words = wordsOf(text);
      let calls = 0;
      for (const [name, analyse] of analyses) {
        resetWork();
        analyse(text);
        // At most one English and one Spanish stem per word, each of a word of at most MAX_STEMMED_WORD characters.
        expect([name, length, work.calls > 0, work.calls <= 2 * words, work.longest <= MAX_STEMMED_WORD, work.chars <= 2 * text.length]).toEqual([
          name,
          length,
          true,
          true,
          true,
          true,
        ]);
        calls += work.calls;
      }
      perCharacter.push(calls / text.length);
    }
    // Work per character does not grow with the length (it would, quadratically, if a word were re-examined per letter).
    for (const p of perCharacter) expect(p).toBeLessThanOrEqual(perCharacter[0] * 1.5);
  });

  it('the same word in a text is stemmed once', () => {
    resetWork();
    textForms(Array.from({ length: 5000 }, () => 'zorblaxingly').join(' '));
    expect(work.calls).toBeLessThanOrEqual(2);
  });
});

describe('1 MB of adversarial text is analysed without a stack overflow', () => {
  const MB = 1 << 20;
  const fill = (unit: string) => unit.repeat(Math.ceil(MB / unit.length)).slice(0, MB);
  const texts: [string, string][] = [
    ['one y-run', 'y'.repeat(MB)],
    ['y-runs with suffixes', fill(`${'y'.repeat(3993)}ational `)],
    ['y-runs just under the stemming limit', fill(`${'y'.repeat(33)}ational `)],
    ['one long word', fill('abcdefghij')],
    ['many short words', fill('ab cd ef gh ')],
    ['mixed adversarial words and scripts', adversarial(MB, 7)],
    ['combining marks on one letter', `a${'\u0301'.repeat(MB - 1)}`],
    ['alternating combining marks (reordered by normalization)', `\u05d0${'\u05b1\u05b0'.repeat(MB / 2)}`],
    ['invisible characters', fill('\u200b\u00ad\u200d\ufeff\u2060\u{e0061}')],
    ['expanding compatibility characters', fill('\ufdfa')],
    ['full-width and look-alike letters', fill('ｃｈｅｓｔ сhеѕt πόνος ')],
    ['punctuation and modifier letters', fill('!?\u02bc\u00ba. ')],
    ['negative contractions', fill("can't won't ")],
    ['unspaced scripts', fill('頭痛がします')],
  ];

  it.each(texts)('%s', (_name, text) => {
    expect(text.length).toBeGreaterThanOrEqual(MB - 20);
    const n = normalize(text);
    expect(typeof n).toBe('string');
    expect(emergencyKinds(text)).toEqual(expect.any(Array));
    expect(textForms(text)).toBeInstanceOf(Set);
    expect(typeof semanticMatch(text, 'leg swelling')).toBe('boolean');
    expect(typeof containsPhrase(n, 'wound is leaking')).toBe('boolean');
    expect(typeof containsPhrase(n, '頭痛')).toBe('boolean');
  });

  it('combining marks are reordered in runs of at most 30 (stream-safe), never across a whole run', () => {
    // Canonical reordering sorts a run of marks by class, in time quadratic in the run: normalize
    // puts an invisible joiner after every 30 marks first, so only runs of 30 are sorted.
    const run = (n: number) => `\u05d0${'\u05b1\u05b0'.repeat(n)}`; // Hebrew letter, points of classes 11 and 10
    const sorted = (n: number) => '\u05b0'.repeat(n) + '\u05b1'.repeat(n);
    expect(normalize(run(15))).toBe(`\u05d0${sorted(15)}`);
    expect(normalize(run(20))).toBe(`\u05d0${sorted(15)}${sorted(5)}`);
    expect(normalize(run(60))).toBe(`\u05d0${sorted(15).repeat(4)}`);
  });

  it('an emergency word at the start of 1 MB of adversarial text is found', () => {
    const text = `I have ｃｈｅｓｔ ｐａｉｎ ${adversarial(MB, 8)}`;
    expect(emergencyKinds(text)).toContain('chest_pain');
  });
});

describe('the analysed length', () => {
  /** The longest string of `unit`s (plus a tail) that `accepts` takes. */
  function longestAccepted(unit: string, accepts: (s: string) => boolean, tail = ''): string {
    let lo = 0;
    let hi = 200_000;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (accepts(unit.repeat(mid) + tail)) lo = mid;
      else hi = mid - 1;
    }
    return unit.repeat(lo) + tail;
  }
  const dto =
    <T extends object>(cls: new () => T, field: keyof T, extra: Record<string, unknown> = {}) =>
    (s: string) =>
      validateSync(plainToInstance(cls, { ...extra, [field]: s }) as object).length === 0;
  const FIELDS: [string, (s: string) => boolean][] = [
    ['widget message', dto(WidgetMessageDto, 'message')],
    ['staff chat request', dto(StaffCaseDto, 'request', { patientId: '00000000-0000-4000-8000-000000000000' })],
    ['check-in completion notes', dto(CheckInCompleteDto, 'notes', { token: 't' })],
    [
      'check-in text answer',
      (s) => {
        try {
          checkAnswer({ key: 'q', text: 'q', type: 'text' }, s);
          return true;
        } catch {
          return false;
        }
      },
    ],
  ];
  // The densest strings a length check counting characters (code points, variation selectors
  // after a character not counted) lets through, in UTF-16 code units per counted character.
  const UNITS = ['a', '😀', 'a\ufe0f', '😀\ufe0f', '😀\ufe0f\ufe0e', '\ufe0f', '\ud800'];

  it.each(FIELDS)('every %s the edge accepts is within the analysed length (however its characters are counted)', (_name, accepts) => {
    for (const unit of UNITS) {
      const longest = longestAccepted(unit, accepts);
      expect([unit, longest.length <= MAX_ANALYSED_LENGTH]).toEqual([unit, true]);
    }
  });

  it.each(FIELDS)('an emergency word at the end of the longest %s is found, dressed or not', (_name, accepts) => {
    for (const [unit, tail] of [
      ['😀\ufe0f', ' chest pain'],
      ['y', ' ｃｈｅｓｔ ｐａｉｎ'],
      ['\ufdfa', ' sui\u200dcidal'], // expands eighteenfold under NFKC
      ['a\ufe0f', ' over\u200bdose'],
    ]) {
      const text = longestAccepted(unit, accepts, tail);
      expect(accepts(text)).toBe(true);
      expect(text.length).toBeGreaterThan(1000);
      expect(emergencyKinds(text).length).toBe(1);
    }
  });
});
