import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Owner-only modes for everything the service keeps in its data dir (docs/decisions.md, "Deployment safety"): the event
 * store and read models (PHI, encrypted or not), the outbox (live check-in links), the dev
 * issuer's private key, the standalone master key.
 */
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** The process umask at start: whatever a library creates without a mode of its own is owner-only too. */
export const PRIVATE_UMASK = 0o077;

/**
 * A folder (and any missing parents) owner-only; an existing one is tightened. False when an
 * existing folder could not be changed because another user owns it (a mounted volume whose root
 * belongs to root, say): the caller reports it; what the service creates inside is still its own.
 */
export function ensurePrivateDir(dir: string): boolean {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  if ((lstatSync(dir).mode & 0o777) === PRIVATE_DIR_MODE) return true;
  try {
    chmodSync(dir, PRIVATE_DIR_MODE);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EPERM') return false;
    throw err;
  }
}

/**
 * A file created empty and owner-only before another component opens it (SQLite creates its
 * files 0644 whatever the caller wants; its -wal, -shm and journal files then take the mode of
 * the database file). An existing file is tightened, its content untouched.
 */
export function ensurePrivateFile(file: string): void {
  closeSync(openSync(file, 'a', PRIVATE_FILE_MODE));
  if ((lstatSync(file).mode & 0o777) !== PRIVATE_FILE_MODE) chmodSync(file, PRIVATE_FILE_MODE);
}

/**
 * What the service keeps in its data dir: the SQLite event store and read models with their -wal,
 * -shm and journal files, the standalone master key, the dev issuer's key pair, the dev clock, the
 * outbox folder. Only these are tightened at start: anything else an operator put there is theirs,
 * and a data dir set by mistake to a shared folder must not have its other content changed.
 */
const OWN_ENTRIES = /^(?:(?:events|read-models)\.sqlite(?:-wal|-shm|-journal)?|master\.key|dev-idp\.json|clock\.json(?:\.tmp)?|outbox)$/;

/** Folders shared by several users (the sticky bit: /tmp, say) are never made owner-only. */
const STICKY = 0o1000;

/**
 * Tightens a data dir left looser (by an earlier version, a restored backup, an operator): group
 * and other permissions are removed from the folder itself (unless it is a shared, sticky folder),
 * from the service's own entries in it (OWN_ENTRIES) and from everything in the outbox; the
 * service's own files and folders are then 0600 and 0700. Symbolic links are left alone (never
 * followed: a link could point anywhere). Returns what could not be changed (another owner, a
 * shared folder), for the caller to report.
 */
export function tightenDataDir(dir: string): string[] {
  const failed: string[] = [];
  const tighten = (path: string, recurse: boolean): void => {
    let st;
    try {
      st = lstatSync(path);
    } catch {
      return; // gone meanwhile
    }
    if (st.isSymbolicLink()) return;
    if ((st.mode & 0o077) !== 0) {
      if (st.mode & STICKY) failed.push(path);
      else
        try {
          chmodSync(path, st.mode & 0o700);
        } catch {
          failed.push(path);
        }
    }
    if (recurse && st.isDirectory()) for (const name of readdirSync(path)) tighten(join(path, name), true);
  };
  tighten(dir, false);
  for (const name of readdirSync(dir)) if (OWN_ENTRIES.test(name)) tighten(join(dir, name), name === 'outbox');
  return failed;
}
