import { Context, scanLog } from '../context';
import { shortId } from '../output';
import { categoryOf, categoryPrefix } from '../vocabulary';

export interface StreamsOptions {
  category?: string;
  org?: string;
  env?: string;
}

interface StreamSummary {
  streamId: string;
  category: string | null;
  events: number;
  firstPosition: number;
  lastPosition: number;
  lastRevision: number;
  lastType: string;
  lastRecordedAt: string | null;
  organizationId: string | null;
  environmentId: string | null;
  /** Events carrying the hash chain (docs/audit.md). */
  chained: number;
}

/** `svc streams`: every stream of the log (read once, up to its head) with its event count and last position. */
export async function streamsCommand(ctx: Context, options: StreamsOptions): Promise<number> {
  const { out, store } = ctx;
  const prefix = options.category ? categoryPrefix(options.category) : null;
  const upTo = await store.headPosition();
  const progress = out.progress('streams', 0, upTo);
  const streams = new Map<string, StreamSummary>();
  let events = 0;
  try {
    for await (const e of scanLog(store, { upTo, progress })) {
      events++;
      if (prefix && !e.streamId.startsWith(prefix)) continue;
      let s = streams.get(e.streamId);
      if (!s) {
        s = {
          streamId: e.streamId,
          category: categoryOf(e.streamId)?.name ?? null,
          events: 0,
          firstPosition: e.position,
          lastPosition: 0,
          lastRevision: -1,
          lastType: '',
          lastRecordedAt: null,
          organizationId: null,
          environmentId: null,
          chained: 0,
        };
        streams.set(e.streamId, s);
      }
      s.events++;
      s.lastPosition = e.position;
      s.lastRevision = e.revision;
      s.lastType = e.type;
      s.lastRecordedAt = e.metadata?.recordedAt ?? null;
      s.organizationId ??= e.metadata?.organizationId ?? null;
      s.environmentId ??= e.metadata?.environmentId ?? null;
      if (typeof e.metadata?.hash === 'string') s.chained++;
    }
  } finally {
    progress.stop();
  }
  const selected = [...streams.values()]
    .filter((s) => (!options.org || s.organizationId === options.org) && (!options.env || s.environmentId === options.env))
    .sort((a, b) => a.streamId.localeCompare(b.streamId));
  if (out.json) {
    for (const s of selected) await out.record(s);
    return 0;
  }
  const c = out.c;
  if (selected.length) {
    await out.line(
      out.table(
        ['Stream', 'Events', 'Last rev', 'Last pos', 'Last event', 'Last at', 'Tenant', 'Chain'],
        selected.map((s) => [
          s.streamId,
          { content: s.events.toLocaleString('en-US'), hAlign: 'right' },
          { content: String(s.lastRevision), hAlign: 'right' },
          { content: String(s.lastPosition), hAlign: 'right' },
          s.lastType,
          s.lastRecordedAt ?? '–',
          s.organizationId ? `${shortId(s.organizationId)}/${shortId(s.environmentId)}` : c.dim('service'),
          s.chained === s.events ? c.green('yes') : s.chained === 0 ? c.yellow('no') : c.yellow(`from rev ${s.events - s.chained}`),
        ]),
      ),
    );
  }
  const total = selected.reduce((n, s) => n + s.events, 0);
  await out.line(
    `${c.bold(String(selected.length))} streams, ${total.toLocaleString('en-US')} events${prefix || options.org || options.env ? ` (of ${events.toLocaleString('en-US')} in the log)` : ''}; log head ${upTo} (${ctx.where})`,
  );
  return 0;
}
