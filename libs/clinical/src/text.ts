/** Text normalization shared by every matcher: the same words match the same way everywhere. */

/**
 * The longest text analysed, in UTF-16 code units; a longer text is analysed up to here. Far above
 * what any analysed field lets through (widget messages and staff chat requests are at most 4,000
 * characters, check-in notes and text answers at most 2,000, counted as the edge's validation
 * counts them: at most 3 code units a character, so 12,000 code units), so no allowed message
 * is ever cut; a bound on the work for any other caller. Everything below costs time linear in the
 * text (see docs/decisions.md, "Text analysis and emergency words").
 */
export const MAX_ANALYSED_LENGTH = 65_536;

/**
 * Look-alike letters folded to the Latin letter they are written to pass for ("сhest" with a
 * Cyrillic с, "thrοat" with a Greek ο, "ᴄʜᴇꜱᴛ" in small capitals). Keys are lower-case: the fold
 * runs after lower-casing, so a capital look-alike (Cyrillic Н, Т, В; Greek Κ, Ρ) folds through
 * its small letter, and "НЕТ" and "нет" stay the same word. Derived from the `confusables`
 * library's table (a test holds every entry to it), narrowed to letters commonly used as
 * look-alikes and kept one-to-one within Russian and within Greek so that no two words of those
 * languages become one (the library also folds и, л and п all to "n", б to "6"); its "l" for the
 * i-like letters (ι, ı, ɩ, whose capitals pass for I and l alike) is an "i" once lower-cased.
 */
export const LOOKALIKE_LETTERS: Readonly<Record<string, string>> = Object.freeze({
  // Cyrillic: the Russian letters whose small or capital form passes for a Latin one, then others.
  а: 'a',
  в: 'b',
  е: 'e',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  і: 'i',
  ј: 'j',
  ѕ: 's',
  һ: 'h',
  ԁ: 'd',
  ԛ: 'q',
  ԝ: 'w',
  ӏ: 'l',
  // Greek.
  α: 'a',
  β: 'b',
  ε: 'e',
  ζ: 'z',
  η: 'n',
  ι: 'i',
  κ: 'k',
  μ: 'm',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  ς: 'c',
  τ: 't',
  υ: 'u',
  χ: 'x',
  ϳ: 'j',
  // Latin letters outside a-z (small capitals, IPA, letters with a stroke) passing for a-z.
  ı: 'i',
  ȷ: 'j',
  ɑ: 'a',
  ɡ: 'g',
  ɩ: 'i',
  ʏ: 'y',
  ɪ: 'i',
  ʀ: 'r',
  ʜ: 'h',
  ʟ: 'l',
  ɴ: 'n',
  ʙ: 'b',
  ɢ: 'g',
  ᴀ: 'a',
  ᴄ: 'c',
  ᴅ: 'd',
  ᴇ: 'e',
  ᴊ: 'j',
  ᴋ: 'k',
  ᴍ: 'm',
  ᴏ: 'o',
  ᴘ: 'p',
  ꜱ: 's',
  ᴛ: 't',
  ᴜ: 'u',
  ᴠ: 'v',
  ᴡ: 'w',
  ᴢ: 'z',
  ø: 'o',
  ł: 'l',
  đ: 'd',
  ħ: 'h',
});

// Every pattern below is a single character class, alone or repeated with nothing after it, or a
// fixed count: each character is looked at a bounded number of times (no backtracking).
/**
 * Spacing modifier letters (U+02B0-U+02FF: the apostrophe look-alike in "canʼt") and the ordinal
 * indicators ª º (typed for the degree sign: "40º") separate words: replaced before compatibility
 * normalization, which would make letters of most of them, and after it (ŉ, ʹ decompose to one).
 */
const SEPARATING_MODIFIERS = /[\u02b0-\u02ff\u00aa\u00ba]/g;
/** Characters that decompose to, or are, combining marks (the half-width kana voicing marks decompose to one). */
const MARK_RUN = /[\p{M}\uff9e\uff9f]{30}(?=[\p{M}\uff9e\uff9f])/gu;
/** Default-ignorable code points and format characters: invisible, removed (not a space). */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}]/gu;
/** Diacritics of the combining-mark blocks (accents, cedilla, tilde, enclosing circles, ...). */
const DIACRITICS = /[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]/g;
/** Any other mark on a Latin, Greek or Cyrillic letter (those scripts have no mark a word needs). */
const MARKS_ON_LATIN_GREEK_CYRILLIC = /(?<=[\p{Script=Latin}\p{Script=Greek}\p{Script=Cyrillic}])\p{M}+/gu;
const LOOKALIKE = new RegExp(`[${Object.keys(LOOKALIKE_LETTERS).join('')}]`, 'gu');
const NOT_WORD = /[^\p{L}\p{N}\p{M}]+/gu;

/** The first MAX_ANALYSED_LENGTH code units of a text, never half of a surrogate pair. */
function bounded(text: string): string {
  if (text.length <= MAX_ANALYSED_LENGTH) return text;
  const end = /[\ud800-\udbff]/.test(text[MAX_ANALYSED_LENGTH - 1]) ? MAX_ANALYSED_LENGTH - 1 : MAX_ANALYSED_LENGTH;
  return text.slice(0, end);
}

/**
 * The form every matcher compares: Unicode compatibility normalization (NFKC's equivalence,
 * computed as NFKD: full-width and mathematical letters, ligatures), default-ignorable and format
 * characters removed (zero-width spaces and joiners, soft hyphens, byte-order marks, bidi
 * controls, variation selectors, tag characters), accents and other marks on Latin, Greek and
 * Cyrillic letters removed, lower case, look-alike letters folded (LOOKALIKE_LETTERS), anything but
 * letters, digits and marks of other scripts to single spaces. Letters of every script are kept: a
 * red-flag phrase in Russian or Japanese matches the same words typed by a patient, as both sides
 * are normalized alike.
 *
 * Linear in the text's length: a run of more than 30 combining marks gets a combining grapheme
 * joiner after every 30 (Unicode's stream-safe text format) before the compatibility
 * decomposition, whose reordering of marks otherwise costs time quadratic in a run's length; the
 * joiner is invisible and removed with the others.
 */
export function normalize(text: string): string {
  return bounded(text)
    .replace(SEPARATING_MODIFIERS, ' ')
    .replace(MARK_RUN, '$&\u034f')
    .normalize('NFKD')
    .replace(SEPARATING_MODIFIERS, ' ')
    .replace(INVISIBLE, '')
    .replace(DIACRITICS, '')
    .replace(MARKS_ON_LATIN_GREEK_CYRILLIC, '')
    .toLowerCase()
    .replace(LOOKALIKE, (c) => LOOKALIKE_LETTERS[c])
    .replace(NOT_WORD, ' ')
    .trim();
}

/** Scripts written without spaces between words: a phrase in them is looked for as a substring. */
const UNSPACED_SCRIPT = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;

/**
 * Phrase containment on normalized text: whole words, or, for a phrase in a script written
 * without spaces (Chinese, Japanese, Thai, ...), anywhere in the text. One pass over the text.
 */
export function containsPhrase(normalizedText: string, phrase: string): boolean {
  const p = normalize(phrase);
  if (!p) return false;
  if (UNSPACED_SCRIPT.test(p)) return normalizedText.includes(p);
  return ` ${normalizedText} `.includes(` ${p} `);
}

/** A phrase that can match some text: it has a letter or a digit (`...`, an emoji or spaces never can). */
export function matchablePhrase(phrase: string): boolean {
  return normalize(phrase).length > 0;
}
