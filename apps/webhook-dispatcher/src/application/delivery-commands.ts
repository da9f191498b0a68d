import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { DeliveryCommand, DeliveryEvent, DeliveryState, deliveryDecider } from '../domain/delivery';

/** The actor of the commands the dispatcher issues by itself (creation, release, leases, attempts). */
export const SYSTEM = 'system:webhook-dispatcher';

/**
 * The command handler of delivery streams, one per process: every append to a delivery (creation,
 * release, lease, attempt, manual retry) goes through it, so the commands given for one stream run
 * in turn.
 */
@Injectable()
export class DeliveryCommands extends CommandHandler<DeliveryCommand, DeliveryEvent, DeliveryState> {
  constructor(@Inject(EVENT_STORE) store: EventStore, @Inject(CLOCK) clock: Clock) {
    super(store, deliveryDecider, () => clock.now());
  }
}
