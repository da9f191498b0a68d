import { chmodSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensurePrivateFile, tightenDataDir } from '../src/private-files';

/** docs/decisions.md, "Deployment safety": what the service keeps in its data dir is owner-only; what it does not own is left alone. */
describe('tightenDataDir', () => {
  let root: string;
  const mode = (p: string) => lstatSync(p).mode & 0o7777;
  const file = (p: string, m: number) => {
    writeFileSync(p, 'x');
    chmodSync(p, m);
  };
  beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'tighten-'))));
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("tightens the folder, the service's own entries and the whole outbox, and nothing else", () => {
    const dir = join(root, 'data');
    mkdirSync(join(dir, 'outbox', 'nested'), { recursive: true });
    chmodSync(dir, 0o755);
    chmodSync(join(dir, 'outbox'), 0o755);
    chmodSync(join(dir, 'outbox', 'nested'), 0o775);
    for (const f of [
      'events.sqlite',
      'events.sqlite-wal',
      'events.sqlite-shm',
      'read-models.sqlite',
      'read-models.sqlite-journal',
      'master.key',
      'dev-idp.json',
      'clock.json',
      'clock.json.tmp',
    ])
      file(join(dir, f), 0o644);
    file(join(dir, 'outbox', 'a.eml'), 0o644);
    file(join(dir, 'outbox', 'nested', 'b.json'), 0o664);
    file(join(dir, 'master.key.bak'), 0o644);
    mkdirSync(join(dir, 'operator'), { mode: 0o755 });
    chmodSync(join(dir, 'operator'), 0o755);
    file(join(dir, 'operator', 'notes.txt'), 0o644);
    // A link is never followed: its target keeps its mode.
    file(join(root, 'elsewhere.txt'), 0o644);
    symlinkSync(join(root, 'elsewhere.txt'), join(dir, 'clock.json.tmp2'));

    expect(tightenDataDir(dir)).toEqual([]);

    expect(mode(dir)).toBe(0o700);
    expect(mode(join(dir, 'outbox'))).toBe(0o700);
    expect(mode(join(dir, 'outbox', 'nested'))).toBe(0o700);
    for (const f of [
      'events.sqlite',
      'events.sqlite-wal',
      'events.sqlite-shm',
      'read-models.sqlite',
      'read-models.sqlite-journal',
      'master.key',
      'dev-idp.json',
      'clock.json',
      'clock.json.tmp',
      'outbox/a.eml',
      'outbox/nested/b.json',
    ])
      expect([f, mode(join(dir, f)).toString(8)]).toEqual([f, '600']);
    expect(mode(join(dir, 'master.key.bak'))).toBe(0o644);
    expect(mode(join(dir, 'operator'))).toBe(0o755);
    expect(mode(join(dir, 'operator', 'notes.txt'))).toBe(0o644);
    expect(mode(join(root, 'elsewhere.txt'))).toBe(0o644);
  });

  it('never makes a shared (sticky) folder owner-only: reported instead', () => {
    const shared = join(root, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    file(join(shared, 'someone-else.txt'), 0o644);
    file(join(shared, 'master.key'), 0o644);
    expect(tightenDataDir(shared)).toEqual([shared]);
    expect(mode(shared)).toBe(0o1777);
    expect(mode(join(shared, 'someone-else.txt'))).toBe(0o644);
    expect(mode(join(shared, 'master.key'))).toBe(0o600);
  });
});

describe('ensurePrivateFile', () => {
  it('creates a file 0600 whatever the umask, and tightens an existing one without touching its content', () => {
    const root = mkdtempSync(join(tmpdir(), 'private-file-'));
    const umask = process.umask(0o022);
    try {
      ensurePrivateFile(join(root, 'new.sqlite'));
      expect(lstatSync(join(root, 'new.sqlite')).mode & 0o777).toBe(0o600);
      writeFileSync(join(root, 'old.sqlite'), 'data');
      chmodSync(join(root, 'old.sqlite'), 0o644);
      ensurePrivateFile(join(root, 'old.sqlite'));
      expect(lstatSync(join(root, 'old.sqlite')).mode & 0o777).toBe(0o600);
      expect(lstatSync(join(root, 'old.sqlite')).size).toBe(4);
    } finally {
      process.umask(umask);
      rmSync(root, { recursive: true, force: true });
    }
  });
});
