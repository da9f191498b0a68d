import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/**
 * Layers point inward (docs/decisions.md, "Layers and import rules"): loading a compiled domain
 * module loads only domain code of its own app, the dependency-free core (libs/decider), the
 * clinical language (libs/clinical) and, from node_modules, only the dependency-free packages
 * listed here. Never a driver (better-sqlite3, pg, ioredis, kafkajs, the KurrentDB client), never
 * a framework (@nestjs/*, rxjs), never a barrel that re-exports adapters.
 *
 * Each module is required in a fresh `node` process from dist/ (as the service runs it) and the
 * process lists every file it loaded (`require.cache`). The build runs first when dist is older
 * than the sources (`scripts/build.js --if-needed`, as `npm test` does).
 */
const root = join(__dirname, '..', '..');

/** Packages a domain module may load: pure JavaScript, no I/O, no dependencies of their own. */
const ALLOWED_PACKAGES = ['immutable', 'snowball-stemmers'];
/** Project code outside the app's own domain that a domain module may load. */
const ALLOWED_LIBS = ['libs/decider', 'libs/clinical'];
/** Named in the failure when loaded, so the report says what went wrong at a glance. */
const DRIVERS_AND_FRAMEWORKS = /^(better-sqlite3|pg|pg-[a-z-]+|kafkajs|ioredis|@nestjs\/[^/]+|@kurrent\/[^/]+|@eventstore\/[^/]+|rxjs)$/;

function domainSources(): { app: string; file: string }[] {
  const found: { app: string; file: string }[] = [];
  const walk = (app: string, dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(app, p);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') && !/\.(spec|e2e-spec)\.ts$/.test(entry.name))
        found.push({ app, file: relative(root, p) });
    }
  };
  for (const app of readdirSync(join(root, 'apps'))) {
    const dir = join(root, 'apps', app, 'src', 'domain');
    if (existsSync(dir)) walk(app, dir);
  }
  return found.sort((a, b) => a.file.localeCompare(b.file));
}

/** The package a node_modules path belongs to (`@scope/name` or `name`), for the innermost node_modules. */
function packageOf(path: string): string {
  const parts = path.split(sep);
  const i = parts.lastIndexOf('node_modules');
  return parts[i + 1].startsWith('@') ? `${parts[i + 1]}/${parts[i + 2]}` : parts[i + 1];
}

const modules = domainSources();

describe('compiled domain modules load no driver, framework or adapter', () => {
  beforeAll(() => {
    const build = spawnSync(process.execPath, [join(root, 'scripts', 'build.js'), '--if-needed'], { cwd: root, encoding: 'utf8' });
    if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}\n${build.stderr}`);
  }, 600_000);

  it('finds the domain modules of every app', () => {
    expect(modules.length).toBeGreaterThan(20);
    expect(new Set(modules.map((m) => m.app)).size).toBeGreaterThanOrEqual(6);
  });

  it.each(modules.map((m) => [m.file, m.app]))('%s', (file, app) => {
    const compiled = join(root, 'dist', file.replace(/\.ts$/, '.js'));
    expect({ compiled: relative(root, compiled), exists: existsSync(compiled) }).toEqual({ compiled: relative(root, compiled), exists: true });
    const child = spawnSync(process.execPath, ['-e', 'require(process.argv[1]); process.stdout.write(JSON.stringify(Object.keys(require.cache)))', compiled], {
      cwd: root,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    if (child.status !== 0) throw new Error(`loading ${compiled} failed:\n${child.stderr}`);
    const loaded = (JSON.parse(child.stdout) as string[]).map((f) => relative(root, f));
    // The module itself was loaded: the list below is what it pulled in, not an empty run.
    expect(loaded).toContain(relative(root, compiled));

    const ownDomain = join('dist', 'apps', app, 'src', 'domain') + sep;
    const allowedProject = [ownDomain, ...ALLOWED_LIBS.map((l) => join('dist', l) + sep)];
    const packages = new Set<string>();
    const strayProjectFiles: string[] = [];
    for (const f of loaded) {
      if (f.split(sep).includes('node_modules')) packages.add(packageOf(f));
      else if (!allowedProject.some((prefix) => f.startsWith(prefix))) strayProjectFiles.push(f);
    }
    const driversAndFrameworks = [...packages].filter((p) => DRIVERS_AND_FRAMEWORKS.test(p)).sort();
    const otherPackages = [...packages].filter((p) => !DRIVERS_AND_FRAMEWORKS.test(p) && !ALLOWED_PACKAGES.includes(p)).sort();
    expect({ modulesLoaded: loaded.length, driversAndFrameworks, otherPackages, strayProjectFiles: strayProjectFiles.slice(0, 10) }).toEqual({
      modulesLoaded: loaded.length,
      driversAndFrameworks: [],
      otherPackages: [],
      strayProjectFiles: [],
    });
  });
});
