import 'reflect-metadata';
import { Controller, INestMicroservice, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, EventPattern, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { lastValueFrom } from 'rxjs';
import { DomainError } from '../../eventstore/src/decider';
import { BusExceptionFilter, BusRecord, InProcessBroker, InProcessClient, InProcessContext, InProcessServer, SubscriberFailedError } from '../src';

const EVENT = 'test.something-happened';

interface Seen {
  data: any;
  key: string | null;
  headers: Record<string, string>;
  pattern: string;
}

/** A service module whose controller answers requests and records the events it gets. */
function serviceModule(name: string, sink: Seen[], order: string[], withRequests: boolean): Type<unknown> {
  @Controller()
  class EventsController {
    @EventPattern(EVENT)
    async onEvent(@Payload() data: any, @Ctx() ctx: InProcessContext) {
      order.push(`${name} handled`);
      sink.push({ data: structuredClone(data), key: ctx.getKey(), headers: ctx.getHeaders(), pattern: ctx.getPattern() });
      data.nested.value = `mutated by ${name}`; // must not reach the other subscriber or the sender
    }
  }

  @Controller()
  class RequestsController {
    @MessagePattern('test.echo')
    echo(@Payload() data: any) {
      order.push('echo handled');
      const copy = structuredClone(data);
      data.nested.value = 'mutated by handler';
      return { received: copy, whenType: typeof data.when };
    }

    @MessagePattern({ cmd: 'sum' })
    async sum(@Payload() data: { values: number[] }) {
      await new Promise((r) => setTimeout(r, 5));
      return data.values.reduce((a, b) => a + b, 0);
    }

    @MessagePattern('test.refuse-rpc')
    refuseRpc() {
      throw new RpcException({ status: 409, code: 'OUT_OF_ORDER', message: 'sequence 3 expected, got 5', details: { nextSequence: 3 } });
    }

    @MessagePattern('test.refuse-domain')
    async refuseDomain() {
      throw new DomainError(409, 'OUT_OF_ORDER', 'sequence 3 expected, got 5', { nextSequence: 3 });
    }

    @MessagePattern('test.crash')
    crash() {
      throw new Error('boom with patient text that must not travel');
    }
  }

  @Module({ controllers: withRequests ? [RequestsController, EventsController] : [EventsController] })
  class ServiceModule {}
  return ServiceModule;
}

async function boot(module: Type<unknown>, broker: InProcessBroker): Promise<INestMicroservice> {
  const app = await NestFactory.createMicroservice(module, { strategy: new InProcessServer(broker), logger: false });
  app.useGlobalFilters(new BusExceptionFilter());
  await app.listen();
  return app;
}

describe('in-process transport on a real Nest microservice', () => {
  const broker = new InProcessBroker();
  const client = new InProcessClient(broker);
  const sinkA: Seen[] = [];
  const sinkB: Seen[] = [];
  const order: string[] = [];
  let appA: INestMicroservice;
  let appB: INestMicroservice;

  beforeAll(async () => {
    appA = await boot(serviceModule('A', sinkA, order, true), broker);
    appB = await boot(serviceModule('B', sinkB, order, false), broker);
    await client.connect();
  });

  afterAll(async () => {
    await client.close();
    await appA?.close();
    await appB?.close();
  });

  beforeEach(() => {
    sinkA.length = 0;
    sinkB.length = 0;
    order.length = 0;
  });

  it('request/reply: the reply comes back through the observable', async () => {
    await expect(lastValueFrom(client.send({ cmd: 'sum' }, { values: [1, 2, 3] }))).resolves.toBe(6);
  });

  it('the handler gets a JSON copy: its mutations do not reach the sender; a Date arrives as an ISO string', async () => {
    const when = new Date('2026-03-04T05:06:07.089Z');
    const sent = { nested: { value: 'original' }, when };
    const reply = await lastValueFrom(client.send('test.echo', sent));
    expect(reply).toEqual({ received: { nested: { value: 'original' }, when: '2026-03-04T05:06:07.089Z' }, whenType: 'string' });
    expect(sent.nested.value).toBe('original');
    expect(sent.when).toBeInstanceOf(Date);
  });

  it('the payload is frozen at the send call: mutating it afterwards does not change what is delivered', async () => {
    const sent = { nested: { value: 'at send' }, when: 'x' };
    const reply$ = lastValueFrom(client.send('test.echo', sent));
    sent.nested.value = 'changed after send';
    expect((await reply$).received.nested.value).toBe('at send');
  });

  it('delivery is asynchronous: send and emit return before the handler runs', async () => {
    const reply$ = client.send('test.echo', { nested: { value: 'v' }, when: 'x' });
    const pending = lastValueFrom(reply$);
    order.push('send returned');
    const emitted = client.emit(EVENT, { nested: { value: 'v' } });
    order.push('emit returned');
    expect(sinkA).toHaveLength(0);
    await pending;
    await lastValueFrom(emitted, { defaultValue: undefined });
    expect(order.slice(0, 2)).toEqual(['send returned', 'emit returned']);
    expect(order).toEqual(expect.arrayContaining(['echo handled', 'A handled', 'B handled']));
  });

  it('an RpcException error object crosses the bus intact', async () => {
    await expect(lastValueFrom(client.send('test.refuse-rpc', {}))).rejects.toEqual({
      status: 409,
      code: 'OUT_OF_ORDER',
      message: 'sequence 3 expected, got 5',
      details: { nextSequence: 3 },
    });
  });

  it('a thrown DomainError crosses with status/code/details intact (BusExceptionFilter)', async () => {
    await expect(lastValueFrom(client.send('test.refuse-domain', {}))).rejects.toEqual({
      status: 409,
      code: 'OUT_OF_ORDER',
      message: 'sequence 3 expected, got 5',
      details: { nextSequence: 3 },
    });
  });

  it('an unexpected error becomes a generic 500 without its message', async () => {
    await expect(lastValueFrom(client.send('test.crash', {}))).rejects.toEqual({
      status: 500,
      code: 'INTERNAL',
      message: 'Internal server error',
    });
  });

  it('a request pattern with no handler errors; an event with no subscriber is dropped without error', async () => {
    await expect(lastValueFrom(client.send('test.nobody', {}))).rejects.toMatchObject({ status: 503, code: 'NO_HANDLER' });
    await expect(lastValueFrom(client.emit('test.nobody-listens', { a: 1 }), { defaultValue: undefined })).resolves.toBeUndefined();
  });

  it('every subscriber (two apps) gets every event, each its own copy', async () => {
    await lastValueFrom(client.emit(EVENT, { nested: { value: 'e1' } }), { defaultValue: undefined });
    await lastValueFrom(client.emit(EVENT, { nested: { value: 'e2' } }), { defaultValue: undefined });
    expect(sinkA.map((s) => s.data.nested.value)).toEqual(['e1', 'e2']);
    expect(sinkB.map((s) => s.data.nested.value)).toEqual(['e1', 'e2']);
  });

  it('a BusRecord travels as its value, with key and headers on the context', async () => {
    const record = new BusRecord('case-123', { nested: { value: 'keyed' } }, { 'event-id': 'e-1' });
    await lastValueFrom(client.emit(EVENT, record), { defaultValue: undefined });
    expect(sinkA).toEqual([{ data: { nested: { value: 'keyed' } }, key: 'case-123', headers: { 'event-id': 'e-1' }, pattern: EVENT }]);
    expect(sinkB[0].key).toBe('case-123');
  });

  it('a second request handler for the same pattern is refused at listen', async () => {
    const app = await NestFactory.createMicroservice(serviceModule('C', [], [], true), {
      strategy: new InProcessServer(broker),
      logger: false,
    });
    await expect(app.listen()).rejects.toThrow(/already registered/);
    await app.close();
    // The refused app left the first app's registrations alone.
    await expect(lastValueFrom(client.send({ cmd: 'sum' }, { values: [2, 2] }))).resolves.toBe(4);
  });

  it('two controllers of one app (standalone: all contexts in one app) both get the event', async () => {
    const local = new InProcessBroker();
    const got: string[] = [];
    @Controller()
    class First {
      @EventPattern('shared.topic')
      async on(@Payload() d: { v: string }) {
        await new Promise((r) => setTimeout(r, 5));
        got.push(`first:${d.v}`);
      }
    }
    @Controller()
    class Second {
      @EventPattern('shared.topic')
      on(@Payload() d: { v: string }) {
        got.push(`second:${d.v}`);
      }
    }
    @Module({ controllers: [First, Second] })
    class Both {}
    const app = await boot(Both, local);
    const c = new InProcessClient(local);
    await lastValueFrom(c.emit('shared.topic', { v: 'x' }), { defaultValue: undefined });
    // The emit settles after both handlers finished (the slow one included).
    expect(got.sort()).toEqual(['first:x', 'second:x']);
    await app.close();
  });

  it('closing an app unregisters its handlers', async () => {
    const local = new InProcessBroker();
    const app = await boot(serviceModule('D', [], [], true), local);
    expect(local.hasRequestHandler('test.echo')).toBe(true);
    expect(local.subscriberCount(EVENT)).toBe(1);
    await app.close();
    expect(local.hasRequestHandler('test.echo')).toBe(false);
    expect(local.subscriberCount(EVENT)).toBe(0);
  });
});

describe('InProcessBroker', () => {
  it('parses a fresh copy per subscriber and delivers after publish returns', async () => {
    const broker = new InProcessBroker();
    const got: unknown[] = [];
    broker.subscribe('t', (m) => void got.push(m.data));
    broker.subscribe('t', (m) => void got.push(m.data));
    const data = { a: [1] };
    const done = broker.publish('t', data);
    expect(got).toHaveLength(0);
    await expect(done).resolves.toBe(2);
    expect(got).toEqual([{ a: [1] }, { a: [1] }]);
    expect(got[0]).not.toBe(got[1]);
    expect(got[0]).not.toBe(data);
  });

  it('a failing subscriber does not stop the other subscribers, and the publish rejects so it is retried', async () => {
    const errors: string[] = [];
    const broker = new InProcessBroker({ onError: (_e, p) => errors.push(p) });
    const got: unknown[] = [];
    broker.subscribe('t', () => {
      throw new Error('x');
    });
    broker.subscribe('t', (m) => void got.push(m.data));
    await expect(broker.publish('t', 1)).rejects.toBeInstanceOf(SubscriberFailedError);
    expect(got).toEqual([1]);
    expect(errors).toEqual(['t']);
  });

  it('an unserializable payload fails the send', async () => {
    const broker = new InProcessBroker();
    const client = new InProcessClient(broker);
    broker.subscribe('t', () => undefined);
    const cyclic: any = {};
    cyclic.self = cyclic;
    await expect(lastValueFrom(client.emit('t', cyclic))).rejects.toThrow(/circular/i);
  });
});
