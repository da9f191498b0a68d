import { randomUUID } from 'node:crypto';
import type { Decider } from '@svc/decider';
import { EventMetadata, EventStore, ExpectedRevision, NewEvent, RecordedEvent, WrongExpectedRevisionError } from './types';

/** The decider shape and the domain refusal live in the dependency-free core; re-exported for callers of @svc/eventstore. */
export type { Decider } from '@svc/decider';
export { DomainError } from '@svc/decider';

export interface CommandContext {
  correlationId?: string;
  causationId?: string | null;
  organizationId?: string | null;
  environmentId?: string | null;
  actor: string;
}

export interface HandleResult<Event, State> {
  /** Events appended by this command ([] when the decider decided nothing). */
  newEvents: Event[];
  /** State after the new events. */
  state: State;
  /** Global position of the last appended event, or of nothing (0) when none was appended. */
  position: number;
  /** Revision of the stream after the command (-1 = no stream). */
  revision: number;
}

export interface CommandHandlerOptions {
  /** How many times a concurrency conflict is retried (re-read, re-decide). */
  maxRetries?: number;
  /**
   * Remember the folded state and revision of up to this many streams after each command (default
   * 0: off). A command that comes without a `from` then starts from the remembered state instead
   * of reading and folding the whole stream. It is only a starting guess: the append carries the
   * remembered revision, so if the stream moved on (another process or handler) the store refuses
   * it and the handler re-reads; and a refusal or an empty decision made on a remembered state is
   * decided again on the stream as read, so a stale state never answers for the stream. Only for
   * deciders whose `evolve` never mutates the state it is given (the "deciders are pure" rule).
   */
  rememberStates?: number;
}

/**
 * The one command-handler path: read the stream, fold, decide, append with the revision that
 * was read (or `no_stream`), retry a bounded number of times on a concurrency conflict.
 *
 * Commands of one stream given to the same handler run one after another (in the order they came):
 * in one process they never race each other's append, so a burst of commands on one stream (200
 * messages to one conversation at once) costs no retries and cannot exhaust them. The bounded
 * retry is for writers this handler does not see (other processes, other handlers of the stream).
 */
export class CommandHandler<Command, Event extends { type: string }, State> {
  /** Per stream, the end of the chain of commands running or waiting on it. */
  private readonly turns = new Map<string, Promise<void>>();

  constructor(
    private readonly store: EventStore,
    private readonly decider: Decider<Command, Event, State>,
    private readonly now: () => Date,
    private readonly options: CommandHandlerOptions = {},
  ) {
    this.memory = (options.rememberStates ?? 0) > 0 ? new Map() : null;
  }

  async load(streamId: string): Promise<{ state: State; revision: number; events: RecordedEvent[] }> {
    const events = await this.store.readStream(streamId);
    let state = this.decider.initialState();
    for (const e of events) state = this.decider.evolve(state, { type: e.type, ...(e.data as object) } as unknown as Event);
    return { state, revision: events.length ? events[events.length - 1].revision : -1, events };
  }

  /**
   * `from`: the stream's state and revision as the caller just loaded them (saves a second read and
   * fold); if the stream moved on since, the append's revision check fails and it re-reads.
   */
  handle(streamId: string, command: Command, ctx: CommandContext, from?: { state: State; revision: number }): Promise<HandleResult<Event, State>> {
    return this.inTurn(streamId, () => this.handleNow(streamId, command, ctx, from));
  }

  /**
   * Runs `work` in the stream's turn: after every command given earlier for `streamId` has settled
   * and before any given later. `work` gets `load` (the stream as read now) and `handle`, which runs
   * commands in that same turn (calling the handler's own `handle` for the stream from `work` would
   * wait for `work` itself). For a step that must not interleave with the stream's other commands,
   * such as a call to another context before a command is recorded.
   */
  exclusive<T>(
    streamId: string,
    work: (turn: {
      load(): Promise<{ state: State; revision: number; events: RecordedEvent[] }>;
      handle(command: Command, ctx: CommandContext): Promise<HandleResult<Event, State>>;
    }) => Promise<T>,
  ): Promise<T> {
    return this.inTurn(streamId, () => work({ load: () => this.load(streamId), handle: (command, ctx) => this.handleNow(streamId, command, ctx, undefined) }));
  }

  /**
   * Runs `work` once every command given earlier for `streamId` has settled. The chain only
   * orders: a failed command does not stop the next.
   */
  private inTurn<T>(streamId: string, work: () => Promise<T>): Promise<T> {
    const before = this.turns.get(streamId);
    const run = before ? before.then(work) : work();
    const done = run.then(
      () => undefined,
      () => undefined,
    );
    this.turns.set(streamId, done);
    void done.then(() => {
      if (this.turns.get(streamId) === done) this.turns.delete(streamId);
    });
    return run;
  }

  private async handleNow(
    streamId: string,
    command: Command,
    ctx: CommandContext,
    from: { state: State; revision: number } | undefined,
  ): Promise<HandleResult<Event, State>> {
    const maxRetries = this.options.maxRetries ?? 20;
    let remembered = false;
    if (!from && this.memory) {
      from = this.memory.get(streamId);
      remembered = from !== undefined;
    }
    for (let attempt = 0; ; attempt++) {
      const guess = attempt === 0 ? from : undefined;
      const { state, revision } = guess ?? (await this.load(streamId));
      const now = this.now();
      let newEvents: Event[];
      try {
        newEvents = this.decider.decide(command, state, now);
      } catch (err) {
        if (guess && remembered) {
          // Decided again on the stream as read (see rememberStates).
          this.memory!.delete(streamId);
          from = undefined;
          attempt--;
          continue;
        }
        throw err;
      }
      if (newEvents.length === 0) {
        if (guess && remembered) {
          from = undefined;
          attempt--;
          continue;
        }
        this.remember(streamId, state, revision);
        return { newEvents, state, position: 0, revision };
      }
      let next = state;
      for (const e of newEvents) next = this.decider.evolve(next, e);
      const expected: ExpectedRevision = revision < 0 ? 'no_stream' : revision;
      const toAppend = this.toNewEvents(newEvents, ctx, now);
      try {
        const r = await this.store.append(streamId, toAppend, expected);
        this.remember(streamId, next, r.nextExpectedRevision);
        return { newEvents, state: next, position: r.position, revision: r.nextExpectedRevision };
      } catch (err) {
        this.memory?.delete(streamId);
        if (err instanceof WrongExpectedRevisionError && attempt < maxRetries) {
          await new Promise((res) => setImmediate(res));
          continue;
        }
        throw err;
      }
    }
  }

  /** Folded states by stream (rememberStates), oldest first. */
  private readonly memory: Map<string, { state: State; revision: number }> | null;

  private remember(streamId: string, state: State, revision: number): void {
    const memory = this.memory;
    if (!memory || revision < 0) return;
    memory.delete(streamId); // re-inserted last: the map stays in order of last use
    memory.set(streamId, { state, revision });
    if (memory.size > this.options.rememberStates!) memory.delete(memory.keys().next().value as string);
  }

  /**
   * Several commands for one stream in ONE append (one read, one fold, one write): each command is
   * decided on the state the earlier ones left, in order. A command whose `decide` throws gets
   * that error alone and adds nothing. A concurrency conflict re-reads and re-decides them all
   * (bounded like `handle`). Every result's `position` is the position of the batch's last event
   * (at or after the command's own: waiting for it is enough for read-your-writes).
   * `from` may give the stream's state and revision as the caller last knew them (saves the read and
   * fold); the decider's `evolve` may then be handed that very state object.
   */
  handleAll(
    streamId: string,
    items: { command: Command; ctx: CommandContext }[],
    from?: { state: State; revision: number },
  ): Promise<({ ok: true; result: HandleResult<Event, State> } | { ok: false; error: unknown })[]> {
    return this.inTurn(streamId, () => this.handleAllNow(streamId, items, from));
  }

  private async handleAllNow(
    streamId: string,
    items: { command: Command; ctx: CommandContext }[],
    from: { state: State; revision: number } | undefined,
  ): Promise<({ ok: true; result: HandleResult<Event, State> } | { ok: false; error: unknown })[]> {
    // Writes the stream past what rememberStates holds: forgotten (the next command reads it).
    this.memory?.delete(streamId);
    const maxRetries = this.options.maxRetries ?? 20;
    for (let attempt = 0; ; attempt++) {
      // `from`: a state the caller kept from an earlier result (used on the first attempt only;
      // if the stream moved on since, the append's revision check fails and we re-read).
      const { state: initial, revision } = attempt === 0 && from ? from : await this.load(streamId);
      const now = this.now();
      let state = initial;
      const decided: ({ newEvents: Event[]; state: State } | { error: unknown })[] = [];
      const toAppend: NewEvent[] = [];
      for (const { command, ctx } of items) {
        let newEvents: Event[];
        try {
          newEvents = this.decider.decide(command, state, now);
        } catch (error) {
          decided.push({ error });
          continue;
        }
        for (const e of newEvents) state = this.decider.evolve(state, e);
        decided.push({ newEvents, state });
        toAppend.push(...this.toNewEvents(newEvents, ctx, now));
      }
      let position = 0;
      let last = revision;
      if (toAppend.length) {
        try {
          const r = await this.store.append(streamId, toAppend, revision < 0 ? 'no_stream' : revision);
          position = r.position;
          last = r.nextExpectedRevision;
        } catch (err) {
          if (err instanceof WrongExpectedRevisionError && attempt < maxRetries) {
            await new Promise((res) => setImmediate(res));
            continue;
          }
          throw err;
        }
      }
      return decided.map((d) =>
        'error' in d
          ? { ok: false as const, error: d.error }
          : { ok: true as const, result: { newEvents: d.newEvents, state: d.state, position: d.newEvents.length ? position : 0, revision: last } },
      );
    }
  }

  private toNewEvents(newEvents: Event[], ctx: CommandContext, now: Date): NewEvent[] {
    const correlationId = ctx.correlationId ?? randomUUID();
    return newEvents.map((e) => {
      const { type, ...data } = e as { type: string } & Record<string, unknown>;
      const metadata: EventMetadata = {
        eventId: randomUUID(),
        correlationId,
        causationId: ctx.causationId ?? null,
        organizationId: ctx.organizationId ?? null,
        environmentId: ctx.environmentId ?? null,
        actor: ctx.actor,
        recordedAt: now.toISOString(),
      };
      return { type, data, metadata };
    });
  }
}

/** Event as stored (type + data) turned back into the decider's event union member. */
export function toDomainEvent<Event>(e: RecordedEvent): Event {
  return { type: e.type, ...(e.data as object) } as unknown as Event;
}
