import { emergencyKinds, normalize, porterStem, semanticMatch, spanishStem } from '@svc/clinical';
import { evaluateRedFlags, priorityOf } from '../src/domain/red-flags';

describe('stemmers', () => {
  it('Porter: the classic examples', () => {
    const cases: [string, string][] = [
      ['caresses', 'caress'],
      ['ponies', 'poni'],
      ['cats', 'cat'],
      ['feed', 'feed'],
      ['agreed', 'agre'],
      ['plastered', 'plaster'],
      ['motoring', 'motor'],
      ['sing', 'sing'],
      ['conflated', 'conflat'],
      ['hopping', 'hop'],
      ['falling', 'fall'],
      ['filing', 'file'],
      ['happy', 'happi'],
      ['relational', 'relat'],
      ['conditional', 'condit'],
      ['hopeful', 'hope'],
      ['goodness', 'good'],
      ['revival', 'reviv'],
      ['adjustment', 'adjust'],
      ['adoption', 'adopt'],
      ['controll', 'control'],
      ['swelling', 'swell'],
      ['swollen', 'swollen'],
    ];
    for (const [w, s] of cases) expect([w, porterStem(w)]).toEqual([w, s]);
  });

  it('Spanish: gender, number and verb endings meet', () => {
    expect(spanishStem('hinchada')).toBe(spanishStem('hinchado'));
    expect(spanishStem('hinchados')).toBe(spanishStem('hinchada'));
    expect(spanishStem('piernas')).toBe(spanishStem('pierna'));
    expect(spanishStem('sangrando')).toBe('sangr');
    expect(spanishStem('sol')).toBe('sol');
  });
});

describe('phrases in any script', () => {
  const rule = (phrase: string) => ({ phrase, tier: 'urgent' as const });
  it.each([
    ['боль', 'сильная боль в спине', true],
    ['Боль', 'СИЛЬНАЯ БОЛЬ', true],
    ['боль', 'больница рядом', false], // whole words
    ['πόνος', 'έχω πόνος στο κεφάλι', true],
    ['ألم', 'عندي ألم شديد', true],
    ['頭痛', '今日は頭痛がします', true], // no spaces between words: anywhere in the text
    ['頭痛', '頭痛', true],
    ['腹痛', '今日は頭痛がします', false],
    ['straße', 'an der Straße', true],
    ['náusea', 'tengo nausea', true],
    ['fiebre de 40', 'tengo fiebre de 40º', true], // º typed for the degree sign
    ['39 grados', 'tengo 39ª grados', true],
  ])('%s in %s: %s', (phrase, text, expected) => {
    expect(evaluateRedFlags({ phrases: [rule(phrase)], emergencyTerms: false }, {}, [text]).length > 0).toBe(expected);
  });

  it('semantic phrases match words of any script (stems are Latin-only; the word itself still counts)', () => {
    expect(semanticMatch('у меня сильная боль', 'боль')).toBe(true);
    expect(semanticMatch('боль сильная', 'сильная боль')).toBe(true);
    expect(semanticMatch('у меня всё хорошо', 'боль')).toBe(false);
  });

  it('normalizes every script the same way, Latin accents folded', () => {
    expect(normalize('  ¡Dolor FUERTE!  ')).toBe('dolor fuerte');
    // Look-alike letters (Cyrillic с, н, а, о) are folded to Latin on both sides alike.
    expect(normalize('Сильная, боль!')).toBe(normalize('сильная боль'));
    expect(normalize('Сильная, боль!')).toBe('cильhaя бoль');
    expect(normalize('I 😀 can’t')).toBe('i can t');
  });
});

describe('semantic phrases', () => {
  it('match across stems, word order, synonyms, accents and the two languages', () => {
    expect(semanticMatch('my legs are swollen', 'leg swelling')).toBe(true);
    expect(semanticMatch('swelling in both ankles', 'leg swelling')).toBe(true);
    expect(semanticMatch('tengo la pierna muy hinchada', 'leg swelling')).toBe(true);
    expect(semanticMatch('HINCHAZÓN en el tobillo', 'leg swelling')).toBe(true);
    expect(semanticMatch('I have a terrible migraine', 'bad headache')).toBe(true);
    expect(semanticMatch('me duele mucho la cabeza', 'head pain')).toBe(true);
    expect(semanticMatch('I forgot my pills yesterday', 'missed medication')).toBe(true);
  });

  it('do not match when a concept is missing', () => {
    expect(semanticMatch('my arm is swollen', 'leg swelling')).toBe(false);
    expect(semanticMatch('my leg hurts', 'leg swelling')).toBe(false);
    expect(semanticMatch('', 'leg swelling')).toBe(false);
    expect(semanticMatch('anything', 'the of and')).toBe(false);
  });
});

describe('built-in emergency terms', () => {
  it('find every kind in English and Spanish, accents or not', () => {
    const en: [string, string][] = [
      ['I have crushing chest pain', 'chest_pain'],
      ["I can't breathe", 'breathing'],
      ['her face is drooping and slurred speech', 'stroke'],
      ['I want to kill myself', 'self_harm'],
      ['the cut is bleeding heavily', 'severe_bleeding'],
      ['he passed out', 'unconscious'],
      ['my throat is closing', 'allergic_reaction'],
      ['I took too many pills', 'overdose'],
    ];
    const es: [string, string][] = [
      ['tengo dolor de pecho', 'chest_pain'],
      ['no puedo respirar', 'breathing'],
      ['creo que es un derrame cerebral', 'stroke'],
      ['quiero quitarme la vida', 'self_harm'],
      ['hay una hemorragia', 'severe_bleeding'],
      ['me desmayé', 'unconscious'],
      ['tengo la lengua hinchada', 'allergic_reaction'],
      ['tomé una sobredosis', 'overdose'],
      ['me desmaye esta manana', 'unconscious'],
      ['Tengo un dolor fuerte en el pecho', 'chest_pain'],
    ];
    for (const [text, kind] of [...en, ...es]) expect([text, emergencyKinds(text)]).toEqual([text, expect.arrayContaining([kind])]);
    expect(emergencyKinds('feeling good today, a little tired')).toEqual([]);
  });
});

describe('evaluateRedFlags', () => {
  const flags = {
    scores: [
      { question: 'pain', tier: 'urgent' as const, op: '>=' as const, value: 7 },
      { question: 'mood', tier: 'routine' as const, op: '<=' as const, value: 2 },
      { question: 'pain', tier: 'emergency' as const, op: '>=' as const, value: 10 },
    ],
    phrases: [{ phrase: 'Wound is leaking', tier: 'urgent' as const }],
    semanticPhrases: [{ phrase: 'leg swelling', tier: 'routine' as const }],
  };

  it('gives the exact matched-rule strings', () => {
    const m = evaluateRedFlags(flags, { pain: 7, mood: 2 }, ['The wound is LEAKING', 'my ankles are swollen']);
    expect(m.map((x) => x.rule)).toEqual(['score:urgent:pain>=7', 'score:routine:mood<=2', 'phrase:Wound is leaking', 'semantic_phrase:leg swelling']);
    expect(priorityOf(m)).toBe('urgent');
  });

  it('thresholds are inclusive; routine only when all matches are routine; none is null', () => {
    expect(evaluateRedFlags(flags, { pain: 6, mood: 3 }, []).map((x) => x.rule)).toEqual([]);
    expect(priorityOf(evaluateRedFlags(flags, { mood: 0 }, []))).toBe('routine');
    expect(priorityOf(evaluateRedFlags(flags, { pain: 10 }, []))).toBe('emergency');
    expect(priorityOf([])).toBeNull();
  });

  it('phrases match whole words only', () => {
    expect(evaluateRedFlags({ phrases: [{ phrase: 'leak', tier: 'urgent' }] }, {}, ['it is leaking'])).toEqual([]);
    expect(evaluateRedFlags({ phrases: [{ phrase: 'leak', tier: 'urgent' }] }, {}, ['a small leak.'])).toEqual([{ rule: 'phrase:leak', tier: 'urgent' }]);
  });

  it('emergency terms are tier emergency, on by default, off when false', () => {
    expect(evaluateRedFlags({}, {}, ['chest pain since this morning'])).toEqual([{ rule: 'emergency_terms:chest_pain', tier: 'emergency' }]);
    expect(evaluateRedFlags({ emergencyTerms: false }, {}, ['chest pain since this morning'])).toEqual([]);
  });

  it('normalizes accents and punctuation', () => {
    expect(normalize('  ¡Me DESMAYÉ,  otra vez! ')).toBe('me desmaye otra vez');
  });
});
