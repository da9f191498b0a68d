import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, Clock } from '@svc/clock';
import { CommandHandler, EVENT_STORE, EventStore } from '@svc/eventstore';
import { ApiError, ListCursors } from '@svc/http';
import { CONFIG, PROJECTIONS, ServiceConfig } from '@svc/platform';
import { ProjectionRunner, READ_STORE, ReadStore } from '@svc/read-store';
import { KEYRING, Keyring, addressProblem, randomToken, urlProblemMessage, urlSyntaxProblem } from '@svc/security';
import { DeliveryStatus, deliveryStream } from '../domain/delivery';
import { EndpointCommand, EndpointEvent, EndpointState, endpointDecider, endpointStream } from '../domain/endpoint';
import { Collections, DISPATCHER_PROJECTION, DeliveryDoc, EndpointDoc, deliveryStatusPartition } from '../read-model/dispatcher.projection';
import { AttemptRunner } from './attempt-runner';
import { DeliveryCommands } from './delivery-commands';
import { RetryWorker } from './retry-worker';

export interface StaffActor {
  sub: string;
}

export const endpointView = (d: EndpointDoc) => ({ id: d.id, url: d.url, events: d.events, description: d.description, createdAt: d.createdAt });
export const deliveryView = (d: DeliveryDoc) => ({
  id: d.id,
  eventId: d.eventId,
  eventType: d.eventType,
  status: d.status,
  attempts: d.attempts,
  nextAttemptAt: d.nextAttemptAt,
});

/**
 * The staff API of webhook endpoints: creation, listing, secret rotation and deletion (each
 * answered once no attempt with the old state can be sent), and each endpoint's delivery log with
 * manual retries.
 */
@Injectable()
export class EndpointsService {
  private readonly endpoints: CommandHandler<EndpointCommand, EndpointEvent, EndpointState>;
  private cursorCodec: ListCursors | undefined;

  constructor(
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(CLOCK) clock: Clock,
    @Inject(PROJECTIONS) private readonly projections: ProjectionRunner,
    @Inject(READ_STORE) private readonly readStore: ReadStore,
    @Inject(KEYRING) private readonly keyring: Keyring,
    @Inject(CONFIG) private readonly config: ServiceConfig,
    private readonly deliveries: DeliveryCommands,
    private readonly attempts: AttemptRunner,
    private readonly worker: RetryWorker,
  ) {
    this.endpoints = new CommandHandler(store, endpointDecider, () => clock.now());
  }

  private async applied(position: number): Promise<void> {
    if (position > 0) await this.projections.waitFor([DISPATCHER_PROJECTION], position);
  }

  async createEndpoint(organizationId: string, environmentId: string, input: { url: string; events: string[]; description?: string }, actor: StaffActor) {
    const syntax = urlSyntaxProblem(input.url, this.config.production);
    const problem = syntax ?? (await addressProblem(input.url, this.config.production));
    if (problem) throw ApiError.validation([{ path: 'url', message: urlProblemMessage(problem) }]);
    const endpointId = randomUUID();
    const secret = `whsec_${randomToken(32)}`;
    const events = [...new Set(input.events)];
    const r = await this.endpoints.handle(
      endpointStream(endpointId),
      {
        type: 'CreateEndpoint',
        endpointId,
        organizationId,
        environmentId,
        url: input.url,
        events,
        description: input.description ?? null,
        secret,
        by: actor.sub,
      },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
    const created = r.newEvents[0] as Extract<EndpointEvent, { type: 'WebhookEndpointCreated' }>;
    return { id: endpointId, url: input.url, events, description: input.description ?? null, secret, createdAt: created.createdAt };
  }

  async listEndpoints(environmentId: string) {
    const docs = await this.readStore.list<EndpointDoc>(Collections.endpoints, environmentId);
    return docs.filter((d) => !d.deletedAt).map(endpointView);
  }

  async endpoint(environmentId: string, endpointId: string): Promise<EndpointDoc> {
    const doc = await this.readStore.get<EndpointDoc>(Collections.endpoints, endpointId);
    if (!doc || doc.deletedAt || doc.environmentId !== environmentId) throw ApiError.notFound('Webhook endpoint');
    return doc;
  }

  /**
   * 204 once no attempt to the endpoint can be sent any more: the deletion is in the read model
   * (every later attempt reads it there and is not sent) and the attempts of this process that
   * read the endpoint before have ended (those not yet on the wire are aborted, never sent).
   */
  async deleteEndpoint(organizationId: string, environmentId: string, endpointId: string, actor: StaffActor): Promise<void> {
    await this.endpoint(environmentId, endpointId);
    const r = await this.endpoints.handle(
      endpointStream(endpointId),
      { type: 'DeleteEndpoint', environmentId, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
    await this.attempts.settle(endpointId, 'deleted');
  }

  /**
   * 201 once no attempt signed with an older secret can be sent any more: the new secret is in the
   * read model (every later attempt reads it there) and the attempts of this process that signed
   * with an older one have ended.
   */
  async rotateSecret(organizationId: string, environmentId: string, endpointId: string, actor: StaffActor) {
    await this.endpoint(environmentId, endpointId);
    const secret = `whsec_${randomToken(32)}`;
    const r = await this.endpoints.handle(
      endpointStream(endpointId),
      { type: 'RotateSecret', environmentId, secret, by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
    await this.attempts.settle(endpointId, 'rotated');
    return { secret };
  }

  private get cursors(): ListCursors {
    return (this.cursorCodec ??= new ListCursors(this.keyring));
  }

  /**
   * One page of the endpoint's delivery log, of one status if given: newest first (the read model's
   * score is the negated creation time; deliveries created in the same millisecond follow by id),
   * at most `limit`, after the position sealed in `cursor`; read as a range of the endpoint's (or
   * the endpoint and status's) partition. `nextCursor` is null at the end.
   */
  async listDeliveries(environmentId: string, endpointId: string, page: { limit: number; cursor?: unknown; status?: DeliveryStatus }) {
    const scope = `webhook-deliveries|${environmentId}|${endpointId}|${page.status ?? '*'}`;
    const after = this.cursors.open(page.cursor, scope);
    await this.endpoint(environmentId, endpointId);
    const read = page.status
      ? await this.readStore.page<DeliveryDoc>(Collections.deliveriesByStatus, deliveryStatusPartition(endpointId, page.status), { limit: page.limit, after })
      : await this.readStore.page<DeliveryDoc>(Collections.deliveries, endpointId, { limit: page.limit, after });
    const last = read.entries.at(-1);
    return {
      deliveries: read.entries.map((e) => deliveryView(e.doc)),
      nextCursor: read.hasMore && last ? this.cursors.seal(scope, { score: last.score, key: last.key }) : null,
    };
  }

  async retryDelivery(organizationId: string, environmentId: string, endpointId: string, deliveryId: string, actor: StaffActor) {
    await this.endpoint(environmentId, endpointId);
    const doc = await this.readStore.get<DeliveryDoc>(Collections.deliveries, deliveryId);
    if (!doc || doc.endpointId !== endpointId) throw ApiError.notFound('Delivery');
    const r = await this.deliveries.handle(
      deliveryStream(deliveryId),
      { type: 'RequestRetry', by: actor.sub },
      { actor: `staff:${actor.sub}`, organizationId, environmentId },
    );
    await this.applied(r.position);
    this.worker.kick();
    return { id: deliveryId, status: r.state.status, nextAttemptAt: r.state.nextAttemptAt };
  }
}
