/**
 * A pure decider: no I/O, time passed in (docs/building-a-context.md, "Domain").
 * `decide` returns the new events, or throws a DomainError that the edge turns into its 4xx.
 */
export interface Decider<Command, Event extends { type: string }, State> {
  initialState(): State;
  evolve(state: State, event: Event): State;
  decide(command: Command, state: State, now: Date): Event[];
}

/** A domain refusal: carries the HTTP status and the error code of the error body (docs/decisions.md). */
export class DomainError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
