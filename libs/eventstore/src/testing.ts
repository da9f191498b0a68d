/// <reference types="jest" />
// (testing.ts is compiled by the build too, whose tsconfig only loads Node types.)
import { Decider, DomainError } from './decider';

/**
 * Given/when/then for deciders:
 *   deciderSpec(decider).given([...events]).when(command, now).then([...events])
 *   ... .thenThrows('SEQUENCE_CONFLICT')
 */
export function deciderSpec<C, E extends { type: string }, S>(decider: Decider<C, E, S>) {
  return {
    given(events: E[]) {
      return {
        when(command: C, now: Date = new Date('2026-01-01T00:00:00Z')) {
          const run = () => {
            const state = events.reduce(decider.evolve, decider.initialState());
            return decider.decide(command, state, now);
          };
          return {
            then(expected: E[]) {
              expect(run()).toEqual(expected);
            },
            thenThrows(code: string) {
              let caught: unknown;
              try {
                run();
              } catch (e) {
                caught = e;
              }
              expect(caught).toBeInstanceOf(DomainError);
              expect((caught as DomainError).code).toBe(code);
            },
            result: run,
          };
        },
      };
    },
  };
}
