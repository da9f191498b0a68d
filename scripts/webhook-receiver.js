// webhook-receiver.js: WEBHOOK_SECRET=whsec_… node webhook-receiver.js   (PORT=8080 by default; PORT=0 picks a free port)
const http = require('node:http');
const { createHmac, timingSafeEqual } = require('node:crypto');

const SECRET = process.env.WEBHOOK_SECRET;
const TOLERANCE_S = 300;
const seen = new Set(); // use a unique key in your database in production
if (!SECRET) {
  console.error('set WEBHOOK_SECRET to the endpoint secret (whsec_…)');
  process.exit(1);
}

class Rejected extends Error {}

function verify(rawBody, headers) {
  const id = headers['x-svc-event-id'];
  const ts = headers['x-svc-timestamp'];
  const sig = headers['x-svc-signature'];
  if (!id || !ts || !sig) throw new Rejected('missing header: x-svc-event-id, x-svc-timestamp and x-svc-signature are required');
  if (!/^[0-9]+$/.test(ts)) throw new Rejected('unparseable x-svc-timestamp: not Unix seconds');
  if (!/^v1=[a-f0-9]{64}$/.test(sig)) throw new Rejected('unparseable x-svc-signature: not v1= and 64 hex digits');
  const expected = createHmac('sha256', SECRET).update(`${ts}.`).update(rawBody).digest();
  if (!timingSafeEqual(expected, Buffer.from(sig.slice(3), 'hex'))) throw new Rejected('bad signature: another secret, or the body changed on its way');
  const skew = Math.floor(Date.now() / 1000) - Number(ts);
  if (Math.abs(skew) > TOLERANCE_S) throw new Rejected(`stale timestamp: ${skew} s from this machine's clock (tolerance ${TOLERANCE_S} s)`);
  let event;
  try {
    event = JSON.parse(rawBody.toString('utf8')); // only now
  } catch {
    throw new Rejected('unparseable body: not JSON');
  }
  if (event?.id !== id) throw new Rejected('unparseable body: the envelope id is not x-svc-event-id');
  return event;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let event;
    try {
      event = verify(Buffer.concat(chunks), req.headers);
    } catch (e) {
      if (!(e instanceof Rejected)) throw e;
      console.log(`rejected ${req.method} ${req.url}: ${e.message}`); // the reason, never the body
      res.writeHead(400).end();
      return;
    }
    if (!seen.has(event.id)) {
      // 1. store the event durably (with event.id as a unique key), 2. then mark it seen
      seen.add(event.id);
      console.log('received', event.type, event.id); // never log event.data: it may hold PHI
    }
    res.writeHead(200).end(); // duplicates get 200 too
  });
});
server.listen(Number(process.env.PORT ?? 8080), () => {
  console.log(`webhook receiver listening on http://127.0.0.1:${server.address().port}/ (use it as the endpoint url)`);
});
