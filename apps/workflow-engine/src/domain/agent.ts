/**
 * The patient agent's pure decisions (docs/decisions.md, "Widget sessions and identity tokens"): emergency terms, health questions and
 * trigger-phrase matching, English and Spanish, accent-insensitive.
 */
import { containsPhrase, normalize } from '@svc/clinical';
import { Definition } from './definition';

export const EMERGENCY_GUIDANCE =
  'This may be an emergency. Call your local emergency number (911 in the US) now or go to the nearest emergency room. / Esto puede ser una emergencia: llame al número de emergencias (911) o acuda a urgencias ahora.';
/** Added only when a case was requested for an identified patient. */
export const EMERGENCY_ALERTED = 'We have alerted your care team. / Hemos avisado a su equipo de atención.';

/** Health-question heuristics: symptoms, medication, dose, side effects, pain, ... */
const HEALTH_TERMS = [
  'symptom',
  'medication',
  'medicine',
  'dose',
  'dosage',
  'side effect',
  'pain',
  'hurts',
  'fever',
  'rash',
  'nausea',
  'vomit',
  'dizzy',
  'headache',
  'prescription',
  'pill',
  'injection',
  'swelling',
  'infection',
  'bleeding',
  'cough',
  'diarrhea',
  'allergic',
  'sintoma',
  'medicamento',
  'medicina',
  'dosis',
  'efecto secundario',
  'efectos secundarios',
  'dolor',
  'duele',
  'fiebre',
  'sarpullido',
  'nauseas',
  'vomito',
  'mareo',
  'receta',
  'pastilla',
  'inyeccion',
  'hinchazon',
  'infeccion',
  'sangrado',
  'tos',
  'diarrea',
  'alergia',
];
/** Words that make a health question urgent rather than routine. */
const URGENT_TERMS = [
  'severe',
  'worse',
  'worsening',
  'getting worse',
  'high fever',
  'a lot of pain',
  'grave',
  'peor',
  'empeora',
  'fiebre alta',
  'mucho dolor',
  'intenso',
];

/** Urgency words of a health question: a multi-word term also inside longer words ("high fevers"). */
const mentions = (text: string, phrase: string) => {
  const p = normalize(phrase);
  if (!p) return false;
  return ` ${text} `.includes(` ${p} `) || (p.includes(' ') && text.includes(p));
};

const wordStem = (text: string, term: string) => {
  const t = normalize(term);
  return new RegExp(`(^|\\s)${t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`).test(text);
};

/** The service's emergency words (one list for every context, libs/clinical). */
export { emergencyKinds } from '@svc/clinical';

export function healthQuestion(message: string): { matched: boolean; priority: 'urgent' | 'routine' } {
  const t = normalize(message);
  const matched = HEALTH_TERMS.some((term) => wordStem(t, term));
  return { matched, priority: matched && URGENT_TERMS.some((u) => mentions(t, u)) ? 'urgent' : 'routine' };
}

/**
 * A workflow matches when a trigger phrase is in the message and no exclude phrase is, as whole
 * words (or, in a script written without spaces, anywhere): "where is my order" is not in
 * "somewhere is my orderly", which would otherwise trigger a signed order lookup.
 */
export function triggerMatches(def: Definition, message: string): boolean {
  const t = normalize(message);
  const hit = (def.triggerPhrases ?? []).some((p) => containsPhrase(t, p));
  return hit && !(def.excludePhrases ?? []).some((p) => containsPhrase(t, p));
}

export const GENERIC_REPLY =
  "I'm not sure I can help with that here. Would you like me to connect you with our team? / ¿Quiere que le comunique con nuestro equipo?";
