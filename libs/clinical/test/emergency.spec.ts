import { EMERGENCY_KINDS, emergencyKinds } from '@svc/clinical';
import { emergencyKinds as agentKinds } from '../../../apps/workflow-engine/src/domain/agent';

describe('the service emergency words', () => {
  it('are one list for check-ins, staff chat and the patient agent', () => {
    expect(agentKinds).toBe(emergencyKinds);
  });

  it.each([
    ['I think I am having a heart attack', ['chest_pain']],
    ['me duele mucho el pecho', ['chest_pain']],
    ["My mother can't breathe", ['breathing']],
    ['Tiene la cara caída y habla arrastrada', ['stroke']],
    ['I want to end my life', ['self_harm']],
    ['no para de sangrar', ['severe_bleeding']],
    ['she passed out in the kitchen', ['unconscious']],
    ['se me cierra la garganta', ['allergic_reaction']],
    ['took too many pills', ['overdose']],
    // a teammate's or relative's words (third person, infinitive)
    ['patient says he wants to kill himself', ['self_harm']],
    ['she wants to end her life', ['self_harm']],
    ['They are thinking of killing themselves', ['self_harm']],
    ['el paciente quiere suicidarse', ['self_harm']],
    ['dice que quiere quitarse la vida', ['self_harm']],
    ['he has a crushing pain in his chest', ['chest_pain']],
    ['she is slurring her words', ['stroke']],
    // modifier-letter apostrophe (U+02BC), as phone keyboards type it
    ['I can\u02bct breathe', ['breathing']],
    ['he won\u02bct wake up', ['unconscious']],
    ['refill request for strokes of luck', []],
    ['where is my order', []],
  ])('%s', (text, kinds) => {
    expect(emergencyKinds(text)).toEqual(kinds);
  });

  it('covers every kind of decisions section 12', () => {
    expect([...EMERGENCY_KINDS]).toEqual(['chest_pain', 'breathing', 'stroke', 'self_harm', 'severe_bleeding', 'unconscious', 'allergic_reaction', 'overdose']);
  });
});
