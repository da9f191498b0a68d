#!/usr/bin/env node
/**
 * Build: type-check and compile with tsc, rewrite the @svc/* aliases to relative paths
 * (tsc-alias), write dist/apps/<app>/main.js entry points (README.md, "Running modes and settings"), convert the
 * contract to dist/contracts/openapi.json and copy the API reference page's script (Redoc's
 * standalone bundle) to dist/reference/ (the service serves both; see docs/decisions.md,
 * "Operations routes"), then build the pages for people (scripts/build-web.js, web/ → dist/web).
 * One line per step, with its duration.
 * `--if-needed` skips the TypeScript build when dist is newer than every source file (the pages
 * decide for themselves, with the same flag).
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const apps = ['standalone', 'gateway', 'patient-pathway', 'case-ledger', 'conversation', 'workflow-engine', 'webhook-dispatcher'];
const marker = path.join(root, 'dist', '.build-stamp');
const contract = path.join(root, 'contracts', 'openapi.yaml');

function newestSource(dir) {
  let newest = 0;
  if (!fs.existsSync(dir)) return 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

if (process.argv.includes('--if-needed') && fs.existsSync(marker)) {
  const built = fs.statSync(marker).mtimeMs;
  const src = Math.max(fs.statSync(contract).mtimeMs, ...['apps', 'libs', 'bench'].map((d) => newestSource(path.join(root, d))));
  if (src < built) {
    console.log('build: dist is up to date');
    webPages();
    process.exit(0);
  }
}

/** Runs one step: its name first (a long step does not look like a hang), then its duration. */
function step(name, fn) {
  process.stdout.write(`build: ${name} ...`);
  const started = process.hrtime.bigint();
  let note;
  try {
    const r = fn();
    if (typeof r === 'string') note = r;
  } catch (err) {
    process.stdout.write(' FAILED\n');
    // A tool's own report (tsc's errors) was captured: shown after the step's line.
    for (const out of [err.stdout, err.stderr]) if (out && out.length) process.stdout.write(out.toString());
    if (!err.stdout && !err.stderr) console.error(err.message);
    process.exit(1);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  process.stdout.write(` ${seconds.toFixed(1)} s${note ? ` (${note})` : ''}\n`);
}

const bin = (name) => path.join(root, 'node_modules', '.bin', name);
const run = (tool, args) => execFileSync(bin(tool), args, { cwd: root, stdio: 'pipe' });
if (process.argv.includes('--clean')) step('clean dist', () => fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true }));
step('type-check and compile (tsc -p tsconfig.build.json)', () => run('tsc', ['-p', 'tsconfig.build.json']));
step('rewrite @svc/* aliases (tsc-alias)', () => run('tsc-alias', ['-p', 'tsconfig.build.json']));
step('entry points dist/apps/<app>/main.js', () => {
  let n = 0;
  for (const app of apps) {
    const entry = path.join(root, 'dist', 'apps', app, 'main.js');
    if (fs.existsSync(path.join(root, 'dist', 'apps', app, 'src', 'main.js'))) {
      fs.writeFileSync(entry, "require('./src/main');\n");
      n++;
    }
  }
  return `${n} apps`;
});
step('contract dist/contracts/openapi.json', () => {
  const { parse } = require('yaml');
  fs.mkdirSync(path.join(root, 'dist', 'contracts'), { recursive: true });
  fs.writeFileSync(path.join(root, 'dist', 'contracts', 'openapi.json'), JSON.stringify(parse(fs.readFileSync(contract, 'utf8'))));
});
step('API reference script dist/reference/redoc.standalone.js', () => {
  const target = path.join(root, 'dist', 'reference', 'redoc.standalone.js');
  let bundle;
  try {
    bundle = require.resolve('redoc/bundles/redoc.standalone.js', { paths: [root] });
  } catch {
    fs.rmSync(target, { force: true });
    return 'SKIPPED: the redoc package is not installed; GET /reference answers 503';
  }
  const version = JSON.parse(fs.readFileSync(path.join(path.dirname(bundle), '..', 'package.json'), 'utf8')).version;
  fs.mkdirSync(path.dirname(target), { recursive: true });
  // Without its source-map comment: the map is not served.
  fs.writeFileSync(target, fs.readFileSync(bundle, 'utf8').replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n'));
  return `redoc ${version}`;
});
fs.writeFileSync(marker, new Date().toISOString());
webPages();

/** The pages for people, by their own script (it prints its own lines); forwards `--if-needed`. */
function webPages() {
  const script = path.join(root, 'scripts', 'build-web.js');
  if (!fs.existsSync(script)) return;
  const args = process.argv.includes('--if-needed') ? ['--if-needed'] : [];
  console.log('build: pages for people (scripts/build-web.js)');
  try {
    execFileSync(process.execPath, [script, ...args], { cwd: root, stdio: 'inherit' });
  } catch {
    process.exit(1);
  }
}
