import Redis from 'ioredis';
import { RedisPositionFeed } from './redis-position-feed';
import { TokenBucketLimit, TokenTake, validateTokenBucketLimit } from './token-bucket';
import {
  CommitOptions,
  CommitOutcome,
  PageOptions,
  ReadEntry,
  ReadPage,
  ReadStore,
  RebuiltReadModel,
  WriteOp,
  validateCollection,
  validateOps,
  validatePageOptions,
} from './types';

/**
 * Applies ops and (optionally) a checkpoint atomically. A Lua script runs as one unit on the
 * server, like MULTI/EXEC, and can also read: it compares the stored checkpoint first (so the
 * checkpoint never goes backwards when two runners race, and the stale runner's ops are dropped
 * with it) and follows each document's reverse pointer to take it out of its old partition index.
 *
 * KEYS[1] checkpoint hash, KEYS[2] fence hash; then per op: doc key, pointer key, new index key
 * ARGV[1] projection ('' = plain write), ARGV[2] position, ARGV[3] index key prefix
 *   (`${prefix}:idx:`), ARGV[4] the checkpoint the caller last stored (0: none; when it is > 0 and
 *   the hash has no checkpoint, Redis lost its content: -1, nothing written), ARGV[5] the writer's
 *   fencing token (0: unfenced; below the projection's stored fence: -2, nothing written; else the
 *   fence is raised to it: docs/scaling.md), then per op: kind ('p'|'d'), collection, key, [doc,
 *   hasPartition, partition, score]
 * Returns 1 written, 0 stale (a later checkpoint is stored), -1 lost, -2 fenced.
 */
const COMMIT_LUA = `
local projection = ARGV[1]
if projection ~= '' then
  local fence = tonumber(ARGV[5])
  if fence > 0 then
    local stored = tonumber(redis.call('HGET', KEYS[2], projection) or '0')
    if stored > fence then return -2 end
    if stored < fence then redis.call('HSET', KEYS[2], projection, ARGV[5]) end
  end
  local current = redis.call('HGET', KEYS[1], projection)
  if current and tonumber(current) >= tonumber(ARGV[2]) then return 0 end
  if (not current) and tonumber(ARGV[4]) > 0 then return -1 end
end
local idxPrefix = ARGV[3]
local k = 3
local a = 6
while a <= #ARGV do
  local docKey, ptrKey, idxKey = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local kind, collection, key = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local old = redis.call('GET', ptrKey)
  if kind == 'd' then
    if old then redis.call('ZREM', idxPrefix .. collection .. ':' .. old, key) end
    redis.call('DEL', docKey, ptrKey)
    a = a + 3
  else
    local doc, hasPartition, partition, score = ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
    if old and (hasPartition == '0' or old ~= partition) then
      redis.call('ZREM', idxPrefix .. collection .. ':' .. old, key)
    end
    redis.call('SET', docKey, doc)
    if hasPartition == '1' then
      redis.call('ZADD', idxKey, score, key)
      redis.call('SET', ptrKey, partition)
    else
      redis.call('DEL', ptrKey)
    end
    a = a + 7
  end
  k = k + 3
end
if projection ~= '' then redis.call('HSET', KEYS[1], projection, ARGV[2]) end
return 1
`;

/**
 * Reads one partition in score order (then member order, which Redis keeps byte-wise) with the
 * documents, as one consistent snapshot. KEYS[1] index key; ARGV: doc key prefix, max score, limit.
 */
const ENTRIES_LUA = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i = 1, #ids, 2 do
  local doc = redis.call('GET', ARGV[1] .. ids[i])
  if doc then
    out[#out + 1] = ids[i]
    out[#out + 1] = ids[i + 1]
    out[#out + 1] = doc
  end
end
return out
`;

/**
 * One page of a partition (`ReadStore.page`) with its documents, as one consistent snapshot, read
 * as a range of the sorted set (never the whole partition). KEYS[1] index key; ARGV: doc key
 * prefix, order ('asc' | 'desc'), start ('first' | 'score' | 'key'), after score, after key, n.
 * Answers up to n entries flat (member, score, doc). Ties of score are in member byte order, as
 * Redis keeps them; when the position's member is still in the set at that score the page starts
 * at its rank, otherwise the members of that score up to its key are skipped (compared byte by
 * byte: Lua's own string comparison follows the server's locale).
 */
const PAGE_LUA = `
local idx, prefix, desc, start = KEYS[1], ARGV[1], ARGV[2] == 'desc', ARGV[3]
local s, k, n = ARGV[4], ARGV[5], tonumber(ARGV[6])
local function cmp(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y and -1 or 1 end
  end
  if la == lb then return 0 end
  return la < lb and -1 or 1
end
local ids
if start == 'first' then
  if desc then ids = redis.call('ZREVRANGE', idx, 0, n - 1, 'WITHSCORES')
  else ids = redis.call('ZRANGE', idx, 0, n - 1, 'WITHSCORES') end
elseif start == 'score' then
  if desc then ids = redis.call('ZREVRANGEBYSCORE', idx, '(' .. s, '-inf', 'WITHSCORES', 'LIMIT', 0, n)
  else ids = redis.call('ZRANGEBYSCORE', idx, '(' .. s, '+inf', 'WITHSCORES', 'LIMIT', 0, n) end
else
  local current = redis.call('ZSCORE', idx, k)
  if current and tonumber(current) == tonumber(s) then
    local r
    if desc then r = redis.call('ZREVRANK', idx, k) else r = redis.call('ZRANK', idx, k) end
    if desc then ids = redis.call('ZREVRANGE', idx, r + 1, r + n, 'WITHSCORES')
    else ids = redis.call('ZRANGE', idx, r + 1, r + n, 'WITHSCORES') end
  else
    ids = {}
    local offset = 0
    while #ids < 2 * n do
      local batch
      if desc then batch = redis.call('ZREVRANGEBYSCORE', idx, s, '-inf', 'WITHSCORES', 'LIMIT', offset, n)
      else batch = redis.call('ZRANGEBYSCORE', idx, s, '+inf', 'WITHSCORES', 'LIMIT', offset, n) end
      for i = 1, #batch, 2 do
        local member, score = batch[i], batch[i + 1]
        local c = cmp(member, k)
        local past = tonumber(score) ~= tonumber(s) or (desc and c < 0) or ((not desc) and c > 0)
        if past and #ids < 2 * n then
          ids[#ids + 1] = member
          ids[#ids + 1] = score
        end
      end
      if #batch < 2 * n then break end
      offset = offset + n
    end
  end
end
local out = {}
for i = 1, #ids, 2 do
  local doc = redis.call('GET', prefix .. ids[i])
  if doc then
    out[#out + 1] = ids[i]
    out[#out + 1] = ids[i + 1]
    out[#out + 1] = doc
  end
end
return out
`;

/**
 * One take from a token bucket (`takeToken` of token-bucket.ts, the same steps), atomic on the
 * server: KEYS[1] the bucket's key; ARGV: now (ms), interval (ms per token), burst. The key holds
 * the bucket's `tat` and expires when the bucket is full again (a missing key is a full bucket).
 * Returns { 1, 0 } allowed, or { 0, ms until a token is there }.
 */
const TAKE_TOKEN_LUA = `
local now, interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nxt = tat + interval
local earliest = nxt - burst * interval
if now < earliest then return { 0, math.ceil(earliest - now) } end
redis.call('SET', KEYS[1], string.format('%.3f', nxt), 'PX', math.ceil(nxt - now))
return { 1, 0 }
`;

/**
 * Rebuild markers (ReadStore.markRebuild / clearRebuild): KEYS[1] the marker hash, ARGV[1] the
 * projection, ARGV[2] the target ('mark': raised, never lowered) or the position reached ('clear':
 * removed when at most it).
 */
const MARK_REBUILD_LUA = `
local current = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > current then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
`;
const CLEAR_REBUILD_LUA = `
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and tonumber(current) <= tonumber(ARGV[2]) then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
`;

interface ScriptedRedis extends Redis {
  readStoreMarkRebuildV1(numKeys: number, ...args: (string | number)[]): Promise<number>;
  readStoreClearRebuildV1(numKeys: number, ...args: (string | number)[]): Promise<number>;
  readStoreCommitV3(numKeys: number, ...args: (string | number)[]): Promise<number>;
  readStoreEntriesV1(numKeys: number, ...args: (string | number)[]): Promise<string[]>;
  readStorePageV1(numKeys: number, ...args: (string | number)[]): Promise<string[]>;
  readStoreTakeTokenV1(numKeys: number, ...args: (string | number)[]): Promise<[number, number]>;
}

/**
 * Read store on Redis:
 * - document: string `${prefix}:doc:${collection}:${key}` (JSON)
 * - partition index: sorted set `${prefix}:idx:${collection}:${partition}` (member key, score)
 * - reverse pointer: string `${prefix}:ptr:${collection}:${key}` = partition, so a document that
 *   moves partition (or loses it, or is deleted) leaves its old index
 * - checkpoints: hash `${prefix}:checkpoint` (field = projection)
 * - fences: hash `${prefix}:fence` (field = projection: the highest fencing token that committed)
 * - rebuild markers: hash `${prefix}:rebuild` (field = projection: the position its read model had
 *   reached before the store lost it, while the rebuild has not passed it)
 * - positions of projections shared with followers: channel `${prefix}:positions` (RedisPositionFeed)
 * - token buckets (`takeToken`): string `${prefix}:rl:${bucket}` = the bucket's `tat`, expiring
 *   when the bucket is full again
 * Single-node Redis (the old index key is derived inside the script, which Cluster forbids).
 */
export class RedisReadStore implements ReadStore {
  /** Redis may keep nothing on disk, and can be flushed: projection runners watch for a loss. */
  readonly canLoseData = true;
  private readonly redis: ScriptedRedis;
  private readonly ownsClient: boolean;
  private closed = false;
  private readonly feed: RedisPositionFeed;

  constructor(
    redisUrlOrClient: string | Redis,
    private readonly keyPrefix: string,
  ) {
    if (!keyPrefix) throw new TypeError('RedisReadStore needs a key prefix');
    if (typeof redisUrlOrClient === 'string') {
      this.redis = new Redis(redisUrlOrClient, { maxRetriesPerRequest: 3 }) as ScriptedRedis;
      this.ownsClient = true;
    } else {
      this.redis = redisUrlOrClient as ScriptedRedis;
      this.ownsClient = false;
    }
    // defineCommand sends EVALSHA and falls back to EVAL when the server lacks the script.
    if (typeof this.redis.readStoreCommitV3 !== 'function') this.redis.defineCommand('readStoreCommitV3', { lua: COMMIT_LUA });
    if (typeof this.redis.readStoreEntriesV1 !== 'function') this.redis.defineCommand('readStoreEntriesV1', { lua: ENTRIES_LUA });
    this.feed = new RedisPositionFeed(this.redis, `${keyPrefix}:positions`);
    if (typeof this.redis.readStorePageV1 !== 'function') this.redis.defineCommand('readStorePageV1', { lua: PAGE_LUA });
    if (typeof this.redis.readStoreTakeTokenV1 !== 'function') this.redis.defineCommand('readStoreTakeTokenV1', { lua: TAKE_TOKEN_LUA });
    if (typeof this.redis.readStoreMarkRebuildV1 !== 'function') this.redis.defineCommand('readStoreMarkRebuildV1', { lua: MARK_REBUILD_LUA });
    if (typeof this.redis.readStoreClearRebuildV1 !== 'function') this.redis.defineCommand('readStoreClearRebuildV1', { lua: CLEAR_REBUILD_LUA });
  }

  private docKey(collection: string, key: string): string {
    return `${this.keyPrefix}:doc:${collection}:${key}`;
  }
  private ptrKey(collection: string, key: string): string {
    return `${this.keyPrefix}:ptr:${collection}:${key}`;
  }
  private idxKey(collection: string, partition: string): string {
    return `${this.keyPrefix}:idx:${collection}:${partition}`;
  }
  private get checkpointKey(): string {
    return `${this.keyPrefix}:checkpoint`;
  }
  private get rebuildKey(): string {
    return `${this.keyPrefix}:rebuild`;
  }

  async get<T>(collection: string, key: string): Promise<T | null> {
    validateCollection(collection);
    const raw = await this.redis.get(this.docKey(collection, key));
    return raw === null ? null : (JSON.parse(raw) as T);
  }

  async list<T>(collection: string, partition: string, options?: { limit?: number }): Promise<T[]> {
    return (await this.entries<T>(collection, partition, options)).map((e) => e.doc);
  }

  async range<T>(collection: string, partition: string, maxScore: number, limit: number): Promise<T[]> {
    return (await this.entries<T>(collection, partition, { maxScore, limit })).map((e) => e.doc);
  }

  async entries<T>(collection: string, partition: string, options?: { limit?: number; maxScore?: number }): Promise<ReadEntry<T>[]> {
    validateCollection(collection);
    const max = options?.maxScore;
    const maxArg = max === undefined || max === Infinity ? '+inf' : max === -Infinity ? '-inf' : String(max);
    const flat = await this.redis.readStoreEntriesV1(
      1,
      this.idxKey(collection, partition),
      `${this.keyPrefix}:doc:${collection}:`,
      maxArg,
      options?.limit ?? -1,
    );
    const out: ReadEntry<T>[] = [];
    for (let i = 0; i < flat.length; i += 3) {
      out.push({ key: flat[i], partition, score: Number(flat[i + 1]), doc: JSON.parse(flat[i + 2]) as T });
    }
    return out;
  }

  async page<T>(collection: string, partition: string, options: PageOptions): Promise<ReadPage<T>> {
    validatePageOptions(collection, options);
    const after = options.after;
    const flat = await this.redis.readStorePageV1(
      1,
      this.idxKey(collection, partition),
      `${this.keyPrefix}:doc:${collection}:`,
      options.order ?? 'asc',
      after === undefined ? 'first' : after.key === undefined ? 'score' : 'key',
      after === undefined ? '0' : String(after.score),
      after?.key ?? '',
      // One entry past the page tells whether more follow.
      options.limit + 1,
    );
    const entries: ReadEntry<T>[] = [];
    for (let i = 0; i < flat.length && entries.length < options.limit; i += 3) {
      entries.push({ key: flat[i], partition, score: Number(flat[i + 1]), doc: JSON.parse(flat[i + 2]) as T });
    }
    return { entries, hasMore: flat.length / 3 > options.limit };
  }

  async write(ops: WriteOp[]): Promise<void> {
    await this.run('', 0, ops);
  }

  async getCheckpoint(projection: string): Promise<number> {
    const raw = await this.redis.hget(this.checkpointKey, projection);
    return raw === null ? 0 : Number(raw);
  }

  /** The checkpoint and the rebuild marker, read in one MULTI (one step on the server). */
  async getCheckpointState(projection: string): Promise<{ checkpoint: number; rebuildTarget: number }> {
    const results = await this.redis.multi().hget(this.checkpointKey, projection).hget(this.rebuildKey, projection).exec();
    const failed = results?.find(([err]) => err);
    if (!results || failed) throw failed?.[0] ?? new Error('checkpoint not read: the transaction was aborted');
    const [checkpoint, target] = results.map(([, v]) => (v === null ? 0 : Number(v)));
    return { checkpoint, rebuildTarget: target };
  }

  async markRebuild(projection: string, target: number): Promise<void> {
    if (!Number.isSafeInteger(target) || target < 0) throw new RangeError('rebuild target must be an integer >= 0');
    await this.redis.readStoreMarkRebuildV1(1, this.rebuildKey, projection, target);
  }

  async clearRebuild(projection: string, reached: number): Promise<void> {
    await this.redis.readStoreClearRebuildV1(1, this.rebuildKey, projection, reached);
  }

  /**
   * `down` on the connection's close, `up` once it is ready again (after a `down`). The commands
   * queued while it was down run before `up` is told: a projection's commit among them finds the
   * loss itself (CommitOptions.from).
   */
  watchConnection(listener: (state: 'down' | 'up') => void): () => void {
    let down = false;
    const onClose = () => {
      if (down) return;
      down = true;
      listener('down');
    };
    const onReady = () => {
      if (!down) return;
      down = false;
      listener('up');
    };
    this.redis.on('close', onClose);
    this.redis.on('ready', onReady);
    return () => {
      this.redis.off('close', onClose);
      this.redis.off('ready', onReady);
    };
  }

  async commit(projection: string, position: number, ops: WriteOp[], options?: CommitOptions): Promise<CommitOutcome> {
    if (!projection) throw new TypeError('projection name must not be empty');
    if (!Number.isSafeInteger(position) || position < 0) throw new RangeError('checkpoint position must be an integer >= 0');
    const from = options?.from ?? 0;
    if (!Number.isSafeInteger(from) || from < 0) throw new RangeError('from must be an integer >= 0');
    const fence = options?.fence ?? 0;
    if (!Number.isSafeInteger(fence) || fence < 0) throw new RangeError('fence must be an integer >= 0');
    const r = await this.run(projection, position, ops, from, fence);
    return { applied: r === 1, generation: 0, ...(r === -1 ? { lost: true } : {}), ...(r === -2 ? { fenced: true } : {}) };
  }

  private async run(projection: string, position: number, ops: WriteOp[], from = 0, fence = 0): Promise<number> {
    validateOps(ops);
    if (!projection && ops.length === 0) return 1;
    const keys: string[] = [this.checkpointKey, `${this.keyPrefix}:fence`];
    const args: (string | number)[] = [projection, position, `${this.keyPrefix}:idx:`, from, fence];
    for (const op of ops) {
      keys.push(this.docKey(op.collection, op.key), this.ptrKey(op.collection, op.key));
      if (op.op === 'delete') {
        keys.push(this.docKey(op.collection, op.key)); // placeholder, unused by 'd'
        args.push('d', op.collection, op.key);
      } else {
        const hasPartition = op.partition !== undefined;
        keys.push(hasPartition ? this.idxKey(op.collection, op.partition as string) : this.docKey(op.collection, op.key));
        args.push('p', op.collection, op.key, JSON.stringify(op.doc), hasPartition ? '1' : '0', op.partition ?? '', String(op.score ?? 0));
      }
    }
    return this.redis.readStoreCommitV3(keys.length, ...keys, ...args);
  }

  /** One round trip: the script decides and stores the take (the bucket is shared by every process on this Redis and prefix). */
  async takeToken(bucket: string, limit: TokenBucketLimit, nowMs: number): Promise<TokenTake> {
    validateTokenBucketLimit(limit);
    if (typeof bucket !== 'string' || bucket.length === 0) throw new TypeError('token bucket name must be a non-empty string');
    const [allowed, retryAfterMs] = await this.redis.readStoreTakeTokenV1(1, `${this.keyPrefix}:rl:${bucket}`, nowMs, 1000 / limit.ratePerS, limit.burst);
    return { allowed: allowed === 1, retryAfterMs: Number(retryAfterMs) };
  }

  publishPositions(positions: Record<string, number>): Promise<void> {
    return this.feed.publish(positions);
  }

  watchPositions(listener: (positions: Record<string, number>) => void): () => void {
    return this.feed.watch(listener);
  }

  /** Redis PING on this store's connection; fails once the store is closed or Redis cannot be reached. */
  async ping(): Promise<void> {
    if (this.closed) throw new Error('read store is closed');
    await this.redis.ping();
  }

  /**
   * `ReadStore.replaceReadModels`: the keys of each model's collections found by SCAN, then one
   * MULTI/EXEC (run by the server as one step) that deletes them, writes the rebuilt documents
   * with their indexes and pointers, and sets the checkpoints. Keys another writer adds between
   * the SCAN and the EXEC would survive: for a store no service uses.
   */
  async replaceReadModels(models: RebuiltReadModel[]): Promise<void> {
    const glob = (s: string) => s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
    const old: string[] = [];
    for (const m of models) {
      for (const c of m.collections) {
        validateCollection(c);
        for (const kind of ['doc', 'ptr', 'idx']) {
          const stream = this.redis.scanStream({ match: `${glob(this.keyPrefix)}:${kind}:${glob(c)}:*`, count: 1000 });
          for await (const keys of stream as AsyncIterable<string[]>) old.push(...keys);
        }
      }
    }
    const tx = this.redis.multi();
    for (let i = 0; i < old.length; i += 1000) tx.del(...old.slice(i, i + 1000));
    for (const m of models) {
      if (!Number.isSafeInteger(m.position) || m.position < 0) throw new RangeError('checkpoint position must be an integer >= 0');
      for (const d of m.docs()) {
        if (!m.collections.includes(d.collection))
          throw new Error(`rebuilt document of ${m.projection} in collection ${d.collection}, which the model does not own`);
        tx.set(this.docKey(d.collection, d.key), d.json);
        if (d.partition !== null) {
          tx.zadd(this.idxKey(d.collection, d.partition), d.score, d.key);
          tx.set(this.ptrKey(d.collection, d.key), d.partition);
        }
      }
      tx.hset(this.checkpointKey, m.projection, String(m.position));
    }
    const results = await tx.exec();
    const failed = results?.find(([err]) => err);
    if (!results || failed) throw failed?.[0] ?? new Error('read models not replaced: the transaction was aborted');
  }

  async close(): Promise<void> {
    // Once only: right after QUIT the client is closing but not yet `end`, and a second QUIT fails.
    if (this.closed) return;
    this.closed = true;
    await this.feed.close();
    if (this.ownsClient && this.redis.status !== 'end') await this.redis.quit();
  }
}
