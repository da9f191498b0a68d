/** The two languages of the pages (docs/decisions.md, "Pages for people"): Spanish for a browser that asks for it first, else English. */
export type Lang = 'en' | 'es';

export function browserLang(): Lang {
  const list = (navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || 'en']).map((l) => l.toLowerCase());
  for (const l of list) {
    if (l.startsWith('es')) return 'es';
    if (l.startsWith('en')) return 'en';
  }
  return 'en';
}

export const LANG_NAMES: Record<Lang, string> = { en: 'English', es: 'Español' };
