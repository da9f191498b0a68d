#!/usr/bin/env node
/**
 * Build: type-check and compile with tsc, rewrite the @svc/* aliases to relative paths
 * (tsc-alias), then write dist/apps/<app>/main.js entry points (decisions section 1).
 * `--if-needed` skips the build when dist is newer than every source file.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const apps = ['standalone', 'gateway', 'patient-pathway', 'case-ledger', 'conversation', 'workflow-engine', 'webhook-dispatcher'];
const marker = path.join(root, 'dist', '.build-stamp');

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
  const src = Math.max(...['apps', 'libs', 'bench'].map((d) => newestSource(path.join(root, d))));
  if (src < built) process.exit(0);
}

const bin = (name) => path.join(root, 'node_modules', '.bin', name);
if (process.argv.includes('--clean')) fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
execFileSync(bin('tsc'), ['-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
execFileSync(bin('tsc-alias'), ['-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
for (const app of apps) {
  const entry = path.join(root, 'dist', 'apps', app, 'main.js');
  if (fs.existsSync(path.join(root, 'dist', 'apps', app, 'src', 'main.js'))) {
    fs.writeFileSync(entry, "require('./src/main');\n");
  }
}
fs.writeFileSync(marker, new Date().toISOString());
