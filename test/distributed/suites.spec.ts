import { readdirSync } from 'node:fs';
import { join } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { distributed, browser, excluded } = require('./suites') as { distributed: string[]; browser: string[]; excluded: Record<string, string> };

/** The e2e test matrix names every suite of test/e2e and test/browser once: run against the topology, or excluded with a reason. */
describe('the distributed test matrix (test/distributed/suites.js)', () => {
  const inDir = (dir: string) =>
    readdirSync(join(__dirname, '..', dir))
      .filter((f) => f.endsWith('.e2e-spec.ts'))
      .map((f) => `test/${dir}/${f}`);
  const suites = [...inDir('e2e'), ...inDir('browser')].sort();

  it('lists every e2e and browser suite exactly once, and nothing else', () => {
    const listed = [...distributed, ...browser, ...Object.keys(excluded)];
    expect(listed.filter((f, i) => listed.indexOf(f) !== i)).toEqual([]);
    expect(suites.filter((f) => !listed.includes(f))).toEqual([]);
    expect(listed.filter((f) => !suites.includes(f))).toEqual([]);
  });

  it('keeps API suites in distributed and browser suites in browser', () => {
    expect(distributed.filter((f) => !f.startsWith('test/e2e/'))).toEqual([]);
    expect(browser.filter((f) => !f.startsWith('test/browser/'))).toEqual([]);
  });

  it('gives a reason for every suite it leaves out', () => {
    for (const [suite, reason] of Object.entries(excluded)) expect({ suite, reason: reason.trim().length > 20 }).toEqual({ suite, reason: true });
  });
});
