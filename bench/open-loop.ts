/**
 * The two ways the webhook bench's caller sends its open requests, shared by the in-process caller
 * and the child process (open-client-child.ts): closed loop (`concurrency` callers, each sending its
 * next request when the previous one answered) or open loop (request i due at start + i/rate).
 * `one` sends one request; the results come back in completion order.
 */
export async function runOpens<T>(bodies: string[], concurrency: number, rate: number | undefined, one: (body: string) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  if (rate) {
    const t0 = performance.now();
    const pending: Promise<void>[] = [];
    for (let i = 0; i < bodies.length; i++) {
      const wait = t0 + (i * 1000) / rate - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      pending.push(one(bodies[i]).then((x) => void out.push(x)));
    }
    await Promise.all(pending);
    return out;
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) out.push(await one(bodies[next++]));
    }),
  );
  return out;
}
