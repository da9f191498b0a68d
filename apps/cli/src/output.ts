import { once } from 'node:events';
import { SingleBar } from 'cli-progress';
import Table from 'cli-table3';
import pc from 'picocolors';

export type Colors = ReturnType<typeof pc.createColors>;

export interface OutputOptions {
  /** Machine output: one JSON object per line (NDJSON) on stdout, nothing else there. */
  json: boolean;
  /** Progress bar on stderr (default: when stderr is a terminal). */
  progress?: boolean;
}

/**
 * Where a command writes: tables and colours for a person at a terminal, NDJSON for a program
 * (`--json`). Colours only on a terminal and never with NO_COLOR; the progress bar goes to stderr,
 * so stdout stays clean for a pipe. Writes wait for the pipe to drain (a long replay into `less`
 * does not pile up in memory); a closed pipe (`| head`) ends the program quietly (`main`).
 */
export class Output {
  readonly json: boolean;
  readonly c: Colors;
  private readonly progressOn: boolean;

  constructor(
    options: OutputOptions,
    private readonly stdout: NodeJS.WriteStream = process.stdout,
    private readonly stderr: NodeJS.WriteStream = process.stderr,
  ) {
    this.json = options.json;
    const colour = !options.json && Boolean(stdout.isTTY) && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
    this.c = pc.createColors(colour);
    this.progressOn = options.progress ?? Boolean(stderr.isTTY);
  }

  /** Terminal width, when stdout is one. */
  get columns(): number | undefined {
    return this.stdout.isTTY ? this.stdout.columns : undefined;
  }

  async write(text: string): Promise<void> {
    if (!this.stdout.write(text)) await once(this.stdout, 'drain');
  }

  line(text = ''): Promise<void> {
    return this.write(`${text}\n`);
  }

  /** One NDJSON record. */
  record(value: unknown): Promise<void> {
    return this.write(`${JSON.stringify(value)}\n`);
  }

  /** A note for the person (stderr): never mixed into machine output. */
  note(text: string): void {
    this.stderr.write(`${text}\n`);
  }

  table(head: string[], rows: Table.HorizontalTableRow[], options: Partial<Table.TableConstructorOptions> = {}): string {
    const table = new Table({
      head: head.map((h) => this.c.bold(h)),
      style: { head: [], border: [], compact: false },
      ...options,
    });
    table.push(...rows);
    return table.toString();
  }

  /**
   * A progress bar over a range of log positions, with events read, their rate and the time left;
   * a no-op when the bar is off. `update(position, events)` as the work goes.
   */
  progress(label: string, from: number, to: number): Progress {
    if (!this.progressOn || to <= from) return { update: () => undefined, stop: () => undefined };
    const started = Date.now();
    const bar = new SingleBar({
      stream: this.stderr,
      format: `${label} {bar} {percentage}% | {events} events | {rate} events/s | ETA {eta_formatted}`,
      barsize: 30,
      fps: 5,
      hideCursor: true,
      clearOnComplete: true,
      etaBuffer: 50,
    });
    bar.start(to - from, 0, { events: 0, rate: 0 });
    return {
      update: (position, events) => {
        const seconds = Math.max(0.001, (Date.now() - started) / 1000);
        bar.update(Math.min(to, position) - from, { events: events.toLocaleString('en-US'), rate: Math.round(events / seconds).toLocaleString('en-US') });
      },
      stop: () => bar.stop(),
    };
  }
}

export interface Progress {
  update(position: number, events: number): void;
  stop(): void;
}

/** The first characters of an id, for a table cell (the JSON output keeps ids whole). */
export function shortId(id: string | null | undefined, n = 8): string {
  if (!id) return '–';
  return id.length > n + 1 ? `${id.slice(0, n)}…` : id;
}

/** A usage or environment problem: printed as one line, exit code 2. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
