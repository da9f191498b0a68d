/**
 * A second Nest app for kafka.spec.ts, in its own process: a Kafka microservice answering three
 * request patterns, wired as the apps are (busServerStrategy, BusExceptionFilter). Settings from
 * the environment: KAFKA_BROKERS, PEER_SERVICE (client id and consumer group), PEER_ECHO,
 * PEER_REFUSE and PEER_LOSE_REPLY (the patterns). The last one's handler disconnects the producer
 * its reply goes through, as a broker lost mid-request leaves it, so that its reply cannot be sent.
 * The consumer's log lines go to stderr as JSON. Prints `ready` once listening; SIGTERM, or its
 * parent closing its stdin, closes it.
 */
import 'reflect-metadata';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, KafkaContext, MessagePattern, MicroserviceOptions, Payload } from '@nestjs/microservices';
import { DomainError } from '../../../eventstore/src/decider';
import { BusExceptionFilter, BusLogger, busServerStrategy, kafkaBrokers } from '../../src';

const ECHO = process.env.PEER_ECHO ?? 'peer.echo';
const REFUSE = process.env.PEER_REFUSE ?? 'peer.refuse';
const LOSE_REPLY = process.env.PEER_LOSE_REPLY ?? 'peer.lose-reply';

@Controller()
class PeerController {
  @MessagePattern(ECHO)
  echo(@Payload() data: { n: number; text: string }) {
    return { n: data.n, echoed: data.text.toUpperCase(), pid: process.pid };
  }

  @MessagePattern(REFUSE)
  refuse(@Payload() data: { n: number }) {
    // A domain refusal as the apps' deciders throw it (BusExceptionFilter carries it across).
    throw new DomainError(409, 'ALREADY_RESOLVED', `request ${data.n} refused`, { n: data.n });
  }

  @MessagePattern(LOSE_REPLY)
  async loseReply(@Payload() data: { n: number }, @Ctx() ctx: KafkaContext) {
    await ctx.getProducer().disconnect();
    return { n: data.n };
  }
}

const stderrLogger = (level: string) => (meta: Record<string, unknown>, msg: string) => process.stderr.write(`${JSON.stringify({ level, msg, ...meta })}\n`);
const logger: BusLogger = { info: stderrLogger('info'), warn: stderrLogger('warn'), error: stderrLogger('error') };

@Module({ controllers: [PeerController] })
class PeerModule {}

async function main(): Promise<void> {
  // fromBeginning: the group is new, and a new group at "latest" can miss a request sent just
  // after listen() (its first fetch may resolve the latest offset after that request).
  const strategy = busServerStrategy(process.env.PEER_SERVICE ?? 'kafka-peer', {
    kind: 'kafka',
    brokers: kafkaBrokers(),
    fromBeginning: true,
    consumer: { logger },
  });
  const app = await NestFactory.createMicroservice<MicroserviceOptions>(PeerModule, { ...(strategy as MicroserviceOptions), logger: false });
  app.useGlobalFilters(new BusExceptionFilter());
  await app.listen();
  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    void app.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', close);
  process.stdin.on('end', close);
  process.stdin.resume();
  process.stdout.write('ready\n');
}

main().catch((e) => {
  process.stderr.write(`peer failed: ${(e as Error)?.stack ?? e}\n`);
  process.exit(1);
});
