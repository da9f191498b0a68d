#!/usr/bin/env node
/** Builds the package: a clean dist/ from src/ with tsc (JavaScript and .d.ts). */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
fs.rmSync(path.join(pkg, 'dist'), { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc', { paths: [pkg] }), '-p', path.join(pkg, 'tsconfig.json')], {
  cwd: pkg,
  stdio: 'inherit',
});
