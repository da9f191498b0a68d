/**
 * Work under way in this process, by key (an endpoint, a workflow), each piece registered with data
 * of its own until it settles. A change to the key that must hold for work already under way (a
 * secret rotation, a deletion, a switch-off) is recorded first, so that work starting afterwards
 * sees it, then looks at what is registered at that moment and waits for it (or aborts it). In
 * memory: it covers the work of the process that answers the change (each app runs as one replica).
 */
export class InFlight<T extends object> {
  private readonly byKey = new Map<string, Set<InFlightEntry<T>>>();

  /** Runs `work` registered under `key` with `data` (which `work` may update) until it settles. */
  async run<R>(key: string, data: T, work: () => Promise<R>): Promise<R> {
    let end!: () => void;
    const entry: InFlightEntry<T> = { data, ended: new Promise<void>((r) => (end = r)) };
    let entries = this.byKey.get(key);
    if (!entries) this.byKey.set(key, (entries = new Set()));
    entries.add(entry);
    try {
      return await work();
    } finally {
      entries.delete(entry);
      if (entries.size === 0 && this.byKey.get(key) === entries) this.byKey.delete(key);
      end();
    }
  }

  /** The work registered under `key` now. */
  current(key: string): InFlightEntry<T>[] {
    return [...(this.byKey.get(key) ?? [])];
  }
}

export interface InFlightEntry<T> {
  readonly data: T;
  /** Settles when the work has (whatever its outcome). */
  readonly ended: Promise<void>;
}
