import { Injectable } from '@nestjs/common';
import { InFlight } from '@svc/platform';

/**
 * How long a switch-off (deactivate, archive) waits for the Destination calls already under way
 * for its workflow in this process: a call lasts at most 5 s (destination-client caps every
 * timeout there), plus a margin for the liveness read before it.
 */
export const SWITCH_OFF_DRAIN_MS = 6_000;

/**
 * "Switched off means off" for calls in flight (docs/decisions.md, "Workflows", "Switch-off"). Every
 * Destination call of a live (non-test) run goes through `call`: it is registered first, then the
 * workflow's liveness is read from its stream, then the call is made. A switch-off appends its
 * event, then `drain`s the calls registered at that moment before it answers. So each call either
 * was registered before the drain looked (the switch-off's answer waits for it to end), or read
 * liveness after the switch-off's event was stored (and is not made). In-process only: in
 * distributed mode a replica's call checked before the switch-off's append is not waited for.
 */
@Injectable()
export class SwitchOffGate {
  /** Per workflow, the calls registered and not ended. */
  private readonly inflight = new InFlight<object>();

  /**
   * Runs `call` unless `live()` (read after the call is registered) says the workflow is off;
   * null when it was not made.
   */
  call<T>(workflowId: string, live: () => Promise<boolean>, call: () => Promise<T>): Promise<T | null> {
    return this.inflight.run(workflowId, {}, async () => ((await live()) ? call() : null));
  }

  /**
   * Waits until every call registered for the workflow now has ended (calls registered later read
   * the switch-off and are not made), at most `maxMs`; false when some were still under way then.
   */
  async drain(workflowId: string, maxMs = SWITCH_OFF_DRAIN_MS): Promise<boolean> {
    const pending = this.inflight.current(workflowId).map((e) => e.ended);
    if (pending.length === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((r) => (timer = setTimeout(() => r(false), maxMs)));
    try {
      return await Promise.race([Promise.all(pending).then(() => true as const), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Calls under way for the workflow in this process (tests, logs). */
  count(workflowId: string): number {
    return this.inflight.current(workflowId).length;
  }
}
