import { readFileSync, writeFileSync } from 'node:fs';
import type {
  ChainAnchor,
  ChainIssue,
  CheckpointIssue,
  CheckpointReport,
  CheckpointVerifier as CheckpointsVerifier,
  ChainVerifier as Verifier,
} from '@svc/eventstore';
import { Context, parsePosition, scanLog } from '../context';
import { CliError, shortId } from '../output';

export interface VerifyOptions {
  all?: boolean;
  chainStart?: string;
  anchor?: string;
  saveAnchor?: string;
}

/** The file `--save-anchor` writes and `--anchor` reads: each chained stream's last revision and hash. */
interface AnchorFile {
  kind: 'svc-chain-anchor';
  savedAt: string;
  upToPosition: number;
  streams: Record<string, ChainAnchor>;
}

function readAnchors(path: string): Map<string, ChainAnchor> {
  let parsed: AnchorFile;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new CliError(`--anchor ${path}: ${(err as Error).message}`);
  }
  if (parsed?.kind !== 'svc-chain-anchor' || !parsed.streams || typeof parsed.streams !== 'object')
    throw new CliError(`--anchor ${path}: not an anchor file written by svc verify --save-anchor`);
  const anchors = new Map<string, ChainAnchor>();
  for (const [streamId, a] of Object.entries(parsed.streams)) {
    if (!a || !Number.isSafeInteger(a.revision) || typeof a.hash !== 'string') throw new CliError(`--anchor ${path}: bad entry for ${streamId}`);
    anchors.set(streamId, { revision: a.revision, hash: a.hash });
  }
  return anchors;
}

/**
 * `svc verify`: recomputes the hash chain of one stream or of the whole log from the events as
 * stored (no key needed) and names the first event that does not match; with `--all`, also the
 * checkpoints of the global log, naming the first checkpoint (and the part of its range, and the
 * first event there) that does not match. Unchained events the chain migration anchored are checked
 * against their anchor. Exit code 1 when anything does not match.
 */
export async function verifyCommand(ctx: Context, stream: string | undefined, options: VerifyOptions): Promise<number> {
  const { out, store } = ctx;
  if ((stream === undefined) === !options.all) throw new CliError('verify: give a <stream> or --all');
  const { ChainVerifier, CheckpointReader, CheckpointVerifier, readMigrationAnchors } = await import('@svc/eventstore');
  let anchors = options.anchor ? readAnchors(options.anchor) : undefined;
  if (anchors && stream !== undefined) anchors = new Map([...anchors].filter(([s]) => s === stream));
  const chainStart = options.chainStart !== undefined ? parsePosition(options.chainStart, '--chain-start') : stream !== undefined ? null : 'first-chained';
  const upTo = await store.headPosition();
  const started = process.hrtime.bigint();
  // The chain migration's anchors of unchained events, as of the verified head.
  const migration = await readMigrationAnchors(store, upTo);
  let migrationAnchors = migration.anchors;
  if (stream !== undefined) migrationAnchors = new Map([...migrationAnchors].filter(([s]) => s === stream));
  const verifier: Verifier = new ChainVerifier({ chainStart, anchors, migrationAnchors });
  let checkpoints: CheckpointsVerifier | null = null;
  if (stream !== undefined) {
    for (const e of await store.readStream(stream)) if (e.position <= upTo) verifier.add(e);
  } else {
    checkpoints = new CheckpointVerifier(new CheckpointReader(store, upTo));
    const progress = out.progress('verify', 0, upTo);
    try {
      for await (const e of scanLog(store, { upTo, progress })) {
        verifier.add(e);
        if (checkpoints.needs(e.position)) await checkpoints.load();
        checkpoints.add(e);
      }
    } finally {
      progress.stop();
    }
  }
  const issues: ChainIssue[] = [...verifier.issues(), ...verifier.finish(true)];
  for (const f of migration.faults) issues.push({ streamId: 'audit-chain-anchor', revision: -1, position: f.position, eventId: null, reason: f.reason });
  const checkpointReport: CheckpointReport | null = checkpoints ? await checkpoints.finish() : null;
  const checkpointIssue: CheckpointIssue | null = checkpointReport?.issues[0] ?? null;
  const failed = issues.length > 0 || checkpointIssue !== null;
  // Nothing to verify is not a pass: the stream may be gone (a saved anchor says so, as a fault).
  if (stream !== undefined && verifier.events === 0 && !issues.length) throw new CliError(`${stream}: no such stream up to position ${upTo} (${ctx.where})`);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const reports = verifier.reports();
  const chained = reports.reduce((n, r) => n + r.chained, 0);
  const unchained = reports.reduce((n, r) => n + r.unchained, 0);
  const anchored = reports.reduce((n, r) => n + r.anchored, 0);
  const unchainedStreams = reports.filter((r) => r.unchained > r.anchored && !r.issue);
  const perSecond = seconds > 0 ? Math.round(verifier.events / seconds) : verifier.events;
  const first = issues[0] ?? null;

  if (options.saveAnchor && !failed) {
    const file: AnchorFile = { kind: 'svc-chain-anchor', savedAt: new Date().toISOString(), upToPosition: upTo, streams: {} };
    for (const r of reports) if (r.lastHash) file.streams[r.streamId] = { revision: r.lastRevision, hash: r.lastHash };
    writeFileSync(options.saveAnchor, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  }

  if (out.json) {
    for (const i of issues) await out.record({ kind: 'issue', ...i });
    if (checkpointIssue) await out.record({ kind: 'checkpoint-issue', ...checkpointIssue });
    for (const r of unchainedStreams)
      await out.record({ kind: 'unchained', streamId: r.streamId, unchained: r.unchained, anchored: r.anchored, chained: r.chained });
    await out.record({
      kind: 'summary',
      ok: !failed,
      stream: stream ?? null,
      upToPosition: upTo,
      streams: reports.length,
      events: verifier.events,
      chained,
      unchained,
      anchored,
      issues: issues.length,
      firstBadEvent: first,
      chainedFrom: verifier.chainedFrom,
      checkpoints: checkpointReport
        ? {
            checkpoints: checkpointReport.checkpoints,
            coveredTo: checkpointReport.coveredTo,
            coveredEvents: checkpointReport.coveredEvents,
            uncoveredEvents: checkpointReport.uncoveredEvents,
            firstBadCheckpoint: checkpointIssue,
          }
        : null,
      anchorSaved: Boolean(options.saveAnchor && !failed),
      seconds: Number(seconds.toFixed(3)),
      eventsPerSecond: perSecond,
    });
    return failed ? 1 : 0;
  }

  const c = out.c;
  const summary = out.table(
    ['Streams', 'Events', 'Chained', 'Unchained (before the chain)', ...(checkpointReport ? ['Checkpoints'] : []), 'Faults', 'Checked'],
    [
      [
        reports.length.toLocaleString('en-US'),
        verifier.events.toLocaleString('en-US'),
        chained.toLocaleString('en-US'),
        unchained
          ? `${anchored ? `${anchored.toLocaleString('en-US')} anchored by the migration` : ''}${anchored && unchained > anchored ? ', ' : ''}${unchained > anchored ? c.yellow(`${(unchained - anchored).toLocaleString('en-US')} not anchored, in ${unchainedStreams.length} streams`) : ''}`
          : '0',
        ...(checkpointReport
          ? [
              checkpointReport.checkpoints
                ? `${checkpointReport.checkpoints.toLocaleString('en-US')}, up to position ${checkpointReport.coveredTo}`
                : c.yellow('none yet'),
            ]
          : []),
        issues.length || checkpointIssue ? c.red(String(issues.length + (checkpointIssue ? 1 : 0))) : c.green('0'),
        `${perSecond.toLocaleString('en-US')} events/s (${seconds.toFixed(2)} s)`,
      ],
    ],
  );
  await out.line(summary);
  if (checkpointIssue) {
    const i = checkpointIssue;
    const where = i.firstEvent
      ? `; the first event there is ${i.firstEvent.streamId} revision ${i.firstEvent.revision} at position ${i.firstEvent.position}${i.firstEvent.eventId ? ` (event ${i.firstEvent.eventId})` : ''}`
      : '';
    await out.line(
      c.red(c.bold('TAMPERING EVIDENT: ')) +
        `checkpoint ${i.checkpoint}${i.checkpointPosition ? ` (position ${i.checkpointPosition})` : ''}, covering positions (${i.afterPosition}, ${i.toPosition}], does not match the log in positions (${i.fromPosition}, ${i.throughPosition}]: ${i.reason}${where}.`,
    );
  }
  if (issues.length) {
    await out.line(
      out.table(
        ['Stream', 'Rev', 'Pos', 'Event id', 'What is wrong'],
        issues.map((i) => [i.streamId, String(i.revision), i.position ? String(i.position) : '–', shortId(i.eventId), i.reason]),
        { wordWrap: true, colWidths: [null, null, null, null, Math.max(40, (out.columns ?? 160) - 90)] },
      ),
    );
    await out.line(
      c.red(c.bold('TAMPERING EVIDENT: ')) +
        `the first event that does not match is ${first!.streamId} revision ${first!.revision}${first!.position ? ` at position ${first!.position}` : ''}${first!.eventId ? ` (event ${first!.eventId})` : ''}: ${first!.reason}`,
    );
    return 1;
  }
  if (checkpointIssue) return 1;
  const era = verifier.chainedFrom !== null && stream === undefined ? `; every event from position ${verifier.chainedFrom} on is chained` : '';
  const before = unchained
    ? ` (${unchained} written before the chain existed are unchained: ${anchored ? `${anchored} match the chain migration's anchors` : ''}${anchored && unchained > anchored ? ', ' : ''}${unchained > anchored ? `${unchained - anchored} not checked (svc migrate-chain anchors them)` : ''})`
    : '';
  const covered = checkpointReport
    ? checkpointReport.checkpoints
      ? `; ${checkpointReport.checkpoints} checkpoints match the log up to position ${checkpointReport.coveredTo}${checkpointReport.uncoveredEvents ? ` (the ${checkpointReport.uncoveredEvents} events after it are not in a checkpoint yet)` : ''}`
      : '; no checkpoint yet'
    : '';
  await out.line(
    `${c.green(c.bold('OK'))}: ${verifier.events.toLocaleString('en-US')} events up to position ${upTo} match their hash chain${era}${before}${covered}${options.anchor ? '; every saved anchor is still in place' : ''}${options.saveAnchor ? `; anchor saved to ${options.saveAnchor}` : ''}.`,
  );
  return 0;
}
