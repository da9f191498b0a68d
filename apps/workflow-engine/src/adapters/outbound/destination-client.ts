import { isIP } from 'node:net';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { guardedLookup, isBlockedAddress, signDestinationCall } from '@svc/security';
import type { CallOutcome, DestinationClientPort, SignedCall } from '../../application/destination-client.port';

/** Production calls resolve through the shared guard: every address of the answer is checked at connect time. */
const productionLookup = guardedLookup();

/** A `.` or `..` path segment, plain or percent-encoded (the URL parser resolves `%2e%2e` too). */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/**
 * The URL actually requested: the destination's address (with its own path) plus the step's path.
 * A dot segment in the step's path (a substituted value of `.` or `..`: encodeURIComponent keeps
 * dots) would be resolved away by the URL parser and send the signed call to another resource,
 * or out of the Destination's base path: refused (the call fails, nothing is sent).
 */
export function targetUrl(baseUrl: string, path: string): URL {
  const base = new URL(baseUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const [p, q] = path.split(/\?(.*)/s, 2);
  const stepPath = p ? (p.startsWith('/') ? p : `/${p}`) : '';
  // As the URL parser reads an http(s) path: tab, CR and LF dropped, `\` a separator like `/`.
  if (
    stepPath
      .replace(/[\t\n\r]/g, '')
      .split(/[\\/]/)
      .some((segment) => DOT_SEGMENT.test(segment))
  )
    throw new Error('dot segment in the path');
  const url = new URL(base.origin);
  url.pathname = `${basePath}${stepPath}` || '/';
  url.search = [base.search.replace(/^\?/, ''), q ?? ''].filter(Boolean).join('&');
  return url;
}

/** `v1=` + hex HMAC-SHA256 of `<ts>.<METHOD> <path and query>\n<raw body>` (the receiver package's scheme, shared). */
export function signature(secret: string, ts: number, method: string, pathAndQuery: string, rawBody: string): string {
  return signDestinationCall(secret, ts, method, pathAndQuery, rawBody);
}

const MAX_RESPONSE_BYTES = 1024 * 1024;

/**
 * One attempt, no redirects followed, signed (docs/decisions.md, "Destinations and calls"). Never logs headers or bodies. Never
 * rejects: anything that throws while building the request (a header value Node refuses, a bad
 * URL) is a failed call (`invalid_request`), which the step answers with its errorReply.
 */
export async function callDestination(c: SignedCall): Promise<CallOutcome> {
  try {
    return await attempt(c);
  } catch {
    let pathAndQuery = '';
    try {
      const u = targetUrl(c.baseUrl, c.path);
      pathAndQuery = `${u.pathname}${u.search}`;
    } catch {
      pathAndQuery = '';
    }
    return { kind: 'failed', reason: 'invalid_request', pathAndQuery };
  }
}

/** The application's DestinationClientPort, bound by the module. */
export const destinationClient: DestinationClientPort = { call: callDestination };

function attempt(c: SignedCall): Promise<CallOutcome> {
  const url = targetUrl(c.baseUrl, c.path);
  const pathAndQuery = `${url.pathname}${url.search}`;
  const rawBody = c.body ?? '';
  return new Promise((resolve) => {
    if (c.production && isIP(url.hostname.replace(/^\[|\]$/g, '')) && isBlockedAddress(url.hostname.replace(/^\[|\]$/g, ''))) {
      return resolve({ kind: 'failed', reason: 'refused_address', pathAndQuery });
    }
    const headers: Record<string, string> = {
      ...c.headers,
      'x-svc-timestamp': String(c.nowS),
      'x-svc-signature': signature(c.secret, c.nowS, c.method, pathAndQuery, rawBody),
      accept: 'application/json',
    };
    if (c.body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(rawBody));
    }
    const requester = url.protocol === 'https:' ? httpsRequest : httpRequest;
    let settled = false;
    const done = (o: CallOutcome) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        resolve(o);
      }
    };
    const req = requester(url, { method: c.method, headers, ...(c.production ? { lookup: productionLookup } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (ch: Buffer) => {
        size += ch.length;
        if (size > MAX_RESPONSE_BYTES) {
          req.destroy();
          done({ kind: 'failed', reason: 'invalid_response', pathAndQuery });
        } else chunks.push(ch);
      });
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = undefined;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = undefined;
        }
        done({ kind: 'response', status: res.statusCode ?? 0, body, pathAndQuery });
      });
      res.on('error', () => done({ kind: 'failed', reason: 'network', pathAndQuery }));
    });
    const timer = setTimeout(
      () => {
        req.destroy();
        done({ kind: 'failed', reason: 'timeout', pathAndQuery });
      },
      Math.max(1, Math.min(c.timeoutMs, 5000)),
    );
    req.on('error', (err: NodeJS.ErrnoException) => done({ kind: 'failed', reason: err.code === 'ESVCBLOCKED' ? 'refused_address' : 'network', pathAndQuery }));
    req.end(c.body !== undefined ? rawBody : undefined);
  });
}
