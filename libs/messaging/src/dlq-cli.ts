/**
 * The dead-letter command (deploy/README.md, "Dead letters"):
 *
 *   npm run dlq:replay -- --topic svc.case-ledger.events [--dry-run] [--brokers h1:9092,h2:9092]
 *   node dist/libs/messaging/src/dlq-cli.js replay --topic svc.case-ledger.events [--dry-run]   (in the image)
 *
 * `replay` puts the dead letters of a topic (`--topic` names the topic or its `.dlq`) back on the
 * topic they came from, each once (see replayDeadLetters); `--dry-run` lists them and changes
 * nothing. Brokers from `--brokers`, else KAFKA_BROKERS. One line per dead letter (where it is,
 * where it came from, its event type and id, the error code and attempts; never its value), then
 * a count. Exit code 0, or 1 with the reason on stderr.
 */
import { kafkaBrokers } from './kafka';
import { DeadLetter, replayDeadLetters } from './dead-letters';

const USAGE = 'usage: dlq replay --topic <topic>[.dlq] [--dry-run] [--brokers host:port,...]';

function parse(argv: string[]): { command: string; topic: string; dryRun: boolean; brokers: string[] } {
  const [command, ...rest] = argv;
  let topic = '';
  let dryRun = false;
  let brokers: string[] | null = null;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    const value = (): string => {
      const v = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : rest[++i];
      if (!v) throw new Error(`${arg} needs a value\n${USAGE}`);
      return v;
    };
    if (arg === '--topic' || arg.startsWith('--topic=')) topic = value();
    else if (arg === '--brokers' || arg.startsWith('--brokers='))
      brokers = value()
        .split(',')
        .map((b) => b.trim())
        .filter(Boolean);
    else if (arg === '--dry-run') dryRun = true;
    else throw new Error(`unknown argument ${arg}\n${USAGE}`);
  }
  if (command !== 'replay') throw new Error(USAGE);
  if (!topic) throw new Error(`--topic is required\n${USAGE}`);
  return { command, topic, dryRun, brokers: brokers ?? kafkaBrokers() };
}

function line(d: DeadLetter, dryRun: boolean): string {
  const from = `${d.originalTopic ?? '?'} partition ${d.originalPartition ?? '?'} offset ${d.originalOffset ?? '?'}`;
  const what = [d.eventType && `event ${d.eventType}`, d.eventId && `id ${d.eventId}`].filter(Boolean).join(' ');
  const why = `${d.errorCode ?? '?'} after ${d.attempts ?? '?'} attempts in ${d.consumerGroup ?? '?'}`;
  return `${dryRun ? 'would replay' : 'replayed'} ${d.dlqTopic}/${d.partition}/${d.offset}: from ${from}${what ? `, ${what}` : ''}; ${why}`;
}

export async function main(argv: string[] = process.argv.slice(2)): Promise<number> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  try {
    const result = await replayDeadLetters({
      topic: args.topic,
      brokers: args.brokers,
      dryRun: args.dryRun,
      onDeadLetter: (d) => process.stdout.write(`${line(d, args.dryRun)}\n`),
    });
    const n = result.deadLetters.length;
    const noun = n === 1 ? 'dead letter' : 'dead letters';
    process.stdout.write(
      args.dryRun ? `${n} ${noun} would be replayed (dry run) from ${result.dlqTopic}\n` : `${n} ${noun} replayed from ${result.dlqTopic}\n`,
    );
    return 0;
  } catch (err) {
    // The name and message of a Kafka or argument error (no record data reaches them).
    process.stderr.write(`dlq ${args.command} failed: ${(err as Error).name}: ${(err as Error).message}\n`);
    return 1;
  }
}

if (require.main === module) {
  void main().then((code) => process.exit(code));
}
