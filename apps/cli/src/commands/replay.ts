import type { RecordedEvent } from '@svc/eventstore';
import { Context, auditActor, keyringFor, parsePosition, parseSince, recordDecryptingRead, scanLog } from '../context';
import { CliError, shortId } from '../output';
import { categoryPrefix } from '../vocabulary';

export interface ReplayOptions {
  category?: string;
  all?: boolean;
  from?: string;
  to?: string;
  since?: string;
  decrypt?: boolean;
  actor?: string;
}

/** One event as the auditor sees it: its metadata, and its data only when in clear or opened with --decrypt. */
export interface ShownEvent {
  position: number;
  streamId: string;
  revision: number;
  type: string;
  recordedAt: string | null;
  actor: string | null;
  correlationId: string | null;
  causationId: string | null;
  organizationId: string | null;
  environmentId: string | null;
  eventId: string | null;
  /** The data is encrypted at rest. */
  sealed: boolean;
  /** Present when in clear, or opened with --decrypt. */
  data?: unknown;
  /** --decrypt could not open it (another key, or altered bytes). */
  decryptError?: string;
}

/** The event as shown: sealed data stays hidden unless `open` is given (--decrypt). */
export async function showEvent(e: RecordedEvent, open: ((e: RecordedEvent) => unknown) | null): Promise<ShownEvent> {
  const { isEncryptedData } = await import('@svc/eventstore');
  const m = (e.metadata ?? {}) as unknown as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  const shown: ShownEvent = {
    position: e.position,
    streamId: e.streamId,
    revision: e.revision,
    type: e.type,
    recordedAt: str(m.recordedAt),
    actor: str(m.actor),
    correlationId: str(m.correlationId),
    causationId: str(m.causationId),
    organizationId: str(m.organizationId),
    environmentId: str(m.environmentId),
    eventId: str(m.eventId),
    sealed: isEncryptedData(e.data),
  };
  if (!shown.sealed) shown.data = e.data;
  else if (open) {
    try {
      shown.data = open(e);
    } catch (err) {
      shown.decryptError = (err as Error).message;
    }
  }
  return shown;
}

/**
 * `svc replay`: events in log order with their metadata (type, time, actor, correlation, causation,
 * tenant). Sealed payloads stay hidden; `--decrypt` opens them with the master key after the run is
 * recorded in the audit stream (nothing is opened or shown if that fails).
 */
export async function replayCommand(ctx: Context, stream: string | undefined, options: ReplayOptions): Promise<number> {
  const { out, store } = ctx;
  const chosen = [stream !== undefined, options.category !== undefined, Boolean(options.all)].filter(Boolean).length;
  if (chosen !== 1) throw new CliError('replay: give exactly one of <stream>, --category <name> or --all');
  const from = options.from === undefined ? 0 : parsePosition(options.from, '--from');
  const to = options.to === undefined ? null : parsePosition(options.to, '--to');
  const since = options.since === undefined ? null : parseSince(options.since);
  const actor = options.decrypt ? auditActor(options.actor) : null;
  const keyFor = options.decrypt ? await keyringFor(ctx) : null;
  const head = await store.headPosition();
  const upTo = to === null ? head : Math.min(to, head);
  const prefix = options.category !== undefined ? categoryPrefix(options.category) : null;

  if (options.decrypt) {
    await recordDecryptingRead(ctx, {
      actor: actor!,
      command: 'replay',
      selection: { stream: stream ?? null, category: options.category ?? null, all: Boolean(options.all), from, to, since },
      streams: stream !== undefined ? [stream] : null,
      upToPosition: upTo,
    });
  }
  const { openSealedData } = await import('@svc/eventstore');
  const open = keyFor ? (e: RecordedEvent) => openSealedData(e, keyFor) : null;
  const wanted = (e: RecordedEvent) =>
    e.position >= from &&
    e.position <= upTo &&
    (!prefix || e.streamId.startsWith(prefix)) &&
    (!since || (typeof e.metadata?.recordedAt === 'string' && e.metadata.recordedAt >= since));

  const printer = new ReplayPrinter(ctx, Boolean(options.decrypt));
  if (stream !== undefined) {
    for (const e of await store.readStream(stream)) if (wanted(e)) await printer.add(await showEvent(e, open));
  } else {
    const progress = out.progress('replay', from > 0 ? from - 1 : 0, upTo);
    try {
      for await (const e of scanLog(store, { after: from > 0 ? from - 1 : 0, upTo, progress })) if (wanted(e)) await printer.add(await showEvent(e, open));
    } finally {
      progress.stop();
    }
  }
  await printer.end(upTo);
  return 0;
}

/** Human output in tables of at most CHUNK events (memory stays bounded on a long replay); NDJSON as it comes. */
class ReplayPrinter {
  private static readonly CHUNK = 200;
  private rows: ShownEvent[] = [];
  private count = 0;
  private sealed = 0;

  constructor(
    private readonly ctx: Context,
    private readonly decrypting: boolean,
  ) {}

  async add(e: ShownEvent): Promise<void> {
    this.count++;
    if (e.sealed && e.data === undefined) this.sealed++;
    if (this.ctx.out.json) return this.ctx.out.record(e);
    this.rows.push(e);
    if (this.rows.length >= ReplayPrinter.CHUNK) await this.flush();
  }

  private async flush(): Promise<void> {
    if (!this.rows.length) return;
    const { out } = this.ctx;
    const c = out.c;
    const withData = this.rows.some((e) => e.data !== undefined || e.decryptError);
    const head = ['Pos', 'Stream', 'Rev', 'Time', 'Type', 'Actor', 'Correlation', 'Causation', 'Tenant'];
    const rows = [];
    for (const e of this.rows) {
      rows.push([
        { content: String(e.position), hAlign: 'right' as const },
        e.streamId,
        { content: String(e.revision), hAlign: 'right' as const },
        e.recordedAt ?? '–',
        c.cyan(e.type),
        e.actor ?? '–',
        shortId(e.correlationId),
        shortId(e.causationId),
        e.organizationId ? `${shortId(e.organizationId)}/${shortId(e.environmentId)}` : c.dim('service'),
      ]);
      if (withData) {
        const body = e.decryptError
          ? c.red(`cannot open: ${e.decryptError}`)
          : e.data !== undefined
            ? JSON.stringify(e.data, null, 2)
            : c.dim('(encrypted at rest: --decrypt to open)');
        rows.push([{ content: body, colSpan: head.length }]);
      }
    }
    this.rows = [];
    await out.line(out.table(head, rows));
  }

  async end(upTo: number): Promise<void> {
    const { out } = this.ctx;
    if (out.json) return;
    await this.flush();
    const c = out.c;
    const hidden = this.sealed ? `; ${this.sealed} payloads encrypted at rest, not shown (--decrypt with the master key opens them)` : '';
    await out.line(
      `${c.bold(String(this.count))} events up to position ${upTo}${hidden}${this.decrypting ? c.yellow('; this decrypting read is recorded in the audit stream') : ''}`,
    );
  }
}
