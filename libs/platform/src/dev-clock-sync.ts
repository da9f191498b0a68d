import { DevClock } from '@svc/clock';
import { getLogger } from '@svc/http';
import type { ReadStore } from '@svc/read-store';
import { readUpstreams } from './upstreams';

/**
 * One dev clock for every app of distributed mode (README.md, "Running modes and settings": with SVC_DEV_TOOLS=1, "one dev
 * clock, outbox and issuer serve every app"); see docs/decisions.md, "Distributed topology".
 *
 * - The offset lives in the shared read store (one document). Each app reads it when it starts,
 *   before anything reads its clock, and again every `pollMs`, so an app that was down or missed
 *   a push follows it.
 * - `POST /dev/clock` at the gateway (`advance`) writes the new offset, then pushes it to every
 *   app that announced a route (`PUT /internal/dev-clock` on its internal listener) and answers
 *   once each reachable app has taken it: when the answer comes, every running app's clock reads
 *   the new time and its due timers have been set off (a clock that moves runs its listeners,
 *   the timer schedulers among them). An app that does not answer within `pushTimeoutMs` takes it
 *   from the store at its next read.
 * - Forward only: an app's clock never goes back, whatever order offsets arrive in.
 */
export const DEV_CLOCK_SYNC = Symbol('DEV_CLOCK_SYNC');

const COLLECTION = 'platform-dev-clock';
const KEY = 'offset';

/** The internal route each app takes a pushed offset on (never forwarded by the gateway). */
export const DEV_CLOCK_PUSH_PATH = '/internal/dev-clock';

export class DevClockSync {
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    readonly clock: DevClock,
    private readonly readStore: ReadStore,
    private readonly self: string,
    private readonly pushTimeoutMs: number,
  ) {}

  /** Follows the stored offset now and then every `pollMs`. A store that does not answer now is asked again at the next poll. */
  static async open(clock: DevClock, readStore: ReadStore, self: string, options: { pollMs?: number; pushTimeoutMs?: number } = {}): Promise<DevClockSync> {
    const sync = new DevClockSync(clock, readStore, self, options.pushTimeoutMs ?? 3000);
    await sync.pull().catch((err) => getLogger().warn({ error: (err as Error)?.name }, 'dev clock: shared offset not read; retrying'));
    sync.timer = setInterval(() => {
      sync.pull().catch(() => undefined);
    }, options.pollMs ?? 1000);
    sync.timer.unref();
    return sync;
  }

  /** Takes the stored offset if it is ahead of this app's clock. */
  async pull(): Promise<void> {
    const doc = await this.readStore.get<{ offsetMs?: unknown }>(COLLECTION, KEY);
    if (doc && typeof doc.offsetMs === 'number') this.clock.follow(doc.offsetMs);
  }

  /**
   * Moves the shared clock `seconds` forward (the gateway's POST /dev/clock): from the later of
   * the stored offset and this app's, written to the store, then pushed to every app. Advances
   * of this process run one after another. A RangeError (seconds not a whole number >= 0, or past
   * the last date) changes nothing.
   */
  advance(seconds: number): Promise<Date> {
    const run = this.chain.then(async () => {
      const stored = await this.readStore.get<{ offsetMs?: unknown }>(COLLECTION, KEY);
      const from = Math.max(typeof stored?.offsetMs === 'number' ? stored.offsetMs : 0, this.clock.offset);
      const next = this.clock.offsetAfter(seconds, from);
      await this.readStore.write([{ op: 'put', collection: COLLECTION, key: KEY, doc: { offsetMs: next } }]);
      this.clock.follow(next);
      await this.push(next);
      return this.clock.now();
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async push(offsetMs: number): Promise<void> {
    const apps = (await readUpstreams(this.readStore)).filter((u) => u.app !== this.self);
    await Promise.all(
      apps.map(async (u) => {
        try {
          const res = await fetch(`${u.origin}${DEV_CLOCK_PUSH_PATH}`, {
            method: 'PUT',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ offsetMs }),
            signal: AbortSignal.timeout(this.pushTimeoutMs),
          });
          await res.arrayBuffer();
          if (!res.ok) throw new Error(`status ${res.status}`);
        } catch (err) {
          // Down or slow: it reads the offset from the store when it starts, or at its next poll.
          getLogger().warn({ app: u.app, error: (err as Error)?.name }, 'dev clock: offset not pushed; the app takes it from the store');
        }
      }),
    );
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
