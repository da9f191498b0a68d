import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { deadLetterTopic, Patterns, replicationFor, replyTopic, topicSpec, topicSpecs, Topics } from '../src';

/**
 * The topics the apps create at start (topicSpecs, from names.ts) are the ones deploy/topics.md
 * documents, with the same partitions and retention: the page stays true. (Against a broker,
 * kafka.spec.ts checks that ensureTopics creates them so.)
 */
const DAY = 86_400_000;
const HOUR = 3_600_000;

function retentionMs(text: string): number {
  const m = /^(\d+)\s+(day|days|hour|hours)$/.exec(text.trim());
  if (!m) throw new Error(`unreadable retention "${text}"`);
  return Number(m[1]) * (m[2].startsWith('day') ? DAY : HOUR);
}

/** Every topic row of the page's tables: the first `name` of the row, its partitions and retention (two of each for a command and its reply). */
function documented(): Map<string, { partitions: number; retentionMs: number }> {
  const page = readFileSync(resolve(__dirname, '../../../deploy/topics.md'), 'utf8');
  const out = new Map<string, { partitions: number; retentionMs: number }>();
  for (const line of page.split('\n')) {
    if (!line.startsWith('| `')) continue;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    // Topic tables only: their last two columns are partitions and retention.
    if (!/^\d+( \/ \d+)?$/.test(cells[cells.length - 2]) || !/(day|hour)s?$/.test(cells[cells.length - 1])) continue;
    const names = cells.flatMap((c) => [...c.matchAll(/`([a-z0-9.-]+)`/g)].map((m) => m[1])).filter((n) => n.includes('.'));
    const partitions = cells[cells.length - 2].split('/').map((p) => Number(p.trim()));
    const retention = cells[cells.length - 1].split('/').map(retentionMs);
    const topics = partitions.length === 2 ? [names[0], names.find((n) => n.endsWith('.reply'))!] : [names[0]];
    topics.forEach((t, i) => out.set(t, { partitions: partitions[i], retentionMs: retention[i] }));
  }
  return out;
}

describe('topics', () => {
  it('topicSpecs() holds every event topic, command, reply and dead-letter topic once', () => {
    const names = topicSpecs().map((s) => s.topic);
    expect(new Set(names).size).toBe(names.length);
    const consumed = [...Object.values(Topics), ...Object.values(Patterns)];
    expect(names.sort()).toEqual([...consumed, ...Object.values(Patterns).map(replyTopic), ...consumed.map(deadLetterTopic)].sort());
  });

  it('deploy/topics.md documents exactly these topics, with their partitions and retention', () => {
    const doc = documented();
    const specs = Object.fromEntries(topicSpecs().map((s) => [s.topic, { partitions: s.partitions, retentionMs: s.retentionMs }]));
    expect(Object.fromEntries(doc)).toEqual(specs);
  });

  it('a topic not in names.ts gets the settings of its kind', () => {
    expect(topicSpec(Topics.caseEvents)).toEqual(topicSpecs().find((s) => s.topic === Topics.caseEvents));
    expect(topicSpec('some.new.pattern.reply')).toMatchObject({ partitions: 6, retentionMs: HOUR });
    expect(topicSpec('some.new.pattern.dlq')).toMatchObject({ partitions: 1, retentionMs: 14 * DAY });
    expect(topicSpec('some.new.pattern')).toMatchObject({ partitions: 6, retentionMs: DAY });
  });
});

describe('replication of the topics created (replicationFor)', () => {
  it('follows the cluster: 3 copies and 2 in sync from 3 brokers on, the broker defaults below', () => {
    expect(replicationFor(1)).toEqual({ replicationFactor: -1, minInsyncReplicas: null });
    expect(replicationFor(2)).toEqual({ replicationFactor: -1, minInsyncReplicas: null });
    expect(replicationFor(3)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
    expect(replicationFor(5)).toEqual({ replicationFactor: 3, minInsyncReplicas: 2 });
  });
});
