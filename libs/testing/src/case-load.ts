import { randomUUID } from 'node:crypto';
import type { EnrolmentTenant } from './index';
import { FaultSuite, WebhookReceiver, appExits, eventually, subscribedTenant } from './faults';
import type { DistributedTopology } from './topology';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type CaseLoadOptions = { updaters?: number; ackEveryMs?: number; openEveryMs?: number; updateEveryMs?: number };

/**
 * A steady load of writes through a topology's gateway for the fault tests, each answer recorded
 * with the phase of the fault it arrived in (`phase`, set by the test):
 *
 * - case updates (API key; the case-ledger's progress read model), by `updaters` workers each with
 *   three cases; an update not answered 200 is sent again as it was (same updateId);
 * - acknowledgements (staff; relayed as clinical_case.acknowledged, delivered as webhooks), one case
 *   after the other, a refused one tried again;
 * - new cases (staff; the case-ledger asks the patient-pathway over Kafka first), each opened one
 *   relayed, delivered as a webhook, and marked transportDelivered when the dispatcher's delivery
 *   event reaches the case-ledger.
 *
 * The only refusal accepted is 503 (the client tries again); any other answer stops the load and
 * fails `stop()`. `verify()` waits until every write answered 2xx has its effect, then checks that
 * nothing reached the receiver twice.
 */
export class CaseLoad {
  phase = 'before';
  readonly refused: Record<string, number> = {};
  /** Last update answered 200 per case. */
  readonly acked = new Map<string, { sequence: number; externalReference: string; phase: string }>();
  readonly acknowledged: { caseId: string; phase: string }[] = [];
  readonly opened: { caseId: string; phase: string }[] = [];
  /** Counts of 2xx answers by phase. */
  readonly answered: Record<string, number> = {};
  private running = false;
  private load: Promise<unknown> | undefined;
  private failure: Error | undefined;
  private updateCases: string[] = [];
  private toAck: string[] = [];

  constructor(
    readonly topology: DistributedTopology,
    readonly tenant: EnrolmentTenant,
    readonly patientId: string,
    readonly options: CaseLoadOptions = {},
  ) {}

  private open() {
    return this.topology.api.post(
      `${this.tenant.env}/clinical-cases`,
      { patientId: this.patientId, request: 'Please review the medication plan (canary-staff-note)' },
      this.tenant.staff,
    );
  }

  /** Opens the cases the load updates and acknowledges (before any fault). */
  async prepare(toAcknowledge = 34): Promise<void> {
    const updaters = this.options.updaters ?? 2;
    const n = 3 * updaters + toAcknowledge;
    const ids: string[] = [];
    // A 503 is tried again, as a client does (the first patient lookups of a new topology can time out).
    const openOne = async () => {
      for (let attempt = 1; ; attempt++) {
        const r = await this.open();
        if (r.status === 201) return r.body.caseId as string;
        if (r.status !== 503 || attempt === 10) throw new Error(`open case: ${r.status} ${r.text}`);
        await sleep(1000);
      }
    };
    for (let i = 0; i < n; i += 8) {
      for (const caseId of await Promise.all(Array.from({ length: Math.min(8, n - i) }, openOne))) {
        ids.push(caseId);
        this.opened.push({ caseId, phase: 'prepare' });
      }
    }
    this.updateCases = ids.slice(0, 3 * updaters);
    this.toAck = ids.slice(3 * updaters);
  }

  private ok(): void {
    this.answered[this.phase] = (this.answered[this.phase] ?? 0) + 1;
  }

  private refuse(status: number, text: string, what: string): void {
    if (status !== 503) throw new Error(`${what}: unexpected answer ${status} ${text.slice(0, 300)} (phase ${this.phase})`);
    this.refused[this.phase] = (this.refused[this.phase] ?? 0) + 1;
  }

  private async updater(cases: string[]): Promise<void> {
    const api = this.topology.api;
    const seq = new Map(cases.map((c) => [c, 0]));
    const pending = new Map<string, { updateId: string; sequence: number; status: string; externalReference: string }>();
    while (this.running) {
      for (const caseId of cases) {
        const next = seq.get(caseId)! + 1;
        const body = pending.get(caseId) ?? {
          updateId: randomUUID(),
          sequence: next,
          status: next === 1 ? 'processed' : next % 2 ? 'patient_contacted' : 'clinician_responded',
          externalReference: `ref-${next}-${randomUUID()}`,
        };
        pending.set(caseId, body);
        const r = await api.post(`/v1/clinical-cases/${caseId}/updates`, body, this.tenant.apiKey);
        if (r.status === 200) {
          this.ok();
          seq.set(caseId, next);
          pending.delete(caseId);
          this.acked.set(caseId, { sequence: next, externalReference: body.externalReference, phase: this.phase });
        } else this.refuse(r.status, r.text, 'update');
        await sleep(this.options.updateEveryMs ?? 100);
      }
    }
  }

  private async acker(): Promise<void> {
    while (this.running && this.toAck.length) {
      const r = await this.topology.api.post(`${this.tenant.env}/clinical-cases/${this.toAck[0]}/acknowledge`, undefined, this.tenant.staff);
      if (r.status === 200) {
        this.ok();
        this.acknowledged.push({ caseId: this.toAck.shift()!, phase: this.phase });
      } else this.refuse(r.status, r.text, 'acknowledge');
      await sleep(this.options.ackEveryMs ?? 1000);
    }
  }

  private async opener(): Promise<void> {
    while (this.running) {
      const r = await this.open();
      if (r.status === 201) {
        this.ok();
        this.opened.push({ caseId: r.body.caseId, phase: this.phase });
      } else this.refuse(r.status, r.text, 'open');
      await sleep(this.options.openEveryMs ?? 1000);
    }
  }

  start(): void {
    this.running = true;
    const cases = this.updateCases;
    const workers = [];
    for (let i = 0; i < cases.length; i += 3) workers.push(this.updater(cases.slice(i, i + 3)));
    this.load = Promise.all([...workers, this.acker(), this.opener()]).catch((err: Error) => {
      this.running = false;
      this.failure = err;
    });
  }

  /** Writes answered 2xx in a phase. */
  count(phase: string): number {
    return this.answered[phase] ?? 0;
  }

  /** Writes refused with 503 in a phase. */
  refusedIn(phase: string): number {
    return this.refused[phase] ?? 0;
  }

  /** Cases opened (answered 201) in a phase. */
  openedIn(phase: string): number {
    return this.opened.filter((o) => o.phase === phase).length;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.load;
    if (this.failure) throw this.failure;
  }

  /**
   * Waits until every write answered 2xx has its effect: the last acknowledged update in each
   * case's progress, a webhook for each opened and each acknowledged case, transportDelivered on
   * each opened case. Then, `settleMs` later, checks that no event id reached the receiver twice
   * and that each case's opened and acknowledged webhooks came once. Throws what is missing.
   */
  async verify(receiver: WebhookReceiver, timeoutMs = 90_000, settleMs = 5000): Promise<void> {
    const api = this.topology.api;
    const key = this.tenant.apiKey;
    await eventually(
      async () => {
        for (const [caseId, a] of this.acked) {
          const p = await api.get(`/v1/clinical-cases/${caseId}/progress`, key);
          if (p.status !== 200 || p.body.sequence !== a.sequence || p.body.externalReference !== a.externalReference) return false;
        }
        return true;
      },
      timeoutMs,
      'every acknowledged update in the progress',
    );
    const openedIds = this.opened.map((o) => o.caseId);
    const ackIds = this.acknowledged.map((a) => a.caseId);
    const missing = () => ({
      opened: openedIds.filter((id) => !receiver.caseIds('clinical_case.opened').includes(id)).length,
      acknowledged: ackIds.filter((id) => !receiver.caseIds('clinical_case.acknowledged').includes(id)).length,
    });
    await eventually(
      () => missing().opened === 0 && missing().acknowledged === 0,
      timeoutMs,
      `every opened and acknowledged case delivered as a webhook (missing ${JSON.stringify(missing())} of ${openedIds.length} opened and ${ackIds.length} acknowledged)`,
    );
    let notDelivered = openedIds.length;
    await eventually(
      async () => {
        notDelivered = 0;
        for (const id of openedIds) {
          const p = await api.get(`/v1/clinical-cases/${id}/progress`, key);
          if (p.body?.transportDelivered !== true) notDelivered++;
        }
        return notDelivered === 0;
      },
      timeoutMs,
      `every opened case marked transportDelivered (the dispatcher's delivery events consumed by the case-ledger; ${notDelivered} not)`,
      1000,
    );
    await sleep(settleMs);
    const dup = receiver.duplicates();
    if (Object.keys(dup).length) throw new Error(`webhook event ids delivered more than once: ${JSON.stringify(dup)}`);
    for (const [type, ids] of [
      ['clinical_case.opened', openedIds],
      ['clinical_case.acknowledged', ackIds],
    ] as const) {
      const arrived = receiver.caseIds(type);
      const twice = arrived.filter((id, i) => arrived.indexOf(id) !== i);
      if (twice.length) throw new Error(`${type} delivered more than once for cases ${twice.join(', ')} (${ids.length} written)`);
    }
  }

  summary(): string {
    return `answered 2xx ${JSON.stringify(this.answered)}, refused 503 ${JSON.stringify(this.refused)}, cases opened ${this.opened.length}, acknowledged ${this.acknowledged.length}, updated ${this.acked.size}`;
  }
}

/**
 * One fault test's run under a CaseLoad: a tenant subscribed at the suite's receiver with an
 * enrolled patient, the load's cases prepared, the apps' pids at the start, and timed marks of the
 * test's steps for its summary line.
 */
export class FaultRun {
  /** The steps so far, each with its time since the start ("broker stopped 9.8s"). */
  readonly marks: string[] = [];

  private constructor(
    private readonly suite: FaultSuite,
    readonly load: CaseLoad,
    readonly pidsBefore: ReadonlyMap<string, number>,
    private readonly t0: number,
  ) {}

  /** Prepares `cases` cases to acknowledge (default 30) before any fault; marks "set up". */
  static async start(suite: FaultSuite, options: CaseLoadOptions = {}, cases = 30): Promise<FaultRun> {
    const t0 = Date.now();
    const { t, patientId } = await subscribedTenant(suite);
    const load = new CaseLoad(suite.topology, t, patientId, options);
    await load.prepare(cases);
    const run = new FaultRun(suite, load, new Map(suite.topology.pids), t0);
    run.mark('set up');
    return run;
  }

  mark(what: string): void {
    this.marks.push(`${what} ${Math.round((Date.now() - this.t0) / 100) / 10}s`);
  }

  /** The apps (but `except`) that exited (each with the lines before it) or run under another pid than at the start. */
  restarts(except: string[] = []): string[] {
    const { topology } = this.suite;
    const exits = appExits(topology).filter((line) => !except.some((app) => line.startsWith(`distributed: ${app} exited`)));
    const moved = [...this.pidsBefore]
      .filter(([app, pid]) => !except.includes(app) && topology.pids.get(app) !== pid)
      .map(([app, pid]) => `${app}: pid ${pid} at the start, ${topology.pids.get(app)} now`);
    return [...exits, ...moved];
  }
}
