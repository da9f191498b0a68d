import { readFileSync, writeFileSync } from 'node:fs';
import type { ChainAnchor, ChainIssue, ChainVerifier as Verifier } from '@svc/eventstore';
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
  if (parsed?.kind !== 'svc-chain-anchor' || !parsed.streams || typeof parsed.streams !== 'object') throw new CliError(`--anchor ${path}: not an anchor file written by svc verify --save-anchor`);
  const anchors = new Map<string, ChainAnchor>();
  for (const [streamId, a] of Object.entries(parsed.streams)) {
    if (!a || !Number.isSafeInteger(a.revision) || typeof a.hash !== 'string') throw new CliError(`--anchor ${path}: bad entry for ${streamId}`);
    anchors.set(streamId, { revision: a.revision, hash: a.hash });
  }
  return anchors;
}

/**
 * `svc verify`: recomputes the hash chain of one stream or of the whole log from the events as
 * stored (no key needed) and names the first event that does not match. Exit code 1 when any does.
 */
export async function verifyCommand(ctx: Context, stream: string | undefined, options: VerifyOptions): Promise<number> {
  const { out, store } = ctx;
  if ((stream === undefined) === !options.all) throw new CliError('verify: give a <stream> or --all');
  const { ChainVerifier } = await import('@svc/eventstore');
  let anchors = options.anchor ? readAnchors(options.anchor) : undefined;
  if (anchors && stream !== undefined) anchors = new Map([...anchors].filter(([s]) => s === stream));
  const chainStart = options.chainStart !== undefined ? parsePosition(options.chainStart, '--chain-start') : stream !== undefined ? null : 'first-chained';
  const verifier: Verifier = new ChainVerifier({ chainStart, anchors });
  const upTo = await store.headPosition();
  const started = process.hrtime.bigint();
  if (stream !== undefined) {
    for (const e of await store.readStream(stream)) if (e.position <= upTo) verifier.add(e);
  } else {
    const progress = out.progress('verify', 0, upTo);
    try {
      for await (const e of scanLog(store, { upTo, progress })) verifier.add(e);
    } finally {
      progress.stop();
    }
  }
  const issues: ChainIssue[] = [...verifier.issues(), ...verifier.finish(true)];
  // Nothing to verify is not a pass: the stream may be gone (a saved anchor says so, as a fault).
  if (stream !== undefined && verifier.events === 0 && !issues.length) throw new CliError(`${stream}: no such stream up to position ${upTo} (${ctx.where})`);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const reports = verifier.reports();
  const chained = reports.reduce((n, r) => n + r.chained, 0);
  const unchained = reports.reduce((n, r) => n + r.unchained, 0);
  const unchainedStreams = reports.filter((r) => r.unchained > 0 && !r.issue);
  const perSecond = seconds > 0 ? Math.round(verifier.events / seconds) : verifier.events;
  const first = issues[0] ?? null;

  if (options.saveAnchor && !issues.length) {
    const file: AnchorFile = { kind: 'svc-chain-anchor', savedAt: new Date().toISOString(), upToPosition: upTo, streams: {} };
    for (const r of reports) if (r.lastHash) file.streams[r.streamId] = { revision: r.lastRevision, hash: r.lastHash };
    writeFileSync(options.saveAnchor, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  }

  if (out.json) {
    for (const i of issues) await out.record({ kind: 'issue', ...i });
    for (const r of unchainedStreams) await out.record({ kind: 'unchained', streamId: r.streamId, unchained: r.unchained, chained: r.chained });
    await out.record({
      kind: 'summary',
      ok: issues.length === 0,
      stream: stream ?? null,
      upToPosition: upTo,
      streams: reports.length,
      events: verifier.events,
      chained,
      unchained,
      issues: issues.length,
      firstBadEvent: first,
      chainedFrom: verifier.chainedFrom,
      anchorSaved: Boolean(options.saveAnchor && !issues.length),
      seconds: Number(seconds.toFixed(3)),
      eventsPerSecond: perSecond,
    });
    return issues.length ? 1 : 0;
  }

  const c = out.c;
  const summary = out.table(
    ['Streams', 'Events', 'Chained', 'Unchained (before the chain)', 'Faults', 'Checked'],
    [
      [
        reports.length.toLocaleString('en-US'),
        verifier.events.toLocaleString('en-US'),
        chained.toLocaleString('en-US'),
        unchained ? c.yellow(`${unchained.toLocaleString('en-US')} in ${unchainedStreams.length} streams`) : '0',
        issues.length ? c.red(String(issues.length)) : c.green('0'),
        `${perSecond.toLocaleString('en-US')} events/s (${seconds.toFixed(2)} s)`,
      ],
    ],
  );
  await out.line(summary);
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
  const era = verifier.chainedFrom !== null && stream === undefined ? `; every event from position ${verifier.chainedFrom} on is chained` : '';
  await out.line(`${c.green(c.bold('OK'))}: ${verifier.events.toLocaleString('en-US')} events up to position ${upTo} match their hash chain${era}${unchained ? ` (${unchained} written before the chain existed are unchained: not checked)` : ''}${options.anchor ? '; every saved anchor is still in place' : ''}${options.saveAnchor ? `; anchor saved to ${options.saveAnchor}` : ''}.`);
  return 0;
}
