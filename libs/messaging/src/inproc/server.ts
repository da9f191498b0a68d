/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-function-type -- overrides of Nest's Server members, whose signatures are typed with any and Function */
import { CustomTransportStrategy, MessageHandler, Server } from '@nestjs/microservices';
import { isObservable, lastValueFrom } from 'rxjs';
import { BrokerMessage, defaultBroker, InProcessBroker, NO_HANDLER_ERROR, ReplyPacket } from './broker';
import { InProcessContext } from './context';

/** Transport id of the in-process bus (what `@MessagePattern(p, IN_PROCESS_TRANSPORT)` can name). */
export const IN_PROCESS_TRANSPORT: unique symbol = Symbol.for('svc.messaging.inproc');

export type InProcessServerStatus = 'listening' | 'closed';

/**
 * Nest custom transport strategy over an {@link InProcessBroker}:
 *   NestFactory.createMicroservice(AppModule, { strategy: new InProcessServer(broker) })
 *   app.connectMicroservice({ strategy: new InProcessServer(broker) })
 * Registers the app's @MessagePattern handlers (request/reply, one per pattern on the broker)
 * and @EventPattern handlers (one subscription per pattern per app) when it starts listening.
 */
export class InProcessServer extends Server<Record<string, Function>, InProcessServerStatus> implements CustomTransportStrategy {
  transportId = IN_PROCESS_TRANSPORT;
  private readonly registrations: Array<() => void> = [];
  private readonly listeners = new Map<string, Function[]>();
  private listening = false;

  constructor(private readonly broker: InProcessBroker = defaultBroker()) {
    super();
    this.initializeSerializer({} as never);
    this.initializeDeserializer({} as never);
  }

  listen(callback: (...optionalParams: unknown[]) => any): void {
    try {
      for (const [pattern, handler] of this.messageHandlers) this.register(pattern, handler);
      this.listening = true;
    } catch (err) {
      this.unregisterAll();
      callback(err);
      return;
    }
    this._status$.next('listening');
    this.emitStatus('listening');
    callback();
  }

  close(): void {
    this.unregisterAll();
    if (this.listening) {
      this.listening = false;
      this._status$.next('closed');
      this.emitStatus('closed');
    }
  }

  override addHandler(pattern: any, callback: MessageHandler, isEventHandler = false, extras: Record<string, any> = {}): void {
    const route = this.normalizePattern(pattern);
    const existed = this.messageHandlers.has(route);
    super.addHandler(pattern, callback, isEventHandler, extras);
    // Late registrations (after listen): chained event handlers ride on the existing subscription.
    if (this.listening && !existed) this.register(route, this.messageHandlers.get(route)!);
  }

  on(event: string, callback: Function): void {
    const list = this.listeners.get(event) ?? [];
    list.push(callback);
    this.listeners.set(event, list);
  }

  unwrap<T>(): T {
    return this.broker as T;
  }

  private emitStatus(status: InProcessServerStatus): void {
    for (const cb of this.listeners.get(status) ?? []) cb();
  }

  private register(pattern: string, handler: MessageHandler): void {
    if (handler.isEventHandler) {
      this.registrations.push(this.broker.subscribe(pattern, (m) => this.onEvent(m)));
    } else {
      this.registrations.push(this.broker.handle(pattern, (m, reply) => void this.onRequest(m, reply)));
    }
  }

  private unregisterAll(): void {
    while (this.registrations.length) this.registrations.pop()!();
  }

  private context(m: BrokerMessage): InProcessContext {
    return new InProcessContext([m.pattern, m.key ?? null, m.headers ?? {}]);
  }

  private async onRequest(message: BrokerMessage, reply: (packet: ReplyPacket) => void): Promise<void> {
    const handler = this.messageHandlers.get(message.pattern);
    if (!handler || handler.isEventHandler) {
      reply({ err: NO_HANDLER_ERROR(message.pattern), isDisposed: true });
      return;
    }
    const ctx = this.context(message);
    this.onProcessingStartHook(this.transportId, ctx, async () => {
      try {
        const result$ = this.transformToObservable(await handler(message.data, ctx));
        this.send(result$, (packet) => {
          reply(packet);
          if (packet.isDisposed || packet.err !== undefined) this.onProcessingEndHook?.(this.transportId, ctx);
        });
      } catch (err) {
        reply({ err, isDisposed: true });
        this.onProcessingEndHook?.(this.transportId, ctx);
      }
    });
  }

  /** Runs the app's handler(s) for an event and settles when they are done (errors reject). */
  private async onEvent(message: BrokerMessage): Promise<void> {
    const handler = this.messageHandlers.get(message.pattern);
    if (!handler) return;
    const ctx = this.context(message);
    await new Promise<void>((resolve, reject) => {
      this.onProcessingStartHook(this.transportId, ctx, async () => {
        try {
          const result = await handler(message.data, ctx);
          if (isObservable(result)) await lastValueFrom(result, { defaultValue: undefined });
          resolve();
        } catch (err) {
          reject(err);
        } finally {
          this.onProcessingEndHook?.(this.transportId, ctx);
        }
      });
    });
  }
}
