import { MemorySeenStore, signWebhook, verifyWebhook } from '../src/webhooks';

describe('verifyWebhook envelope', () => {
  const now = new Date('2026-01-01T00:10:00Z');
  const ts = Math.floor(now.getTime() / 1000);
  const signed = (envelope: unknown) => {
    const body = JSON.stringify(envelope);
    return {
      rawBody: body,
      headers: { 'x-svc-event-id': 'e1', 'x-svc-timestamp': String(ts), 'x-svc-signature': signWebhook('s', ts, body) },
      secret: 's',
      now,
      seen: null,
    };
  };
  const full = { id: 'e1', type: 'subscription.updated', createdAt: '2026-01-01T00:09:59.000Z', data: { status: 'active' } };

  it('accepts an envelope with id, type, createdAt and data', async () => {
    await expect(verifyWebhook(signed(full))).resolves.toEqual(full);
  });

  it.each([
    ['no id', { type: full.type, createdAt: full.createdAt, data: full.data }],
    ['another id', { ...full, id: 'e2' }],
    ['no type', { id: 'e1', createdAt: full.createdAt, data: full.data }],
    ['empty type', { ...full, type: '' }],
    ['no createdAt', { id: 'e1', type: full.type, data: full.data }],
    ['createdAt not a date-time', { ...full, createdAt: 'yesterday' }],
    ['createdAt a number', { ...full, createdAt: 1767225599 }],
    ['no data', { id: 'e1', type: full.type, createdAt: full.createdAt }],
    ['data null', { ...full, data: null }],
    ['data an array', { ...full, data: [] }],
    ['data a string', { ...full, data: 'x' }],
    ['not an object', [full]],
  ])('refuses an envelope with %s (BAD_PAYLOAD), and does not mark it seen', async (_what, envelope) => {
    const seen = new MemorySeenStore();
    await expect(verifyWebhook({ ...signed(envelope), seen })).rejects.toMatchObject({ code: 'BAD_PAYLOAD' });
    expect(seen.checkAndAdd('e1')).toBe(false);
  });
});
