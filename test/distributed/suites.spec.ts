import { readdirSync } from 'node:fs';
import { join } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { distributed, excluded } = require('./suites') as { distributed: string[]; excluded: Record<string, string> };

/** The e2e test matrix names every suite of test/e2e once: run against the topology, or excluded with a reason. */
describe('the distributed test matrix (test/distributed/suites.js)', () => {
  const suites = readdirSync(join(__dirname, '..', 'e2e'))
    .filter((f) => f.endsWith('.e2e-spec.ts'))
    .map((f) => `test/e2e/${f}`)
    .sort();

  it('lists every e2e suite exactly once, and nothing else', () => {
    const listed = [...distributed, ...Object.keys(excluded)];
    expect(listed.filter((f, i) => listed.indexOf(f) !== i)).toEqual([]);
    expect(suites.filter((f) => !listed.includes(f))).toEqual([]);
    expect(listed.filter((f) => !suites.includes(f))).toEqual([]);
  });

  it('gives a reason for every suite it leaves out', () => {
    for (const [suite, reason] of Object.entries(excluded)) expect({ suite, reason: reason.trim().length > 20 }).toEqual({ suite, reason: true });
  });
});
