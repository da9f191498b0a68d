import { randomBytes } from 'node:crypto';
import { Keyring } from '@svc/security';
import { ApiError, ListCursors, MESSAGE_PAGE_LIMIT, STAFF_PAGE_LIMIT, pageLimit } from '../src';

/** The 400 a bad query parameter gets: `VALIDATION_FAILED` naming the parameter. */
function rejection(fn: () => unknown): { status: number; code: string; paths: string[] } | null {
  try {
    fn();
    return null;
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return { status: err.status, code: err.code, paths: (err.details ?? []).map((d) => d.path) };
  }
}

describe('pageLimit', () => {
  it('answers the default without a limit, the number within 1..max', () => {
    expect(pageLimit(undefined, STAFF_PAGE_LIMIT)).toBe(50);
    expect(pageLimit(undefined, MESSAGE_PAGE_LIMIT)).toBe(100);
    expect(pageLimit('1', STAFF_PAGE_LIMIT)).toBe(1);
    expect(pageLimit('200', STAFF_PAGE_LIMIT)).toBe(200);
    expect(pageLimit('500', MESSAGE_PAGE_LIMIT)).toBe(500);
    expect(pageLimit('007', STAFF_PAGE_LIMIT)).toBe(7);
  });

  it('refuses anything else with 400 naming limit', () => {
    for (const bad of ['0', '201', '-1', '1.5', '1e2', '', ' 5', '5 ', 'abc', '0x10', '99999999999', ['1', '2'], 5, null]) {
      expect([bad, rejection(() => pageLimit(bad, STAFF_PAGE_LIMIT))]).toEqual([bad, { status: 400, code: 'VALIDATION_FAILED', paths: ['limit'] }]);
    }
    expect(rejection(() => pageLimit('501', MESSAGE_PAGE_LIMIT))?.paths).toEqual(['limit']);
  });
});

describe('ListCursors', () => {
  const keyring = new Keyring(randomBytes(32));
  const cursors = new ListCursors(keyring);
  const scope = 'clinical-cases|env-1';
  const invalid = { status: 400, code: 'VALIDATION_FAILED', paths: ['cursor'] };

  it('opens what it sealed for the same list: the position, and nothing of it in clear', () => {
    const at = { score: 1767225600123, key: 'c1f24adb-166b-5ecc-a501-6ce0856fc4bd' };
    const sealed = cursors.seal(scope, at);
    expect(sealed).toMatch(/^[A-Za-z0-9_.-]+$/);
    expect(sealed.length).toBeLessThan(300);
    expect(sealed).not.toContain(at.key);
    expect(Buffer.from(sealed.split('.')[3], 'base64url').toString('latin1')).not.toContain('1767225600123');
    expect(cursors.open(sealed, scope)).toEqual(at);
    expect(cursors.open(undefined, scope)).toBeUndefined();
    // Another instance on the same master key (another process) opens it too.
    expect(new ListCursors(keyring).open(sealed, scope)).toEqual(at);
    expect(cursors.open(cursors.seal(scope, { score: -5.5, key: 'k' }), scope)).toEqual({ score: -5.5, key: 'k' });
  });

  it('refuses a cursor of another list, another master key, or one tampered with: 400 naming cursor', () => {
    const sealed = cursors.seal(scope, { score: 1, key: 'k' });
    const [v, iv, tag, ct] = sealed.split('.');
    const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
    for (const bad of [
      cursors.seal('clinical-cases|env-2', { score: 1, key: 'k' }).toString(),
      new ListCursors(new Keyring(randomBytes(32))).seal(scope, { score: 1, key: 'k' }),
      `${v}.${iv}.${tag}.${flip(ct)}`,
      `${v}.${iv}.${flip(tag)}.${ct}`,
      `${v}.${iv}.${tag.slice(0, 6)}.${ct}`, // a shortened tag
      `${sealed}.more`,
      `${sealed}AAAA`,
      sealed.slice(0, -2),
      '',
      'garbage',
      'v1....',
      'A'.repeat(5000),
      [sealed, sealed],
      42,
    ]) {
      expect([String(bad).slice(0, 30), rejection(() => cursors.open(bad, scope))]).toEqual([String(bad).slice(0, 30), invalid]);
    }
  });

  it('refuses a sealed payload of the wrong shape (a score that is not a finite number, a key that is not a short string)', () => {
    const key = keyring.serviceKey('list-cursor');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { encryptString } = require('@svc/security') as typeof import('@svc/security');
    for (const payload of [
      { s: scope, o: '1', k: 'k' },
      { s: scope, o: null, k: 'k' },
      { s: scope, o: 1, k: '' },
      { s: scope, o: 1, k: 'x'.repeat(201) },
      { s: scope, o: 1 },
      [scope, 1, 'k'],
      'text',
      null,
    ]) {
      expect(rejection(() => cursors.open(encryptString(key, JSON.stringify(payload)), scope))).toEqual(invalid);
    }
    expect(rejection(() => cursors.open(encryptString(key, 'not json'), scope))).toEqual(invalid);
    expect(cursors.open(encryptString(key, JSON.stringify({ s: scope, o: 2, k: 'x'.repeat(200) })), scope)).toEqual({ score: 2, key: 'x'.repeat(200) });
  });
});
