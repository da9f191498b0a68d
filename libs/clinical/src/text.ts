/** Text normalization shared by every matcher: the same words match the same way everywhere. */

/**
 * Lowercase, accents folded (NFD without the combining diacritics U+0300-U+036F), anything but
 * letters, digits and other combining marks (of any script: Cyrillic, Greek, Arabic, Han, ...) to
 * spaces, single spaces. Letters of every script are kept: a red-flag phrase in Russian or
 * Japanese must match the same words typed by a patient.
 */
export function normalize(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    // Spacing modifier letters (U+02B0-U+02FF: the apostrophe look-alike in "canʼt") and the
    // ordinal indicators ª º (typed for the degree sign: "40º") separate words, as before.
    .replace(/[\u02b0-\u02ff\u00aa\u00ba]/g, ' ')
    .replace(/[^\p{L}\p{N}\p{M}]+/gu, ' ')
    .trim();
}

/** Scripts written without spaces between words: a phrase in them is looked for as a substring. */
const UNSPACED_SCRIPT = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;

/**
 * Phrase containment on normalized text: whole words, or, for a phrase in a script written
 * without spaces (Chinese, Japanese, Thai, ...), anywhere in the text.
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
