import { Decider, DomainError } from '@svc/decider';
import { RedFlags, Tier } from './red-flags';
import { matchablePhrase, matchableSemanticPhrase } from '@svc/clinical';

export type QuestionType = 'scale' | 'yes_no' | 'text';
export interface Question {
  key: string;
  text: string;
  type: QuestionType;
  min?: number;
  max?: number;
  higherIsBetter?: boolean;
}

export interface ProtocolDefinition {
  programKey: string;
  name: string;
  defaultCadenceDays: number;
  questions: Question[];
  redFlags: RedFlags;
}

export interface ProtocolView extends ProtocolDefinition {
  id: string;
  active: boolean;
  createdAt: string;
}

export type ProtocolCommand =
  | ({ type: 'CreateProtocol'; protocolId: string; organizationId: string; environmentId: string } & ProtocolDefinition)
  | { type: 'ActivateProtocol' }
  | { type: 'DeactivateProtocol' };

export type ProtocolEvent =
  | ({ type: 'ProtocolCreated'; protocolId: string; organizationId: string; environmentId: string; createdAt: string } & ProtocolDefinition)
  | { type: 'ProtocolActivated'; protocolId: string; at: string }
  | { type: 'ProtocolDeactivated'; protocolId: string; at: string };

export interface ProtocolState {
  protocol: (ProtocolView & { organizationId: string; environmentId: string }) | null;
}

export const QUESTION_KEY = /^[a-z][a-z0-9_]{0,39}$/;
export const PROGRAM_KEY = /^[a-z0-9][a-z0-9-]{0,62}[a-z0-9]$/;

/** Scale bounds with the defaults of docs/decisions.md, "Patient pathway" (0..10). */
export function scaleBounds(q: Question): { min: number; max: number } {
  return { min: q.min ?? 0, max: q.max ?? 10 };
}

/**
 * Cross-field rules of a protocol body that a DTO cannot express (pure): unique question keys,
 * scale min < max, min/max/higherIsBetter only on scale questions, score rules naming an existing
 * scale question. Returns `{ path, message }` for each offence.
 */
export function protocolProblems(def: ProtocolDefinition): { path: string; message: string }[] {
  const out: { path: string; message: string }[] = [];
  const byKey = new Map<string, Question>();
  def.questions.forEach((q, i) => {
    if (byKey.has(q.key)) out.push({ path: `questions[${i}].key`, message: `duplicate question key ${q.key}` });
    else byKey.set(q.key, q);
    if (q.type === 'scale') {
      const { min, max } = scaleBounds(q);
      if (!(min < max)) out.push({ path: `questions[${i}].max`, message: 'max must be greater than min' });
    } else {
      for (const f of ['min', 'max', 'higherIsBetter'] as const) {
        if (q[f] !== undefined) out.push({ path: `questions[${i}].${f}`, message: `${f} is only allowed on scale questions` });
      }
    }
  });
  (def.redFlags.scores ?? []).forEach((s, i) => {
    const q = byKey.get(s.question);
    if (!q) out.push({ path: `redFlags.scores[${i}].question`, message: `no question with key ${s.question}` });
    else if (q.type !== 'scale') out.push({ path: `redFlags.scores[${i}].question`, message: 'score rules need a scale question' });
  });
  const dupes = (list: { phrase: string }[] | undefined, path: string) => {
    const seen = new Set<string>();
    (list ?? []).forEach((p, i) => {
      if (seen.has(p.phrase)) out.push({ path: `${path}[${i}].phrase`, message: 'duplicate phrase' });
      seen.add(p.phrase);
    });
  };
  dupes(def.redFlags.phrases, 'redFlags.phrases');
  dupes(def.redFlags.semanticPhrases, 'redFlags.semanticPhrases');
  // A red flag that can never fire is refused, not stored as if it watched for something.
  (def.redFlags.phrases ?? []).forEach((p, i) => {
    if (!matchablePhrase(p.phrase)) out.push({ path: `redFlags.phrases[${i}].phrase`, message: 'must contain a letter or digit (it could never match)' });
  });
  (def.redFlags.semanticPhrases ?? []).forEach((p, i) => {
    if (!matchableSemanticPhrase(p.phrase))
      out.push({ path: `redFlags.semanticPhrases[${i}].phrase`, message: 'must contain a word that is not a stop word (it could never match)' });
  });
  return out;
}

export const protocolDecider: Decider<ProtocolCommand, ProtocolEvent, ProtocolState> = {
  initialState: () => ({ protocol: null }),
  evolve(state, event) {
    switch (event.type) {
      case 'ProtocolCreated': {
        const { type: _t, protocolId, createdAt, ...rest } = event;
        void _t;
        return { protocol: { id: protocolId, createdAt, active: false, ...rest } };
      }
      case 'ProtocolActivated':
        return state.protocol ? { protocol: { ...state.protocol, active: true } } : state;
      case 'ProtocolDeactivated':
        return state.protocol ? { protocol: { ...state.protocol, active: false } } : state;
      default: {
        const never: never = event;
        return never;
      }
    }
  },
  decide(command, state, now) {
    switch (command.type) {
      case 'CreateProtocol': {
        // First writer of the protocol stream wins: a concurrent create that took over the same
        // programKey claim must not answer 201 with someone else's protocol.
        if (state.protocol) throw new DomainError(409, 'DUPLICATE_KEY', `A protocol with programKey ${command.programKey} exists in this environment`);
        const { type: _t, ...rest } = command;
        void _t;
        return [{ type: 'ProtocolCreated', ...rest, createdAt: now.toISOString() }];
      }
      case 'ActivateProtocol':
        if (!state.protocol) throw new DomainError(404, 'NOT_FOUND', 'Protocol not found');
        return state.protocol.active ? [] : [{ type: 'ProtocolActivated', protocolId: state.protocol.id, at: now.toISOString() }];
      case 'DeactivateProtocol':
        if (!state.protocol) throw new DomainError(404, 'NOT_FOUND', 'Protocol not found');
        return state.protocol.active ? [{ type: 'ProtocolDeactivated', protocolId: state.protocol.id, at: now.toISOString() }] : [];
      default: {
        const never: never = command;
        return never;
      }
    }
  },
};

export type { Tier };
