import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { EVENT_STORE, EventStore } from '@svc/eventstore';
import { getLogger } from '@svc/http';
import { AnyClientProxy, BUS_CLIENT, IntegrationEventRelay, IntegrationEventRelayOptions } from '@svc/messaging';
import { READ_STORE, ReadStore, TimerDoc, TimerScheduler, TimerSchedulerOptions } from '@svc/read-store';

export type RelaySpec = Omit<IntegrationEventRelayOptions, 'store' | 'readStore' | 'client' | 'logger'>;
export type TimerSpec<T extends TimerDoc> = Omit<TimerSchedulerOptions<T>, 'readStore' | 'clock' | 'logger'>;

/**
 * A context's background work: the relay that publishes its integration events from its own
 * streams, and the schedulers that fire its durable timers. Modules declare them in
 * `onModuleInit`; the platform starts them once the projections run and stops them before the
 * stores close.
 */
@Injectable()
export class BackgroundWork {
  private readonly relays: IntegrationEventRelay[] = [];
  private readonly schedulers: TimerScheduler<TimerDoc>[] = [];
  private started = false;

  constructor(
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(BUS_CLIENT) private readonly client: AnyClientProxy,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  relay(spec: RelaySpec): void {
    const log = getLogger();
    this.relays.push(
      new IntegrationEventRelay({ ...spec, store: this.store, readStore: this.readStore, client: this.client, logger: { warn: (msg: string) => log.warn({ relay: spec.name }, msg) } }),
    );
  }

  timers<T extends TimerDoc>(spec: TimerSpec<T>): void {
    this.schedulers.push(new TimerScheduler<T>({ ...spec, readStore: this.readStore, clock: this.clock, logger: getLogger() }) as unknown as TimerScheduler<TimerDoc>);
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const r of this.relays) await r.start();
    for (const s of this.schedulers) s.start();
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    await Promise.all(this.schedulers.map((s) => s.stop()));
    await Promise.all(this.relays.map((r) => r.stop()));
  }
}
