/**
 * The worker thread of PayloadCrypto (payload-crypto.ts): answers each request in order, with the
 * texts or with the error's message (which never holds payload data); `stop` ends the thread.
 */
import { parentPort } from 'node:worker_threads';
import { PayloadCryptoRequest, handlePayloadCrypto } from './payload-crypto';

const keys = new Map<string, Buffer>();
const port = parentPort;
if (port) {
  port.on('message', (m: PayloadCryptoRequest | 'stop') => {
    if (m === 'stop') {
      port.close();
      return;
    }
    try {
      port.postMessage({ id: m.id, out: handlePayloadCrypto(m, keys) });
    } catch (err) {
      port.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
}
