import type { RecordedEvent } from '@svc/eventstore';
import { compareKeys } from './projection-batch';
import { Projection, ProjectionTx, PutOptions, RebuiltDoc, RebuiltReadModel, validateCollection, validateOps } from './types';

interface MemoryDoc {
  partition: string | null;
  score: number;
  json: string;
}

/** A projection's apply failed during a replay: names it, the event's position and type (never its data). */
export class ProjectionReplayError extends Error {
  constructor(
    readonly projection: string,
    readonly position: number,
    readonly eventType: string,
    readonly cause: unknown,
  ) {
    super(`projection ${projection} failed on the event at position ${position} (${eventType}): ${cause instanceof Error ? cause.name : typeof cause}`);
    this.name = 'ProjectionReplayError';
  }
}

/**
 * One projection's read model held in memory while it is rebuilt: documents by collection, each
 * kept as its JSON (a read parses a fresh copy, as the stores do; a write serializes once).
 */
class MemoryReadModel {
  readonly docs = new Map<string, Map<string, MemoryDoc>>();
  events = 0;

  constructor(readonly projection: Projection) {
    for (const c of projection.collections ?? []) this.docs.set(c, new Map());
  }

  private collection(name: string): Map<string, MemoryDoc> {
    const c = this.docs.get(name);
    if (!c) throw new Error(`projection ${this.projection.name} writes collection ${name}, which it does not declare in its collections`);
    return c;
  }

  readonly tx: ProjectionTx = {
    get: async <T>(collection: string, key: string): Promise<T | null> => {
      const d = this.collection(collection).get(key);
      return d ? (JSON.parse(d.json) as T) : null;
    },
    list: async <T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]> => {
      const entries: { key: string; doc: MemoryDoc }[] = [];
      for (const [key, doc] of this.collection(collection)) if (doc.partition === partition) entries.push({ key, doc });
      entries.sort((a, b) => a.doc.score - b.doc.score || compareKeys(a.key, b.key));
      const limited = options?.limit === undefined ? entries : entries.slice(0, options.limit);
      return limited.map((e) => JSON.parse(e.doc.json) as T);
    },
    put: (collection: string, key: string, doc: unknown, options?: PutOptions): void => {
      if (doc === undefined) throw new TypeError('read-store doc must not be undefined');
      validateOps([{ op: 'put', collection, key, doc, partition: options?.partition, score: options?.score }]);
      const json = JSON.stringify(doc);
      this.collection(collection).set(key, { partition: options?.partition ?? null, score: options?.score ?? 0, json });
    },
    delete: (collection: string, key: string): void => {
      validateOps([{ op: 'delete', collection, key }]);
      this.collection(collection).delete(key);
    },
  };

  get size(): number {
    let n = 0;
    for (const c of this.docs.values()) n += c.size;
    return n;
  }

  /** Each collection's documents in key order (the stores' own order: inserting in it is quickest). */
  *entries(): Iterable<RebuiltDoc> {
    for (const [collection, docs] of this.docs) {
      const keys = [...docs.keys()].sort(compareKeys);
      for (const key of keys) {
        const d = docs.get(key) as MemoryDoc;
        yield { collection, key, partition: d.partition, score: d.score, json: d.json };
      }
    }
  }
}

/** What one projection's replay produced. */
export interface ReplayedProjection {
  name: string;
  /** Events of its streams applied. */
  events: number;
  documents: number;
  collections: readonly string[];
}

/**
 * Rebuilds read models from the log in memory (`svc rebuild`): every event handed to `apply`
 * in log order goes to each projection whose streams it belongs to, as the ProjectionRunner
 * would apply it, with the read model held in memory instead of the store; `models(position)`
 * then gives what ReadStore.replaceReadModels puts in place in one step. A projection must
 * declare the collections it owns (`Projection.collections`) and write nothing outside them; two
 * projections may not share one. Memory holds every document of the models being rebuilt.
 */
export class ProjectionReplay {
  private readonly models: MemoryReadModel[];
  private position = 0;

  constructor(projections: Projection[]) {
    const owner = new Map<string, string>();
    for (const p of projections) {
      if (!p.collections || p.collections.length === 0) throw new Error(`projection ${p.name} declares no collections: it cannot be rebuilt`);
      for (const c of p.collections) {
        validateCollection(c);
        const other = owner.get(c);
        if (other) throw new Error(`collection ${c} is declared by two projections: ${other} and ${p.name}`);
        owner.set(c, p.name);
      }
    }
    this.models = projections.map((p) => new MemoryReadModel(p));
  }

  /** Applies one event (positions must increase). */
  async apply(event: RecordedEvent): Promise<void> {
    if (event.position <= this.position) throw new RangeError(`replay positions must increase (${event.position} after ${this.position})`);
    this.position = event.position;
    for (const m of this.models) {
      const prefixes = m.projection.streamPrefixes;
      if (prefixes && prefixes.length && !prefixes.some((p) => event.streamId.startsWith(p))) continue;
      m.events++;
      try {
        const r = m.projection.apply(event, m.tx);
        if (r) await r;
      } catch (err) {
        throw new ProjectionReplayError(m.projection.name, event.position, event.type, err);
      }
    }
  }

  /** Per projection: events applied and documents held so far. */
  summary(): ReplayedProjection[] {
    return this.models.map((m) => ({ name: m.projection.name, events: m.events, documents: m.size, collections: [...m.docs.keys()] }));
  }

  /** The rebuilt read models, checkpointed at `position` (the last position the replay covers). */
  readModels(position: number): RebuiltReadModel[] {
    if (!Number.isSafeInteger(position) || position < this.position)
      throw new RangeError(`a replay that applied position ${this.position} cannot be checkpointed at ${position}`);
    return this.models.map((m) => ({ projection: m.projection.name, collections: [...m.docs.keys()], position, docs: () => m.entries(), documents: m.size }));
  }
}
