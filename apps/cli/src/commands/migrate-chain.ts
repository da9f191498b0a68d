import { hostname, userInfo } from 'node:os';
import { Context } from '../context';
import { CliError } from '../output';

export interface MigrateChainOptions {
  dryRun?: boolean;
  actor?: string;
}

/**
 * `svc migrate-chain`: anchors the events written before the hash chain existed (docs/audit.md,
 * "Existing data: the chain migration"). Nothing stored is changed: per stream that begins with
 * unchained events, one `ChainAnchored` event in `audit-chain-anchor` records the hash of those
 * events as stored, and verify checks them against it from then on. Idempotent: streams already
 * anchored are left alone, so a second run appends nothing.
 */
export async function migrateChainCommand(ctx: Context, options: MigrateChainOptions): Promise<number> {
  const { out, store } = ctx;
  const { HashChainingEventStore, migrateChains, CHAIN_ANCHOR_STREAM } = await import('@svc/eventstore');
  const actor = (options.actor ?? process.env.SVC_AUDIT_ACTOR ?? '').trim();
  if (actor.length > 200 || /[\u0000-\u001f]/.test(actor)) throw new CliError('--actor must be at most 200 characters, without control characters');
  let osUser: string;
  try {
    osUser = userInfo().username;
  } catch {
    osUser = process.env.USER ?? 'unknown';
  }
  const upTo = await store.headPosition();
  const progress = out.progress('migrate-chain', 0, upTo);
  const started = process.hrtime.bigint();
  let result;
  try {
    // Appends through a chaining decorator of its own: the anchors are chained like any event.
    result = await migrateChains(new HashChainingEventStore(store), {
      upTo,
      actor: `auditor:${actor || osUser}@${hostname()}`,
      dryRun: Boolean(options.dryRun),
      onProgress: (position, events) => progress.update(position, events),
    });
  } catch (err) {
    throw new CliError(`the chain migration failed (${ctx.where}): ${(err as Error).message}`);
  } finally {
    progress.stop();
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (out.json) {
    for (const a of result.anchored) await out.record({ kind: 'anchored', ...a });
    for (const s of result.skipped) await out.record({ kind: 'skipped', ...s });
    await out.record({
      kind: 'summary',
      dryRun: Boolean(options.dryRun),
      upToPosition: result.upToPosition,
      events: result.events,
      unchainedStreams: result.unchainedStreams,
      unchainedEvents: result.unchainedEvents,
      anchored: result.anchored.length,
      wouldAnchor: options.dryRun ? result.unchainedStreams - result.skipped.length - result.alreadyAnchored : 0,
      alreadyAnchored: result.alreadyAnchored,
      skipped: result.skipped.length,
      seconds: Number(seconds.toFixed(3)),
    });
    return result.skipped.length ? 1 : 0;
  }
  const c = out.c;
  if (result.skipped.length) {
    await out.line(
      out.table(
        ['Stream not anchored', 'Why'],
        result.skipped.map((s) => [s.streamId, s.reason]),
      ),
    );
  }
  const todo = result.unchainedStreams - result.skipped.length - result.alreadyAnchored;
  if (options.dryRun) {
    await out.line(
      `Dry run: ${todo} streams would be anchored (${result.unchainedEvents} unchained events in ${result.unchainedStreams} streams; ${result.alreadyAnchored} already anchored). Nothing was written.`,
    );
  } else if (result.anchored.length) {
    await out.line(
      `${c.green(c.bold('Anchored'))} the unchained events of ${result.anchored.length} streams in ${CHAIN_ANCHOR_STREAM} (${result.alreadyAnchored} were already anchored; ${result.events} events read up to position ${result.upToPosition} in ${seconds.toFixed(2)} s). ` +
        'From now on svc verify checks them against these anchors: this proves they are unchanged since now, and nothing about before.',
    );
  } else {
    await out.line(
      `Nothing to anchor: ${result.unchainedStreams ? `the unchained events of all ${result.alreadyAnchored} streams that have them are already anchored` : 'every event up to position ' + result.upToPosition + ' is chained'}.`,
    );
  }
  // Streams whose unchained events have a gap cannot be anchored (svc verify names the fault).
  return result.skipped.length ? 1 : 0;
}
