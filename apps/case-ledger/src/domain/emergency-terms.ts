/**
 * Built-in emergency terms by kind (decisions 6 and 12), English and Spanish. Matched on the
 * lower-cased text with accents removed, as whole words or phrases.
 */
export const EMERGENCY_TERMS: Record<string, string[]> = {
  chest_pain: ['chest pain', 'chest pressure', 'crushing chest', 'dolor de pecho', 'dolor en el pecho', 'opresion en el pecho'],
  breathing: ["can't breathe", 'cannot breathe', 'can not breathe', 'struggling to breathe', 'trouble breathing', 'difficulty breathing', 'short of breath', 'no puedo respirar', 'no puede respirar', 'dificultad para respirar', 'falta de aire', 'me ahogo'],
  stroke: ['stroke', 'face drooping', 'slurred speech', 'one side numb', 'derrame cerebral', 'ictus', 'cara caida', 'habla arrastrada'],
  self_harm: ['suicide', 'suicidal', 'kill myself', 'hurt myself', 'end my life', 'self harm', 'self-harm', 'suicidio', 'suicidarme', 'matarme', 'quitarme la vida', 'hacerme dano'],
  severe_bleeding: ['severe bleeding', 'heavy bleeding', "bleeding won't stop", 'bleeding will not stop', 'sangrado abundante', 'sangrado grave', 'hemorragia', 'no para de sangrar'],
  unconscious: ['unconscious', 'passed out', 'unresponsive', 'fainted', 'inconsciente', 'se desmayo', 'no responde', 'desmayado'],
  allergic_reaction: ['anaphylaxis', 'anaphylactic', 'throat closing', 'throat swelling', 'severe allergic reaction', 'anafilaxia', 'reaccion alergica grave', 'se me cierra la garganta', 'garganta hinchada'],
  overdose: ['overdose', 'overdosed', 'took too many pills', 'sobredosis', 'demasiadas pastillas'],
};

function normalize(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[’`]/g, "'")
    .replace(/\s+/g, ' ');
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Kinds of emergency terms found in the text, in the order of EMERGENCY_TERMS. */
export function emergencyKinds(text: string): string[] {
  const t = normalize(text);
  const kinds: string[] = [];
  for (const [kind, terms] of Object.entries(EMERGENCY_TERMS)) {
    if (terms.some((term) => new RegExp(`(^|[^a-z0-9])${escape(normalize(term))}($|[^a-z0-9])`).test(t))) kinds.push(kind);
  }
  return kinds;
}
