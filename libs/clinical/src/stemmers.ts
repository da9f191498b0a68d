import { newStemmer } from 'snowball-stemmers';

/**
 * Stemmers for the semantic-phrase matcher (pure, no I/O): the Snowball English (Porter's revised
 * algorithm) and Spanish stemmers of the `snowball-stemmers` library.
 *
 * Only words of Latin letters a-z (as `normalize` leaves them) between 3 and MAX_STEMMED_WORD
 * letters are stemmed; any other word is its own stem. Both stemmers leave words of one or two
 * letters as they are, and no real word of these languages is longer: a longer one is kept as it
 * is, so one stem costs a bounded amount of work.
 */

/** The longest word stemmed; a longer one is kept as it is. */
export const MAX_STEMMED_WORD = 40;

const english = newStemmer('english');
const spanish = newStemmer('spanish');

const STEMMABLE = new RegExp(`^[a-z]{3,${MAX_STEMMED_WORD}}$`);

/** English stem (Snowball English, Porter's revised algorithm). */
export function porterStem(word: string): string {
  const w = word.toLowerCase();
  return STEMMABLE.test(w) ? english.stem(w) : w;
}

/** Spanish stem (Snowball Spanish). */
export function spanishStem(word: string): string {
  const w = word.toLowerCase();
  return STEMMABLE.test(w) ? spanish.stem(w) : w;
}
