import type { ReadStore } from '@svc/read-store';

/**
 * Distributed mode's route table (docs/decisions.md, "Distributed topology"): every app but the
 * gateway announces, once it listens, the routes it serves and the address of its internal
 * listener; the gateway routes each request to the app that announced its route. The table is
 * derived from what the apps really serve (`routesOf`, the list the contract test holds to
 * openapi.yaml), so a route added to an app is reachable through the gateway without a second
 * list to keep.
 *
 * Announcements are documents of the shared read store (Redis in distributed mode), one per
 * replica (app + instance id), written again every few seconds as a heartbeat: the gateway
 * spreads an app's routes over its replicas that keep announcing (./replica-pool.ts). They stay
 * when an app stops, so that its routes answer 503 UNAVAILABLE while it is down instead of 404.
 */
export const UPSTREAMS_COLLECTION = 'platform-upstreams';
const PARTITION = 'apps';

export interface AnnouncedRoute {
  method: string;
  /** Fastify's pattern: `/api/organizations/:orgId/...`. */
  url: string;
}

export interface UpstreamAnnouncement {
  app: string;
  /**
   * The replica (SVC_INSTANCE_ID: `case-ledger-2`, a pod's name). Absent in an announcement of
   * one replica written without it: the app's name.
   */
  instance?: string;
  /** Scheme, host and port of the app's internal listener (`http://127.0.0.1:41234`); no path. */
  origin: string;
  routes: AnnouncedRoute[];
  /**
   * Wall time of the announcement. The gateway compares it only with the replica's previous
   * one: a change is a heartbeat, seen on the gateway's own clock.
   */
  announcedAt: string;
}

/** Routes the gateway never forwards: the internal routes of each app (the dev clock it follows). */
export const INTERNAL_PREFIX = '/internal/';

/** The store key of a replica's announcement: `app/instance`. */
export function upstreamKey(announcement: Pick<UpstreamAnnouncement, 'app' | 'instance'>): string {
  return `${announcement.app}/${announcement.instance ?? announcement.app}`;
}

export async function announceUpstream(readStore: ReadStore, announcement: UpstreamAnnouncement): Promise<void> {
  const routes = announcement.routes.filter((r) => !r.url.startsWith(INTERNAL_PREFIX));
  await readStore.write([
    { op: 'put', collection: UPSTREAMS_COLLECTION, key: upstreamKey(announcement), partition: PARTITION, doc: { ...announcement, routes } },
  ]);
}

/** Deletes the announcements of replicas gone for good (keys of `upstreamKey`). */
export async function withdrawUpstreams(readStore: ReadStore, keys: string[]): Promise<void> {
  if (keys.length) await readStore.write(keys.map((key) => ({ op: 'delete' as const, collection: UPSTREAMS_COLLECTION, key })));
}

/** Every announcement in the store (a few apps: one small read). */
export async function readUpstreams(readStore: ReadStore): Promise<UpstreamAnnouncement[]> {
  const docs = await readStore.list<UpstreamAnnouncement>(UPSTREAMS_COLLECTION, PARTITION, { limit: 1000 });
  return docs.filter(isAnnouncement);
}

function isAnnouncement(d: unknown): d is UpstreamAnnouncement {
  const a = d as UpstreamAnnouncement | null;
  return (
    !!a &&
    typeof a.app === 'string' &&
    (a.instance === undefined || typeof a.instance === 'string') &&
    typeof a.origin === 'string' &&
    /^https?:\/\/[^/]+$/.test(a.origin) &&
    Array.isArray(a.routes) &&
    a.routes.every((r) => r && typeof r.method === 'string' && typeof r.url === 'string')
  );
}

export interface RouteMatch {
  app: string;
  /** The owning app's route pattern (what the request log names). */
  route: string;
}

interface Node {
  statics: Map<string, Node>;
  param?: Node;
  /** A `*` pattern ending here: matches the rest of the path, whatever it holds. */
  wildcard?: Map<string, RouteMatch>;
  handlers?: Map<string, RouteMatch>;
}

const newNode = (): Node => ({ statics: new Map() });

/** A segment of a route pattern: static text, a parameter (`:id`, `:id(regex)`, `a-:b`), or the wildcard. */
function segmentKind(segment: string): 'static' | 'param' | 'wildcard' {
  if (segment === '*') return 'wildcard';
  // `::` is Fastify's escaped colon (a literal one).
  return segment.replace(/::/g, '').includes(':') ? 'param' : 'static';
}

/** A static segment as Fastify's router compares it: percent-decoded (a badly encoded one stays as it is). */
function decodeSegment(segment: string): string {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * Which app serves a method and path, by the patterns the apps announced, with the precedence of
 * Fastify's router: at each segment a static match first, then a parameter, then a wildcard,
 * going back when a branch leads nowhere. HEAD follows GET (Fastify serves HEAD for every GET
 * route). A parameter matches any one segment, empty included (the owning app's router then
 * answers what it answers standalone, a 404 for an empty id): the table only has to pick the app,
 * never to be stricter than the app's own router.
 */
export class RouteTable {
  private readonly root = newNode();
  /** The apps that announced a route twice over another app's (reported once by the owner of the table). */
  readonly conflicts: { method: string; url: string; apps: [string, string] }[] = [];

  constructor(upstreams: Iterable<UpstreamAnnouncement>) {
    // In name order, so that a route two apps announce goes to the same one on every gateway.
    for (const u of [...upstreams].sort((a, b) => a.app.localeCompare(b.app))) for (const r of u.routes) this.add(u.app, r);
  }

  private add(app: string, r: AnnouncedRoute): void {
    const method = r.method.toUpperCase();
    const path = r.url.split('?')[0];
    let node = this.root;
    const segments = path.split('/').slice(1);
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i];
      const kind = segmentKind(s);
      if (kind === 'wildcard') {
        node.wildcard ??= new Map();
        this.put(node.wildcard, method, { app, route: r.url });
        return;
      }
      if (kind === 'param') node = node.param ??= newNode();
      else {
        const key = s.replace(/::/g, ':');
        let next = node.statics.get(key);
        if (!next) node.statics.set(key, (next = newNode()));
        node = next;
      }
    }
    node.handlers ??= new Map();
    this.put(node.handlers, method, { app, route: r.url });
  }

  private put(map: Map<string, RouteMatch>, method: string, match: RouteMatch): void {
    const existing = map.get(method);
    if (existing && existing.app !== match.app) {
      this.conflicts.push({ method, url: match.route, apps: [existing.app, match.app] });
      return;
    }
    map.set(method, match);
  }

  /** The app serving `method path` (path without the query), or null: no app serves it. */
  match(method: string, path: string): RouteMatch | null {
    const m = method.toUpperCase();
    const want = m === 'HEAD' ? ['HEAD', 'GET'] : [m];
    const q = path.indexOf('?');
    const segments = (q === -1 ? path : path.slice(0, q)).split('/').slice(1);
    return this.walk(this.root, segments, 0, want);
  }

  private walk(node: Node, segments: string[], i: number, methods: string[]): RouteMatch | null {
    if (i === segments.length) {
      const hit = pick(node.handlers, methods);
      if (hit) return hit;
      return pick(node.wildcard, methods);
    }
    const s = segments[i];
    const next = node.statics.get(decodeSegment(s));
    if (next) {
      const hit = this.walk(next, segments, i + 1, methods);
      if (hit) return hit;
    }
    if (node.param) {
      const hit = this.walk(node.param, segments, i + 1, methods);
      if (hit) return hit;
    }
    return pick(node.wildcard, methods);
  }
}

function pick(map: Map<string, RouteMatch> | undefined, methods: string[]): RouteMatch | null {
  if (!map) return null;
  for (const m of methods) {
    const hit = map.get(m);
    if (hit) return hit;
  }
  return null;
}
