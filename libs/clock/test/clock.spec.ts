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

describe('DevClock.follow (the dev clock shared across processes)', () => {
  it('takes a later offset, notifies, and never goes back', () => {
    const clock = new DevClock();
    const seen: Date[] = [];
    clock.onAdvance((d) => seen.push(d));
    const before = clock.now().getTime();
    expect(clock.follow(7_200_000)).toBe(true);
    expect(clock.offset).toBe(7_200_000);
    expect(clock.now().getTime() - before).toBeGreaterThanOrEqual(7_200_000);
    expect(seen).toHaveLength(1);
    expect(clock.follow(3_600_000)).toBe(false);
    expect(clock.follow(7_200_000)).toBe(false);
    expect(clock.offset).toBe(7_200_000);
    expect(seen).toHaveLength(1);
  });

  it('offsetAfter checks an advance like advance() does, from any offset', () => {
    const clock = new DevClock();
    expect(clock.offsetAfter(60, 1000)).toBe(61_000);
    expect(() => clock.offsetAfter(-1)).toThrow(RangeError);
    expect(() => clock.offsetAfter(1.5)).toThrow(RangeError);
    expect(() => clock.offsetAfter(1e13)).toThrow(RangeError);
  });
});
