import { ask } from './ask';
import type { AnyClientProxy } from './bus';
import type { ReserveCreditCommand, ReserveCreditReply } from './contracts';
import { Patterns } from './names';

/**
 * Asks billing to reserve the credit of work about to be done (Patterns.reserveCredit): true when
 * it refused (the month's credits are used up, usage is paused). Without an answer in time (no
 * billing handler, a slow bus) the work goes on: not paused, and the work's own event brings its
 * credit later under the same source id.
 */
export async function creditRefused(bus: AnyClientProxy, command: ReserveCreditCommand, timeoutMs: number): Promise<boolean> {
  const r = await ask<ReserveCreditReply, null>(bus, Patterns.reserveCredit, command, { timeoutMs, onError: () => null });
  return r?.reserved === false;
}
