#!/usr/bin/env node
/**
 * The pages for people (web/ → dist/web), called by scripts/build.js:
 * - type-checks web/ (its own tsconfig: DOM, Preact's JSX),
 * - bundles each entry with esbuild (minified, no source maps shipped) into dist/web/assets with
 *   content-hashed names (`checkin-7QH2MZ3A.js`),
 * - writes each page's HTML (web/<page>/page.html with its hashed script and stylesheet, each with
 *   its Subresource Integrity hash) into dist/web/pages,
 * - writes dist/web/manifest.json, which the service reads (libs/platform web-pages.ts).
 * `--if-needed` skips all of it when the manifest is newer than every file under web/ (and the sources
 * outside web/ that a page bundles, OUTSIDE below) and this script.
 */
const { execFileSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const root = path.resolve(__dirname, '..');
const src = path.join(root, 'web');
const out = path.join(root, 'dist', 'web');
const manifestFile = path.join(out, 'manifest.json');

/**
 * name: the entry (and asset name prefix); file: its source; page: its HTML template, if it is a
 * page; css: 'file' (a hashed stylesheet the page links) or 'text' (imported as a string: the
 * widget puts its sheet in its own shadow root, since a host page's styles must not reach it).
 */
const ENTRIES = [
  { name: 'checkin', file: 'checkin/main.tsx', page: 'checkin/page.html', css: 'file' },
  { name: 'widget-demo', file: 'widget-demo/main.tsx', page: 'widget-demo/page.html', css: 'file' },
  { name: 'widget', file: 'widget/main.tsx', css: 'text' },
  { name: 'console', file: 'console/main.tsx', page: 'console/page.html', css: 'file' },
];

function newest(dir) {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n = Math.max(n, e.isDirectory() ? newest(p) : fs.statSync(p).mtimeMs);
  }
  return n;
}

// Sources outside web/ that the pages bundle: the console's builder checks drafts with the workflow engine's own validator.
const OUTSIDE = [path.join(root, 'apps', 'workflow-engine', 'src', 'domain'), path.join(root, 'libs', 'decider', 'src')];

if (process.argv.includes('--if-needed') && fs.existsSync(manifestFile)) {
  const built = fs.statSync(manifestFile).mtimeMs;
  if (
    Math.max(newest(src), ...OUTSIDE.map(newest), fs.statSync(__filename).mtimeMs, fs.statSync(path.join(root, 'scripts', 'webhook-receiver.js')).mtimeMs) <
    built
  )
    process.exit(0);
}

execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(src, 'tsconfig.json')], {
  cwd: root,
  stdio: 'inherit',
});

const esbuild = require('esbuild');
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(path.join(out, 'assets'), { recursive: true });
fs.mkdirSync(path.join(out, 'pages'), { recursive: true });

const common = {
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020', 'chrome90', 'firefox90', 'safari15'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  entryNames: '[name]-[hash]',
  outdir: path.join(out, 'assets'),
  metafile: true,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
  define: {
    'process.env.NODE_ENV': '"production"',
    // The console's receiver snippet is the README's receiver itself.
    __WEBHOOK_RECEIVER__: JSON.stringify(fs.readFileSync(path.join(root, 'scripts', 'webhook-receiver.js'), 'utf8')),
  },
};

const integrity = (file) => `sha384-${createHash('sha384').update(fs.readFileSync(file)).digest('base64')}`;
const escapeAttr = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;');

async function main() {
  const manifest = { entries: {}, pages: {} };
  const sizes = [];
  for (const css of ['file', 'text']) {
    const group = ENTRIES.filter((e) => e.css === css);
    if (group.length === 0) continue;
    const result = await esbuild.build({
      ...common,
      entryPoints: Object.fromEntries(group.map((e) => [e.name, path.join(src, e.file)])),
      loader: css === 'text' ? { '.css': 'text' } : {},
    });
    for (const [outPath, meta] of Object.entries(result.metafile.outputs)) {
      if (!meta.entryPoint) continue;
      const entry = group.find((e) => path.resolve(root, meta.entryPoint) === path.join(src, e.file));
      if (!entry) continue;
      const js = path.basename(outPath);
      manifest.entries[entry.name] = { js, ...(meta.cssBundle ? { css: path.basename(meta.cssBundle) } : {}) };
    }
  }
  for (const entry of ENTRIES) {
    const files = manifest.entries[entry.name];
    if (!files) throw new Error(`build-web: no output for ${entry.name}`);
    for (const f of [files.js, files.css].filter(Boolean)) {
      const body = fs.readFileSync(path.join(out, 'assets', f));
      sizes.push({ file: f, bytes: body.length, gzip: zlib.gzipSync(body, { level: 9 }).length });
    }
    if (!entry.page) continue;
    const assets = path.join(out, 'assets');
    const css = files.css ? `<link rel="stylesheet" href="/assets/${files.css}" integrity="${escapeAttr(integrity(path.join(assets, files.css)))}">` : '';
    const js = `<script src="/assets/${files.js}" integrity="${escapeAttr(integrity(path.join(assets, files.js)))}" defer></script>`;
    const template = fs.readFileSync(path.join(src, entry.page), 'utf8');
    if (!template.includes('{{js}}')) throw new Error(`build-web: ${entry.page} has no {{js}}`);
    const html = template.replace('{{css}}', css).replace('{{js}}', js);
    fs.writeFileSync(path.join(out, 'pages', `${entry.name}.html`), html);
    manifest.pages[entry.name] = `${entry.name}.html`;
  }
  fs.writeFileSync(manifestFile, JSON.stringify(manifest, null, 2) + '\n');
  for (const s of sizes) process.stdout.write(`web: ${s.file} ${(s.bytes / 1024).toFixed(1)} KB (gzip ${(s.gzip / 1024).toFixed(1)} KB)\n`);
}

main().catch((err) => {
  process.stderr.write(`build-web failed: ${err.message}\n`);
  process.exit(1);
});
