/**
 * `svc`: the auditor's command line (docs/audit.md). Reads the event store the service is
 * configured for, from the same variables: EVENT_STORE (sqlite | postgres | esdb), SVC_DATA_DIR,
 * DATABASE_URL, EVENT_STORE_SCHEMA, ESDB_CONNECTION_STRING; SVC_MASTER_KEY (or the data dir's
 * master.key) for --decrypt. Reading commands (streams, replay, history, verify) work against a
 * running service and a stopped one; they write only the record of a decrypting read. `migrate-chain`
 * appends anchors for streams written before the hash chain; `rebuild` replaces read models and
 * refuses while the service holds its read store.
 *
 * Exit codes: 0 done, 1 verification found an event that does not match, 2 usage or environment problem.
 */
import { Argument, Command, CommanderError, Option } from 'commander';
import { Context, openContext } from './context';
import { CliError, Output } from './output';
import { CATEGORIES, HISTORY_KINDS } from './vocabulary';

const ENVIRONMENT_HELP = `
Store (the service's own variables):
  EVENT_STORE             sqlite (default) | postgres | esdb
  SVC_DATA_DIR            data dir of the SQLite store (default ./data)
  DATABASE_URL            PostgreSQL address; EVENT_STORE_SCHEMA its schema (default svc_events)
  ESDB_CONNECTION_STRING  KurrentDB address
  SVC_MASTER_KEY          master key (base64) for --decrypt; else <data dir>/master.key
  SVC_AUDIT_ACTOR         who you are, for --decrypt (or --actor)

Exit codes: 0 done, 1 an event does not match its hash chain (verify), 2 usage or environment problem.`;

const globalOptions = (cmd: Command) =>
  cmd.option('--json', 'machine output: one JSON object per line (NDJSON)').option('--no-progress', 'no progress bar on stderr');

async function run(action: (ctx: Context) => Promise<number>, opts: { json?: boolean; progress?: boolean }): Promise<void> {
  const out = new Output({ json: Boolean(opts.json), progress: opts.progress === false ? false : undefined });
  let ctx: Context | null = null;
  let code: number;
  try {
    ctx = await openContext(out);
    code = await action(ctx);
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`svc: ${err.message}\n`);
      code = err.exitCode;
    } else {
      process.stderr.write(`svc: ${(err as Error)?.stack ?? String(err)}\n`);
      code = 2;
    }
  } finally {
    await ctx?.close().catch(() => undefined);
  }
  process.exitCode = code;
}

export function program(): Command {
  const prog = new Command('svc')
    .description("The patient-care integration service's audit tool: list, replay, read the history of, and verify the event log.")
    .addHelpText('after', ENVIRONMENT_HELP)
    .showHelpAfterError('(svc <command> --help for its options)')
    .exitOverride();

  globalOptions(
    prog
      .command('streams')
      .description('Streams of the log with their event counts and last positions.')
      .option('--category <name>', `only streams of a category: ${CATEGORIES.map((c) => c.name).join(', ')}, or a stream id prefix`)
      .option('--org <organizationId>', 'only streams of this organization')
      .option('--env <environmentId>', 'only streams of this environment')
      .addHelpText('after', '\nExamples:\n  svc streams --category case\n  svc streams --org <orgId> --env <envId> --json'),
  ).action(async (opts) => run(async (ctx) => (await import('./commands/streams')).streamsCommand(ctx, opts), opts));

  globalOptions(
    prog
      .command('replay')
      .description(
        'Events in log order with their metadata (type, time, actor, correlation, causation, tenant). Payloads encrypted at rest stay hidden unless --decrypt.',
      )
      .argument('[stream]', 'one stream id')
      .option('--category <name>', 'every stream of a category (a name from `svc streams --help`, or a stream id prefix)')
      .option('--all', 'the whole log')
      .option('--from <position>', 'from this log position (inclusive)')
      .option('--to <position>', 'up to this log position (inclusive; default: the head when the command starts)')
      .option('--since <date>', 'only events recorded at or after this ISO 8601 date or time')
      .option(
        '--decrypt',
        'open encrypted payloads with the master key; the run is first recorded in the audit stream (who, when, which streams) and nothing is shown if that fails',
      )
      .option('--actor <name>', 'who is decrypting (required with --decrypt; or SVC_AUDIT_ACTOR)')
      .addHelpText(
        'after',
        '\nExamples:\n  svc replay case-ledger-case-<caseId>\n  svc replay --category case --since 2026-05-01 --json\n  SVC_AUDIT_ACTOR=alice svc replay case-ledger-case-<caseId> --decrypt',
      ),
  ).action(async (stream, opts) => run(async (ctx) => (await import('./commands/replay')).replayCommand(ctx, stream, opts), opts));

  globalOptions(
    prog
      .command('history')
      .description('A readable timeline of everything that concerns one case, patient, conversation or workflow, across streams.')
      .addArgument(new Argument('<kind>', 'what the id names').choices(HISTORY_KINDS))
      .argument('<id>', 'its id (uuid)')
      .option('--decrypt', 'also open payloads (details, and streams whose payloads name the subject); recorded in the audit stream first')
      .option('--actor <name>', 'who is decrypting (required with --decrypt; or SVC_AUDIT_ACTOR)')
      .addHelpText('after', '\nExamples:\n  svc history case <caseId>\n  svc history patient <patientId> --decrypt --actor alice'),
  ).action(async (kind, id, opts) => run(async (ctx) => (await import('./commands/history')).historyCommand(ctx, kind, id, opts), opts));

  globalOptions(
    prog
      .command('verify')
      .description(
        'Recompute the hash chain (no key needed) and name the first event that does not match; with --all, also the checkpoints of the global log; exit code 1 if any.',
      )
      .argument('[stream]', 'one stream id')
      .option('--all', 'every stream of the log')
      .option('--chain-start <position>', 'with --all: every event after this position must be chained (default: the first chained event)')
      .addOption(new Option('--save-anchor <file>', "after a clean check, save each stream's last hash to a file kept away from the store"))
      .addOption(
        new Option(
          '--anchor <file>',
          'also check that every head saved with --save-anchor is still in its chain (catches a rewritten chain and removed events)',
        ),
      )
      .addHelpText(
        'after',
        '\nExamples:\n  svc verify --all\n  svc verify case-ledger-case-<caseId> --json\n  svc verify --all --anchor anchors.json --save-anchor anchors-new.json',
      ),
  ).action(async (stream, opts) => run(async (ctx) => (await import('./commands/verify')).verifyCommand(ctx, stream, opts), opts));

  globalOptions(
    prog
      .command('migrate-chain')
      .description(
        'Anchor the events written before the hash chain existed: per stream, one ChainAnchored event (stream audit-chain-anchor) with the hash of its unchained events as stored; verify checks them against it from then on. Changes no stored event; idempotent.',
      )
      .option('--dry-run', 'say what would be anchored, and append nothing')
      .option('--actor <name>', 'who runs it, recorded in the anchors (or SVC_AUDIT_ACTOR; default: the OS user)')
      .addHelpText(
        'after',
        '\nWhat it proves: the anchored events are unchanged since the migration ran; nothing about before.\nExit code 1: a stream whose unchained events have a gap was not anchored (svc verify names it).\n\nExamples:\n  svc migrate-chain --dry-run\n  svc migrate-chain --actor alice',
      ),
  ).action(async (opts) => run(async (ctx) => (await import('./commands/migrate-chain')).migrateChainCommand(ctx, opts), opts));

  globalOptions(
    prog
      .command('rebuild')
      .description(
        'Rebuild read models from the log, with the service stopped: each named projection (or --all) replayed from the first event to the head, then put in place of the stored one in one step. Needs the master key. Refused while a service has the read store open.',
      )
      .argument('[projection...]', 'projection names (svc rebuild --list)')
      .option('--all', 'every projection')
      .option('--list', 'list the projections with their streams and collections, and rebuild nothing')
      .option('--force', 'Redis read store: rebuild although other clients are connected to its database (they must not be a service using it)')
      .addHelpText(
        'after',
        "\nRead store: READ_STORE (sqlite, the default: <data dir>/read-models.sqlite | redis: REDIS_URL, REDIS_KEY_PREFIX).\nSVC_REBUILD_CRYPTO_THREADS: threads for AES-GCM beside the replay (default: one per core but one; 0: none).\nSVC_REBUILD_GC=parallel: on two cores or fewer, keep V8's parallel garbage collector (the bin otherwise runs the rebuild with --single-threaded-gc).\n\nExamples:\n  svc rebuild --list\n  svc rebuild --all\n  svc rebuild case-ledger-cases-v2 --json",
      ),
  ).action(async (names: string[], opts) => {
    const rebuild = await import('./commands/rebuild');
    try {
      // --list and a wrong selection need no store.
      if (opts.list) return void (process.exitCode = await rebuild.listProjections(new Output({ json: Boolean(opts.json), progress: false })));
      await rebuild.checkSelection(names, opts);
    } catch (err) {
      if (!(err instanceof CliError)) throw err;
      process.stderr.write(`svc: ${err.message}\n`);
      return void (process.exitCode = err.exitCode);
    }
    return run(async (ctx) => rebuild.rebuildCommand(ctx, names, opts), opts);
  });

  return prog;
}

export async function main(argv: string[]): Promise<void> {
  // A reader that went away (`svc replay --all | head`) ends the program quietly.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
  try {
    await program().parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version end with 0; a usage error has been printed by commander.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    throw err;
  }
}

if (require.main === module) {
  void main(process.argv);
}
