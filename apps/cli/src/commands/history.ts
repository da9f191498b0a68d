import type { RecordedEvent } from '@svc/eventstore';
import { Context, auditActor, keyringFor, recordDecryptingRead, scanLog } from '../context';
import { CliError, shortId } from '../output';
import { HISTORY_KINDS, HistoryKind, categoryOf, concernPrefixes, details, phrase } from '../vocabulary';
import { ShownEvent, showEvent } from './replay';

export interface HistoryOptions {
  decrypt?: boolean;
  actor?: string;
}

/** Does any string in the value (at any depth) equal `id`? */
function mentions(value: unknown, id: string, depth = 0): boolean {
  if (typeof value === 'string') return value === id;
  if (!value || typeof value !== 'object' || depth > 8) return false;
  for (const v of Array.isArray(value) ? value : Object.values(value)) if (mentions(v, id, depth + 1)) return true;
  return false;
}

/**
 * `svc history <kind> <id>`: one timeline of everything that concerns a case, patient,
 * conversation or workflow, across streams, in the contract's words.
 *
 * Which events: (1) the streams whose name holds the id; (2) events of the same requests
 * (correlation id) and their causes and consequences (causation ids), whatever their stream;
 * (3) the whole stream of any of those in a category that concerns the subject (a check-in that
 * opened the case, the webhook deliveries of its events); and, with --decrypt only, (4) streams of
 * those categories whose payloads name the id (a patient's check-ins and cases). Steps 1-3 read
 * metadata and stream names only; step 4 opens payloads, so it runs after the read is recorded.
 */
export async function historyCommand(ctx: Context, kind: string, id: string, options: HistoryOptions): Promise<number> {
  const { out, store } = ctx;
  if (!(HISTORY_KINDS as readonly string[]).includes(kind)) throw new CliError(`history: the kind is one of ${HISTORY_KINDS.join(', ')}`);
  if (!/^[A-Za-z0-9_-]{8,}$/.test(id)) throw new CliError('history: the id is the uuid of the case, patient, conversation or workflow');
  const concerns = concernPrefixes(kind as HistoryKind);
  const concerned = (streamId: string) => concerns.some((p) => streamId.startsWith(p));
  const actor = options.decrypt ? auditActor(options.actor) : null;
  const keyFor = options.decrypt ? await keyringFor(ctx) : null;
  const upTo = await store.headPosition();

  // Pass 1: the streams named after the subject, and what links out of them.
  const included = new Map<number, RecordedEvent>();
  const correlations = new Set<string>();
  const eventIds = new Set<string>();
  const causes = new Set<string>();
  const include = (e: RecordedEvent) => {
    if (included.has(e.position)) return;
    included.set(e.position, e);
    if (e.metadata?.eventId) eventIds.add(e.metadata.eventId);
    if (e.metadata?.causationId) causes.add(e.metadata.causationId);
  };
  let progress = out.progress('history 1/2', 0, upTo);
  try {
    for await (const e of scanLog(store, { upTo, progress })) {
      if (!e.streamId.includes(id)) continue;
      include(e);
      if (e.metadata?.correlationId) correlations.add(e.metadata.correlationId);
    }
  } finally {
    progress.stop();
  }
  const named = [...new Set([...included.values()].map((e) => e.streamId))].sort();
  if (!named.length && !options.decrypt) {
    if (out.json) return 0;
    await out.line(`no stream is named after ${kind} ${id} up to position ${upTo} (${ctx.where})`);
    return 0;
  }

  if (options.decrypt) {
    await recordDecryptingRead(ctx, {
      actor: actor!,
      command: 'history',
      selection: { kind, id, searchedCategories: concerns },
      streams: named,
      upToPosition: upTo,
    });
  }
  const { openSealedData } = await import('@svc/eventstore');
  const open = keyFor ? (e: RecordedEvent) => openSealedData(e, keyFor) : null;

  // Pass 2: events of the same requests, causes and consequences; with --decrypt, payloads naming the subject.
  const wholeStreams = new Set<string>();
  progress = out.progress('history 2/2', 0, upTo);
  try {
    for await (const e of scanLog(store, { upTo, progress })) {
      const m = e.metadata;
      const linked =
        included.has(e.position) ||
        (m?.correlationId && correlations.has(m.correlationId)) ||
        (m?.eventId && causes.has(m.eventId)) ||
        (m?.causationId && eventIds.has(m.causationId));
      if (linked) include(e);
      else if (open && concerned(e.streamId) && !wholeStreams.has(e.streamId)) {
        let data: unknown;
        try {
          data = open(e);
        } catch {
          continue;
        }
        if (mentions(data, id)) wholeStreams.add(e.streamId);
      }
    }
  } finally {
    progress.stop();
  }
  for (const e of included.values()) if (concerned(e.streamId)) wholeStreams.add(e.streamId);
  for (const streamId of wholeStreams) for (const e of await store.readStream(streamId)) if (e.position <= upTo) include(e);

  const events = [...included.values()].sort((a, b) => a.position - b.position);
  const shown: (ShownEvent & { what: string; category: string | null })[] = [];
  for (const e of events) shown.push({ ...(await showEvent(e, open)), what: phrase(e.type), category: categoryOf(e.streamId)?.name ?? null });

  if (out.json) {
    for (const s of shown) await out.record(s);
    return 0;
  }
  const c = out.c;
  const streams = [...new Set(events.map((e) => e.streamId))];
  await out.line(c.bold(`History of ${kind} ${id}`) + c.dim(` — ${events.length} events in ${streams.length} streams, up to position ${upTo} (${ctx.where})`));
  const rows = shown.map((s) => {
    const extra = s.decryptError ? c.red(' (cannot open)') : s.data !== undefined ? c.dim(` ${details(s.data, id)}`) : '';
    const cat = categoryOf(s.streamId);
    const where = cat ? `${cat.name} ${shortId(s.streamId.slice(cat.prefix.length))}` : s.streamId;
    return [s.recordedAt ?? '–', `${s.what}${extra}`, where, s.actor ?? '–', { content: String(s.position), hAlign: 'right' as const }];
  });
  await out.line(out.table(['Time', 'What', 'Where', 'Who', 'Pos'], rows));
  const legend = streams.map((s) => `  ${c.dim(categoryOf(s)?.name ?? 'stream')} ${s}`).join('\n');
  await out.line(`Streams:\n${legend}`);
  if (!options.decrypt)
    await out.line(
      c.dim(
        'Payloads are encrypted at rest: --decrypt also finds streams whose payloads name the subject, and shows their details (recorded in the audit stream).',
      ),
    );
  return 0;
}
