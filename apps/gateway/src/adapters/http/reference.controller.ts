import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Controller, Get, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiError, getLogger } from '@svc/http';

/**
 * The HTTP contract and its human-readable reference page (docs/decisions.md, "Operations (health, settings, rate limits, deployment)"), served by the public
 * address without credentials:
 * - `GET /openapi.json`: contracts/openapi.yaml as JSON. The build converts it into
 *   `dist/contracts/openapi.json` (scripts/build.js), so the running service parses no YAML; run
 *   from the sources (tests), the YAML is read and converted at the first request.
 * - `GET /reference`: a page that renders that contract with Redoc's standalone browser bundle,
 *   which the build copies from the `redoc` package into `dist/reference/` and this controller
 *   serves itself (`GET /reference/redoc.standalone.js`). Nothing is loaded from another origin;
 *   the page's Content-Security-Policy says so to the browser.
 */
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // Redoc styles its components at run time (styled-components inserts <style> elements).
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  // The contract, fetched by the page from beside it.
  "connect-src 'self'",
  // Redoc's search index runs in a worker it makes from its own code (a blob: URL).
  'worker-src blob:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Relative URLs: the page works under whatever prefix the base URL has. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Patient-Care Integration Service: API reference</title>
</head>
<body>
<redoc spec-url="openapi.json"></redoc>
<script src="reference/redoc.standalone.js"></script>
</body>
</html>
`;

/** The folder above `from` (itself included) that holds `contracts/`, or null. */
function contractsRoot(from: string): string | null {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'contracts', 'openapi.json')) || existsSync(join(dir, 'contracts', 'openapi.yaml'))) return dir;
    if (dirname(dir) === dir) return null;
  }
}

let contractJson: string | undefined;

/** The contract as JSON text: the build's conversion in dist, else the YAML of the sources (read once per process). */
export function contractAsJson(): string {
  if (contractJson !== undefined) return contractJson;
  const root = contractsRoot(__dirname);
  if (!root) throw new Error('contracts/openapi.yaml not found');
  const built = join(root, 'contracts', 'openapi.json');
  if (existsSync(built)) contractJson = readFileSync(built, 'utf8');
  else {
    // Only from the sources, where dev dependencies (yaml) are installed.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { parse } = require('yaml') as typeof import('yaml');
    contractJson = JSON.stringify(parse(readFileSync(join(root, 'contracts', 'openapi.yaml'), 'utf8')));
  }
  return contractJson;
}

let referenceScript: Buffer | null | undefined;

/** Redoc's standalone bundle: the build's copy in dist, else the installed `redoc` package's; null when neither is there. */
export function referenceScriptBundle(): Buffer | null {
  if (referenceScript !== undefined) return referenceScript;
  const root = contractsRoot(__dirname);
  const built = root ? join(root, 'reference', 'redoc.standalone.js') : null;
  let file: string | null = built && existsSync(built) ? built : null;
  if (!file) {
    try {
      file = require.resolve('redoc/bundles/redoc.standalone.js');
    } catch {
      file = null;
    }
  }
  // The package's bundle ends with a source-map comment: the map is not served (the build strips it too).
  referenceScript = file ? Buffer.from(readFileSync(file, 'utf8').replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n')) : null;
  if (!referenceScript) getLogger().warn({}, 'API reference bundle not found (the redoc package is not installed): GET /reference answers 503');
  return referenceScript;
}

const referenceMissing = () => new ApiError(503, 'UNAVAILABLE', 'The API reference page was not built into this service');

@Controller()
export class ReferenceController {
  @Get('openapi.json')
  contract(@Res({ passthrough: true }) reply: FastifyReply): string {
    reply.header('content-type', 'application/json; charset=utf-8');
    return contractAsJson();
  }

  @Get('reference')
  page(@Res({ passthrough: true }) reply: FastifyReply): string {
    if (!referenceScriptBundle()) throw referenceMissing();
    reply.header('content-type', 'text/html; charset=utf-8');
    reply.header('content-security-policy', PAGE_CSP);
    return PAGE;
  }

  @Get('reference/redoc.standalone.js')
  script(@Res({ passthrough: true }) reply: FastifyReply): Buffer {
    const bundle = referenceScriptBundle();
    if (!bundle) throw referenceMissing();
    reply.header('content-type', 'text/javascript; charset=utf-8');
    return bundle;
  }
}
