import { normalize, porterStem, spanishStem, tokenForms } from '@svc/clinical';

/** The synonym table reached through the Snowball stemmers: inflected words still meet their concept. */
describe('concepts of inflected words (English and Spanish)', () => {
  const concept = (word: string) => tokenForms(normalize(word)).find((f) => f.startsWith('#')) ?? null;

  it.each([
    ['swells', 'swell'],
    ['swelled', 'swell'],
    ['swollen', 'swell'],
    ['aches', 'pain'],
    ['ached', 'pain'],
    ['hurting', 'pain'],
    ['hurts', 'pain'],
    ['bleeds', 'bleed'],
    ['bled', 'bleed'],
    ['vomited', 'vomit'],
    ['coughed', 'cough'],
    ['rashes', 'rash'],
    ['fevers', 'fever'],
    ['headaches', 'headache'],
    ['migraines', 'headache'],
    ['legs', 'leg'],
    ['ankles', 'leg'],
    ['arms', 'arm'],
    ['wounds', 'wound'],
    ['infected', 'infection'],
    ['pills', 'medication'],
    ['medications', 'medication'],
    ['missed', 'miss'],
    ['skipped', 'miss'],
    ['worsening', 'worse'],
    ['tingling', 'numb'],
    ['palpitations', 'palpitation'],
    ['breathes', 'breath'],
    ['struggled', 'difficulty'],
    ['difficulties', 'difficulty'],
    ['exhausted', 'tired'],
    ['worried', 'anxious'],
    ['sleeping', 'sleep'],
    ['stomachs', 'stomach'],
    ['duelen', 'pain'],
    ['dolía', 'pain'],
    ['dolían', 'pain'],
    ['dolores', 'pain'],
    ['hinchadas', 'swell'],
    ['hinchazones', 'swell'],
    ['sangraba', 'bleed'],
    ['sangrando', 'bleed'],
    ['tosía', 'cough'],
    ['tosiendo', 'cough'],
    ['cansadas', 'tired'],
    ['agotados', 'tired'],
    ['mareada', 'dizzy'],
    ['deprimidas', 'sad'],
    ['ansiosos', 'anxious'],
    ['preocupadas', 'anxious'],
    ['dormía', 'sleep'],
    ['heridas', 'wound'],
    ['infectadas', 'infection'],
    ['pastillas', 'medication'],
    ['medicamentos', 'medication'],
    ['olvidé', 'miss'],
    ['piernas', 'leg'],
    ['tobillos', 'leg'],
    ['labios', 'lips'],
    ['gargantas', 'throat'],
    ['palpitaciones', 'palpitation'],
    ['respirando', 'breath'],
  ])('%s → #%s', (word, expected) => {
    expect(concept(word)).toBe(`#${expected}`);
  });

  it('words without a concept are their own stems in both languages', () => {
    expect(tokenForms('gardening')).toEqual(['gardening', 'garden']);
    expect(tokenForms('ventanas')).toEqual(['ventanas', 'ventana', 'ventan']);
    expect(tokenForms('сильная')).toEqual(['сильная']); // not a-z: not stemmed
  });

  it('only words of a-z from 3 to 40 letters are stemmed', () => {
    expect(porterStem('running')).toBe('run');
    expect(spanishStem('corriendo')).toBe('corr');
    expect(porterStem('x1ing')).toBe('x1ing');
    expect(porterStem(`${'y'.repeat(35)}ations`)).toBe(`${'y'.repeat(35)}ations`); // 41 letters
    expect(porterStem(`${'y'.repeat(34)}ations`)).toBe('y'.repeat(34)); // 40 letters
  });
});
