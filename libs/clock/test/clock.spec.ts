import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DevClock } from '@svc/clock';

describe('DevClock', () => {
  it('moves forward, notifies, and keeps its offset across a restart', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'clock-')), 'clock.json');
    const clock = new DevClock(file);
    const before = clock.now().getTime();
    const seen: Date[] = [];
    clock.onAdvance((d) => seen.push(d));
    clock.advance(3600);
    expect(clock.now().getTime() - before).toBeGreaterThanOrEqual(3600_000);
    expect(seen).toHaveLength(1);
    const again = new DevClock(file);
    expect(again.now().getTime() - before).toBeGreaterThanOrEqual(3600_000);
  });

  it('refuses negative or fractional advances', () => {
    const clock = new DevClock();
    expect(() => clock.advance(-1)).toThrow(RangeError);
    expect(() => clock.advance(1.5)).toThrow(RangeError);
  });
});
