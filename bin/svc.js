#!/usr/bin/env node
/**
 * `svc`, the audit command line (docs/audit.md), as the package's bin: `npx svc --help` in a
 * checkout. Runs the compiled CLI (dist/apps/cli); in a checkout whose sources are newer than the
 * build, it builds first (`npm run build`, its lines on stderr so stdout stays the command's own).
 * SVC_CLI_BUILD=0 never builds (runs what dist holds).
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const entry = path.join(root, 'dist', 'apps', 'cli', 'src', 'main.js');
const buildScript = path.join(root, 'scripts', 'build.js');
const stamp = path.join(root, 'dist', '.build-stamp');

/** Newest .ts under a folder (0 when it is absent, as in an image that ships dist only). */
function newestSource(dir) {
  let newest = 0;
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== 'test') newest = Math.max(newest, newestSource(p));
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

function needsBuild() {
  if (!fs.existsSync(entry)) return true;
  if (process.env.SVC_CLI_BUILD === '0' || !fs.existsSync(buildScript)) return false;
  const built = fs.existsSync(stamp) ? fs.statSync(stamp).mtimeMs : 0;
  return Math.max(newestSource(path.join(root, 'apps')), newestSource(path.join(root, 'libs'))) > built;
}

if (needsBuild()) {
  if (!fs.existsSync(buildScript) || process.env.SVC_CLI_BUILD === '0') {
    process.stderr.write(`svc: ${path.relative(process.cwd(), entry)} is missing: run npm run build\n`);
    process.exit(2);
  }
  process.stderr.write('svc: building first (npm run build) ...\n');
  const r = spawnSync(process.execPath, [buildScript, '--if-needed'], { cwd: root, stdio: ['ignore', 2, 2] });
  if (r.status !== 0) {
    if (!fs.existsSync(entry)) {
      process.stderr.write('svc: the build failed: run npm run build and fix what it reports\n');
      process.exit(2);
    }
    process.stderr.write('svc: the build failed; running the previous build\n');
  }
}

/**
 * `svc rebuild` on a machine of two cores or fewer runs in a child with V8's garbage collector on
 * the threads that allocate (`--single-threaded-gc`): the rebuild's crypto thread has the other
 * core, and the collector's helper threads only competed with it (bench/README.md, "Rebuild").
 * SVC_REBUILD_GC=parallel keeps V8's default. Signals are passed on; the exit status is the child's.
 */
function rebuildWithSingleThreadedGc() {
  if (process.argv[2] !== 'rebuild' || process.execArgv.includes('--single-threaded-gc')) return false;
  if (process.argv.some((a) => a === '--list' || a === '--help' || a === '-h')) return false;
  if (process.env.SVC_REBUILD_GC === 'parallel' || require('node:os').availableParallelism() > 2) return false;
  const child = require('node:child_process').spawn(process.execPath, ['--single-threaded-gc', ...process.execArgv, __filename, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, SVC_CLI_BUILD: '0' },
  });
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const forward = (signal) => child.kill(signal);
  for (const signal of signals) process.on(signal, forward);
  child.on('error', (err) => {
    process.stderr.write(`svc: cannot start the rebuild: ${err.message}\n`);
    process.exit(2);
  });
  child.on('exit', (code, signal) => {
    for (const s of signals) process.off(s, forward);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
  return true;
}

if (!rebuildWithSingleThreadedGc()) require(entry).main(process.argv);
