/**
 * Running the built `svc` binary (bin/svc.js) from the e2e suites: with the store variables a test
 * gives, never this process's own service settings, no colours, and no build of its own (the
 * suite builds once in `beforeAll` with `buildIfNeeded`).
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

export const root = join(__dirname, '..', '..');
const bin = join(root, 'bin', 'svc.js');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** This process's settings that would choose the CLI's stores: left out of its environment. */
const SERVICE_SETTINGS = /^(SVC_|EVENT_STORE|DATABASE_URL|ESDB_|READ_STORE|REDIS_)/;

export function svc(args: string[], env: Record<string, string>): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !SERVICE_SETTINGS.test(k)));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: root,
      env: { ...base, SVC_CLI_BUILD: '0', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export const ndjson = (text: string): any[] =>
  text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));

/** Builds dist when it is older than the sources (the bin runs the compiled CLI). */
export function buildIfNeeded(): void {
  const build = spawnSync(process.execPath, [join(root, 'scripts', 'build.js'), '--if-needed'], { cwd: root, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}\n${build.stderr}`);
}
